// One workload: what it is and where it runs, its timeline (newest last), kept current by
// polling every 2 s; Stop, Start, Delete (confirmed in a dialog); Open for a running
// notebook (a one-time link, opened in a new tab); the API base URL for an endpoint, with a
// curl example that uses an API token, never the dashboard's cookie; for a VM, how to reach it
// over SSH (`einsora ssh`, or the config for people's own clients). Two tabs: Overview, and
// Logs (pages/logs.js: its output, followed live); `?tab=logs` opens the second.

import { api, poll } from '../api.js';
import { h, confirmDialog, copyButton, describe, errorBox } from '../dom.js';
import { accelWords, gpuUse, orDash, stateBadge, time } from '../format.js';
import { logsPanel } from './logs.js';

/** @type {import('../app.js').Page['render']} */
export function render(main, [id], context) {
  const it = { params: { id } };
  const title = h('h1', { tabindex: -1 }, 'Workload');
  const facts = h('dl', { class: 'facts' });
  const timeline = h('ol', { class: 'timeline' });
  const actionProblem = h('div', { class: 'problem' });
  const refreshProblem = h('p', { class: 'problem', 'aria-live': 'polite' });
  const endpoint = h('section', { class: 'card', 'aria-labelledby': 'endpoint-api', hidden: true });
  const ssh = h('section', { class: 'card', 'aria-labelledby': 'vm-ssh', hidden: true });

  const stop = h('button', { type: 'button', disabled: true }, 'Stop');
  const start = h('button', { type: 'button', disabled: true }, 'Start');
  const remove = h('button', { type: 'button', class: 'danger', disabled: true }, 'Delete');
  const open = h('button', { type: 'button', disabled: true, hidden: true }, 'Open');
  const openHint = h('p', { class: 'hint', hidden: true }, 'Open works while the notebook is running.');

  /** @type {import('../api-types').Workload | null} */
  let workload = null;
  /** @type {Map<string, string>} machine ID → name */
  const machineNames = new Map();
  /** @type {Map<string, string>} machine ID → how it runs VMs (`kvm`, `tcg`) */
  const machineAccel = new Map();
  /** The endpoint's base URL, once known. */
  let baseUrl = '';
  /** Whether the SSH card drawn is a running VM's (its commands) or not (a sentence); '' none yet. */
  let sshDrawn = '';
  let gone = false;
  let busy = false;

  async function refresh() {
    if (gone) return;
    try {
      const [w, history] = await Promise.all([
        api.get('/v1/workloads/{id}', { ...it, query: { include_deleted: 'true' } }),
        api.get('/v1/workloads/{id}/events', it),
      ]);
      if (w.machine_id && !machineNames.has(w.machine_id)) await learnMachines();
      workload = w;
      logs.workloadIs(w);
      refreshProblem.replaceChildren();
      draw(history.events ?? []);
      if (w.kind === 'endpoint' && w.state === 'running' && !baseUrl) await learnBaseUrl();
    } catch (error) {
      const status = error && typeof error === 'object' && 'status' in error ? error.status : 0;
      if (!workload && (status === 404 || status === 400)) {
        gone = true;
        title.textContent = 'Workload not found';
        main.replaceChildren(title, h('p', {}, 'There is no such workload in your tenant.'));
        return;
      }
      const { message, requestId } = describe(error);
      refreshProblem.replaceChildren(
        `Couldn't refresh: ${message}${requestId ? ` (Request ID: ${requestId})` : ''}`,
      );
    }
  }

  async function learnMachines() {
    const answer = await api.get('/v1/machines');
    for (const m of answer.machines ?? []) {
      machineNames.set(m.id, m.name);
      if (m.vm?.accel) machineAccel.set(m.id, m.vm.accel);
    }
  }

  async function learnBaseUrl() {
    try {
      const grant = await api.post('/v1/workloads/{id}/access', {}, it);
      baseUrl = grant.endpoint?.base_url ?? '';
      drawEndpoint();
    } catch {
      // It stopped in between; the next refresh tries again.
    }
  }

  /** @param {any[]} events  oldest first */
  function draw(events) {
    const w = workload;
    if (!w) return;
    if (title.textContent !== w.name) {
      title.textContent = w.name;
      document.title = `${w.name} · Einsora`;
    }
    const machine = w.machine_id ? machineNames.get(w.machine_id) || w.machine_id : '';
    /** @type {[string, string | Node][]} */
    const rows = [
      ['State', stateBadge(w.state ?? '')],
      ['Reason', orDash(w.state_reason)],
      ['Kind', orDash(w.kind)],
      ['Region', orDash(w.region)],
      ['Requested class', orDash(w.gpu_class)],
      ['Placed class', orDash(w.placed_class)],
      ['Machine', orDash(machine)],
      ['Driver', orDash(w.driver)],
      ['Image', orDash(w.image)],
    ];
    if (w.kind === 'endpoint') {
      // The name requests to the one base URL (<access URL>/v1) give as their model.
      rows.push(
        ['Model', orDash(w.endpoint?.model)],
        ['Served as', orDash(w.endpoint?.served_name)],
        // Scale-to-zero: it stops after this long without requests, and a request wakes it.
        ['Parks when idle', idleAfter(w.endpoint?.park_after_idle_s)],
      );
    }
    // How its machine runs VMs: hardware virtualisation, or qemu's emulation.
    if (w.kind === 'vm' && w.machine_id) {
      rows.push(['Acceleration', orDash(accelWords(machineAccel.get(w.machine_id) ?? ''))]);
    }
    // Its GPUs by UUID, and how busy they were at its machine's last sample.
    if (w.device_uuids?.length) {
      rows.push(['GPUs', w.device_uuids.join(', ')], ['GPU use', gpuUse(w.gpu_use)]);
    }
    rows.push(['Created', time(w.created_at)], ['ID', h('code', {}, w.id)]);
    const fresh = rows.map(([term, value]) => h('div', {}, h('dt', {}, term), h('dd', {}, value)));
    if (facts.textContent !== fresh.map((d) => d.textContent).join('')) facts.replaceChildren(...fresh);

    // The timeline only grows: new events are appended, so nothing already read moves.
    if (events.length < timeline.children.length) timeline.replaceChildren();
    for (const event of events.slice(timeline.children.length)) {
      const what = event.note ? 'note' : event.to_state;
      timeline.append(
        h(
          'li',
          {},
          h('span', { class: 'what' }, event.reason ? `${what}: ${event.reason}` : what),
          ' ',
          h('span', { class: 'when' }, time(event.at)),
        ),
      );
    }
    drawButtons();
    drawEndpoint();
    drawSsh();
  }

  function drawButtons() {
    const state = workload?.state ?? '';
    stop.disabled = busy || !['provisioning', 'running'].includes(state);
    start.disabled = busy || !['stopped', 'failed'].includes(state);
    remove.disabled = busy || ['deleting', 'deleted', ''].includes(state);
    const notebook = workload?.kind === 'notebook';
    const openable = notebook && state === 'running' && Boolean(workload?.machine_id);
    open.hidden = !notebook;
    openHint.hidden = !notebook || openable;
    open.disabled = busy || !openable;
  }

  function drawEndpoint() {
    const w = workload;
    endpoint.hidden = w?.kind !== 'endpoint';
    if (!w || endpoint.hidden) return;
    const heading = h('h2', { id: 'endpoint-api' }, 'API');
    if (w.state !== 'running' || !baseUrl) {
      const text = 'Its base URL appears here while the endpoint is running.';
      if (endpoint.textContent !== `API${text}`) endpoint.replaceChildren(heading, h('p', {}, text));
      return;
    }
    if (endpoint.querySelector('.base-url')?.textContent === baseUrl) return;
    const example = [
      'curl -H "Authorization: Bearer $EINSORA_TOKEN" \\',
      "  -H 'Content-Type: application/json' \\",
      `  -d '{"messages":[{"role":"user","content":"Hello"}]}' \\`,
      `  ${baseUrl}/chat/completions`,
    ].join('\n');
    endpoint.replaceChildren(
      heading,
      h('p', {}, 'Base URL (OpenAI-compatible): ', h('code', { class: 'base-url' }, baseUrl)),
      h(
        'p',
        { class: 'hint' },
        'It answers API tokens, never the dashboard\u2019s session: create a token under API tokens, then ',
        h('code', {}, 'export EINSORA_TOKEN=tsk_…'),
        '.',
      ),
      h('pre', { class: 'example' }, h('code', {}, example)),
      copyButton(() => example),
    );
  }

  // A VM's SSH card never asks for access: its grant is a one-time ticket for `einsora
  // ssh-proxy`, which asks for its own each session; the dashboard neither needs nor shows one.
  function drawSsh() {
    const w = workload;
    ssh.hidden = w?.kind !== 'vm';
    if (!w || ssh.hidden) return;
    const running = w.state === 'running' ? 'running' : 'not running';
    // Drawn again only when that changes: a redraw every poll would take the focus off Copy.
    if (sshDrawn === running) return;
    sshDrawn = running;
    const heading = h('h2', { id: 'vm-ssh' }, 'SSH');
    if (running !== 'running') {
      ssh.replaceChildren(heading, h('p', {}, 'It can be reached over SSH once it is running.'));
      return;
    }
    const command = `einsora ssh ${w.id}`;
    const config = sshConfig(w.id);
    ssh.replaceChildren(
      heading,
      h('p', {}, 'With the Einsora CLI, signed in to this tenant:'),
      h('pre', { class: 'example' }, h('code', { class: 'command' }, command)),
      copyButton(() => command, 'Copy the command'),
      h('p', {}, 'Or with your own SSH client: add this to ', h('code', {}, '~/.ssh/config'), ', then ', h('code', {}, `ssh einsora-${w.id}`), '.'),
      h('pre', { class: 'example' }, h('code', { class: 'ssh-config' }, config)),
      copyButton(() => config, 'Copy the SSH config'),
      h(
        'p',
        { class: 'hint' },
        'Either way it logs in as einsora with a key given at launch (-i picks which), through the access proxy: the CLI must be installed and signed in, and no port is opened.',
      ),
    );
  }

  /**
   * @param {HTMLButtonElement} button
   * @param {() => Promise<unknown>} action
   */
  async function act(button, action) {
    actionProblem.replaceChildren();
    busy = true;
    drawButtons();
    try {
      await action();
    } catch (error) {
      actionProblem.replaceChildren(errorBox(error));
    } finally {
      busy = false;
      drawButtons();
      await refresh();
      if (button.disabled === false) button.focus();
    }
  }

  stop.addEventListener('click', () => act(stop, () => api.post('/v1/workloads/{id}/stop', {}, it)));
  start.addEventListener('click', () => act(start, () => api.post('/v1/workloads/{id}/start', {}, it)));
  remove.addEventListener('click', async () => {
    const yes = await confirmDialog({
      title: `Delete ${workload?.name ?? 'this workload'}?`,
      body: 'It stops, and its disk and everything it stored are removed. This can\u2019t be undone; its history stays readable.',
      confirm: 'Delete',
    });
    if (yes) await act(remove, () => api.delete('/v1/workloads/{id}', it));
    else remove.focus();
  });
  // Only a notebook's Open asks for access here (an endpoint's base URL aside): a VM's grant is
  // for `einsora ssh-proxy`, never for a browser tab.
  open.addEventListener('click', () =>
    act(open, async () => {
      const grant = await api.post('/v1/workloads/{id}/access', {}, it);
      const link = grant.notebook?.link;
      if (link) window.open(link, '_blank', 'noopener');
    }),
  );

  const logs = logsPanel(id);
  const tabs = tabbed(
    [
      {
        key: 'overview',
        label: 'Overview',
        content: [
          h('section', { class: 'card', 'aria-label': 'Details' }, facts),
          endpoint,
          ssh,
          h('section', { 'aria-labelledby': 'timeline' }, h('h2', { id: 'timeline' }, 'Timeline'), timeline),
        ],
      },
      { key: 'logs', label: 'Logs', content: [logs.element], shown: logs.show, hidden: logs.hide },
    ],
    new URLSearchParams(location.search).get('tab') ?? '',
    (key) => {
      const query = new URLSearchParams(location.search);
      if (key === 'overview') query.delete('tab');
      else query.set('tab', key);
      context.setQuery(query);
    },
  );

  main.append(
    title,
    refreshProblem,
    h('div', { class: 'actions', role: 'group', 'aria-label': 'Actions' }, open, stop, start, remove),
    openHint,
    actionProblem,
    tabs,
  );
  const polling = poll(refresh, 2000);
  return () => {
    polling();
    logs.stop();
  };
}

