// The caller's machines (from the store: status is online if its agent synced in the last
// 3 minutes), how many of my workloads each holds, and revoking one; enrolment tokens that
// let another machine join (`einsora agent join`), shown once, listed, revoked.

import { api, poll } from '../api.js';
import { h, confirmDialog, describe, errorBox, field, setOptions, shownOnce, table } from '../dom.js';
import { gib, gpuUse, time, vmHost } from '../format.js';

const MACHINE_COLUMNS = ['Name', 'Region', 'System', 'CPUs', 'Memory', 'GPUs', 'Status', 'My workloads', 'Actions'];
const TOKEN_COLUMNS = ['Name', 'Prefix', 'Region', 'Created', 'Expires', 'Status', 'Actions'];

/** @type {import('../app.js').Page['render']} */
export function render(main) {
  const machineRows = h('tbody');
  const machinesEmpty = h('p', { class: 'empty' }, 'Loading…');
  const machinesProblem = h('div', { class: 'problem' });
  const refreshProblem = h('p', { class: 'problem', 'aria-live': 'polite' });
  const tokenRows = h('tbody');
  const tokensEmpty = h('p', { class: 'empty' }, 'Loading…');
  const tokensProblem = h('div', { class: 'problem' });
  const created = h('div', { class: 'created' });
  let drawnMachines = '';
  let drawnTokens = '';

  async function refresh() {
    try {
      const [machines, tokens] = await Promise.all([api.get('/v1/machines'), api.get('/v1/enrolment-tokens')]);
      refreshProblem.replaceChildren();
      drawMachines(machines.machines ?? []);
      drawTokens(tokens.enrolment_tokens ?? []);
    } catch (error) {
      const { message, requestId } = describe(error);
      refreshProblem.replaceChildren(`Couldn't refresh: ${message}${requestId ? ` (Request ID: ${requestId})` : ''}`);
    }
  }

  /** @param {any[]} machines */
  function drawMachines(machines) {
    // Redrawn only when something changed, so a focused button stays focused.
    const key = JSON.stringify(machines.map(({ last_seen_at: _, ...m }) => m));
    if (key === drawnMachines) return;
    drawnMachines = key;
    machineRows.replaceChildren(
      ...machines.map((m) => {
        // Each device, and the workload holding it (the reader's own), or that it is free.
        const devices = (m.devices ?? []).map((/** @type {import('../api-types').Device} */ d) => {
          const holders = d.workload_ids ?? [];
          const held = holders.length
            ? holders.map((id) => h('a', { href: `/workloads/${encodeURIComponent(id)}` }, 'in use'))
            : ['free'];
          // How busy it was at the agent's last sample (every few seconds), once there is one.
          const use = d.gpu_use ? [` · ${gpuUse(d.gpu_use, d.memory_bytes)}`] : [];
          return h('li', {}, `${d.model} · `, ...held, ...use);
        });
        const listed = devices.length ? h('ul', { class: 'devices' }, ...devices) : 'None';
        // Why its GPUs aren't offered (Docker can't use them), in words its owner can act on.
        const gpus = m.gpu_note ? h('div', {}, listed, h('p', { class: 'hint' }, m.gpu_note)) : listed;
        const revoked = m.status === 'revoked';
        const revoke = h('button', { type: 'button', class: 'danger small' }, 'Revoke');
        revoke.addEventListener('click', async () => {
          const yes = await confirmDialog({
            title: `Revoke ${m.name}?`,
            body: 'Its agent can no longer connect and it is never offered for placement again; its workloads are treated as on an offline machine. This can\u2019t be undone: to use it again, enrol it as a new machine.',
            confirm: 'Revoke',
          });
          if (!yes) return revoke.focus();
          machinesProblem.replaceChildren();
          try {
            await api.post('/v1/machines/{id}/revoke', {}, { params: { id: m.id } });
          } catch (error) {
            machinesProblem.replaceChildren(errorBox(error));
          }
          await refresh();
        });
        return h(
          'tr',
          {},
          h('th', { scope: 'row' }, m.name),
          h('td', {}, m.region),
          h(
            'td',
            {},
            [m.os, m.arch].filter(Boolean).join(' '),
            // How it runs VMs, where its agent has a driver that does.
            m.vm ? h('p', { class: 'hint' }, vmHost(m.vm)) : '',
          ),
          h(
            'td',
            { class: 'number' },
            // A Mac's performance and efficiency cores, where its agent reported them.
            m.cores
              ? `${m.cpus ?? 0} (${m.cores.performance ?? 0}P + ${m.cores.efficiency ?? 0}E)`
              : String(m.cpus ?? 0),
          ),
          h('td', { class: 'number' }, gib(m.memory_bytes)),
          h('td', {}, gpus),
          h('td', {}, h('span', { class: `status status-${m.status}` }, m.status ?? 'unknown')),
          h('td', { class: 'number' }, String(m.workload_count ?? 0)),
          h('td', {}, revoked ? time(m.revoked_at, '') : revoke),
        );
      }),
    );
    machinesEmpty.hidden = machines.length > 0;
    machinesEmpty.textContent = 'No machines yet: enrol one with a token below.';
  }

  /** @param {any[]} tokens */
  function drawTokens(tokens) {
    const key = JSON.stringify(tokens);
    if (key === drawnTokens) return;
    drawnTokens = key;
    const now = Date.now();
    tokenRows.replaceChildren(
      ...tokens.map((t) => {
        const expired = t.expires_at && Date.parse(t.expires_at) <= now;
        const state = t.revoked_at ? 'revoked' : t.used_at ? 'used' : expired ? 'expired' : 'unused';
        const revoke = h('button', { type: 'button', class: 'danger small' }, 'Revoke');
        revoke.addEventListener('click', async () => {
          tokensProblem.replaceChildren();
          try {
            await api.delete('/v1/enrolment-tokens/{id}', { params: { id: t.id } });
          } catch (error) {
            tokensProblem.replaceChildren(errorBox(error));
          }
          await refresh();
        });
        return h(
          'tr',
          {},
          h('th', { scope: 'row' }, t.name),
          h('td', {}, h('code', {}, t.prefix)),
          h('td', {}, t.region),
          h('td', {}, time(t.created_at)),
          h('td', {}, time(t.expires_at)),
          h('td', {}, state),
          h('td', {}, state === 'unused' ? revoke : ''),
        );
      }),
    );
    tokensEmpty.hidden = tokens.length > 0;
    tokensEmpty.textContent = 'No enrolment tokens.';
  }

  const name = h('input', { id: 'enrol-name', name: 'name', required: true, autocomplete: 'off', maxlength: 64 });
  const region = h('select', { id: 'enrol-region', name: 'region' });
  const submit = h('button', { type: 'submit' }, 'Create enrolment token');
  api.get('/v1/catalog').then(
    (catalog) => {
      const regions = (catalog.regions ?? []).map((/** @type {any} */ r) => ({ value: r.name, text: r.name }));
      setOptions(region, regions, regions[0]?.value ?? '');
    },
    () => {
      // Without the catalog the token joins the default region.
    },
  );
  const form = h(
    'form',
    { class: 'stack', novalidate: true },
    field('Machine name', name, 'For you to recognise the token by; the machine reports its own hostname.'),
    field('Region', region, 'The region the machine joins.'),
    tokensProblem,
    h('div', { class: 'actions' }, submit),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    tokensProblem.replaceChildren();
    created.replaceChildren();
    submit.disabled = true;
    try {
      /** @type {import('../api.js').Post['/v1/enrolment-tokens']['body']} */
      const body = { name: name.value.trim() };
      if (region.value) body.region = region.value;
      const answer = await api.post('/v1/enrolment-tokens', body);
      created.replaceChildren(joinCommand(answer));
      name.value = '';
      await refresh();
    } catch (error) {
      tokensProblem.replaceChildren(errorBox(error));
    } finally {
      submit.disabled = false;
    }
  });

  main.append(
    h('h1', { tabindex: -1 }, 'Machines'),
    refreshProblem,
    machinesProblem,
    table('Your machines', MACHINE_COLUMNS, machineRows),
    machinesEmpty,
    h(
      'section',
      { 'aria-labelledby': 'enrolment-tokens', class: 'card' },
      h('h2', { id: 'enrolment-tokens' }, 'Enrolment tokens'),
      h(
        'p',
        {},
        'A machine joins your tenant with a token: single use, valid for an hour, and only made from a signed-in browser.',
      ),
      form,
      created,
      table('Enrolment tokens', TOKEN_COLUMNS, tokenRows),
      tokensEmpty,
    ),
  );
  return poll(refresh, 5000);
}

/**
 * The new token, shown this once, inside the command that uses it.
 * @param {any} answer
 * @returns {HTMLElement}
 */
function joinCommand(answer) {
  const command = `einsora agent join --token ${answer.token} --controller https://<controller>:<port>`;
  const lead = [
    h('p', {}, h('strong', {}, 'Copy it now: the token is shown only once.'), ` It expires `, time(answer.enrolment_token?.expires_at), '.'),
    h('p', {}, 'On the machine that joins, run:'),
  ];
  const hint = h(
    'p',
    { class: 'hint' },
    'Replace ',
    h('code', {}, '<controller>:<port>'),
    ' with the address that machine reaches this controller\u2019s agent port at (its ',
    h('code', {}, 'EINSORA_AGENT_ADDR'),
    ', 8443 by default).',
  );
  return shownOnce(lead, command, 'command', hint);
}