/**
 * @typedef {{
 *   key: string,
 *   label: string,
 *   content: HTMLElement[],
 *   shown?: () => void,
 *   hidden?: () => void,
 * }} Tab
 */

/**
 * Tabs as ARIA describes them: the arrow keys, Home and End move between them, each shows its
 * panel; a panel's `shown` and `hidden` are told.
 * @param {Tab[]} list
 * @param {string} chosen  the key of the tab shown first (else the first)
 * @param {(key: string) => void} onChoose
 * @returns {HTMLElement}
 */
function tabbed(list, chosen, onChoose) {
  const buttons = list.map((tab) =>
    h('button', { type: 'button', role: 'tab', id: `tab-${tab.key}`, 'aria-controls': `panel-${tab.key}`, class: 'tab' }, tab.label),
  );
  const panels = list.map((tab) =>
    h('div', { role: 'tabpanel', id: `panel-${tab.key}`, 'aria-labelledby': `tab-${tab.key}`, class: 'tab-panel' }, tab.content),
  );
  let current = -1;
  const choose = (/** @type {number} */ index) => {
    if (index === current) return;
    const before = current;
    current = index;
    buttons.forEach((button, i) => {
      button.setAttribute('aria-selected', String(i === index));
      button.tabIndex = i === index ? 0 : -1;
      panels[i].hidden = i !== index;
    });
    if (before >= 0) list[before].hidden?.();
    list[index].shown?.();
  };
  buttons.forEach((button, i) => {
    button.addEventListener('click', () => {
      choose(i);
      onChoose(list[i].key);
    });
    button.addEventListener('keydown', (event) => {
      const last = list.length - 1;
      const to = { ArrowRight: i === last ? 0 : i + 1, ArrowLeft: i === 0 ? last : i - 1, Home: 0, End: last }[event.key];
      if (to === undefined) return;
      event.preventDefault();
      buttons[to].focus();
      buttons[to].click();
    });
  });
  choose(Math.max(0, list.findIndex((tab) => tab.key === chosen)));
  return h('div', { class: 'tabs' }, h('div', { role: 'tablist', 'aria-label': 'Workload' }, buttons), panels);
}

/**
 * The `~/.ssh/config` entry for VM `id`, as `einsora ssh` runs it: the CLI as ProxyCommand, the
 * VM's host key kept under its own alias.
 * @param {string} id
 */
function sshConfig(id) {
  return [
    `Host einsora-${id}`,
    '  User einsora',
    `  HostKeyAlias einsora-${id}`,
    `  ProxyCommand einsora ssh-proxy ${id}`,
  ].join('\n');
}

/**
 * An endpoint's idle time before it parks, as people say it ("after 10 min"); "never" unset.
 * @param {number | undefined} seconds
 */
function idleAfter(seconds) {
  if (!seconds) return 'never';
  const [h, m, s] = [Math.floor(seconds / 3600), Math.floor(seconds / 60) % 60, seconds % 60];
  if (s) return `after ${seconds} s without requests`;
  const parts = [h && `${h} h`, m && `${m} min`].filter(Boolean);
  return `after ${parts.join(' ')} without requests`;
}
