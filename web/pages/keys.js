// Inference keys (`isk_…`): credentials for model endpoints and nothing else, made here for one
// client each, scoped to chosen endpoints (or all), with limits of their own; shown once,
// listed with what they used today, revoked at once. Owners and admins also set the tenant's
// limits over every key and token.

import { api, listAll } from '../api.js';
import { h, errorBox, field, shownOnce, table } from '../dom.js';
import { time } from '../format.js';

const COLUMNS = ['Name', 'Prefix', 'Endpoints', 'Limits', 'Tokens today', 'Owner', 'Last used', 'Actions'];
/** @type {[key: 'requests_per_minute' | 'tokens_per_minute' | 'tokens_per_day', label: string][]} */
const LIMITS = [
  ['requests_per_minute', 'Requests a minute'],
  ['tokens_per_minute', 'Tokens a minute'],
  ['tokens_per_day', 'Tokens a day'],
];

/** @type {import('../app.js').Page['render']} */
export function render(main) {
  const rows = h('tbody');
  const empty = h('p', { class: 'empty' }, 'Loading…');
  const listProblem = h('div', { class: 'problem' });
  const formProblem = h('div', { class: 'problem' });
  const created = h('div', { class: 'created' });
  const tenantSection = h('section', { class: 'card', 'aria-labelledby': 'tenant-limits' });
  /** @type {Map<string, string>} endpoint ID → name */
  const endpointNames = new Map();
  let stopped = false;

  async function refresh() {
    try {
      const answer = await api.get('/v1/inference-keys');
      if (!stopped) draw(answer.keys ?? []);
    } catch (error) {
      if (!stopped) listProblem.replaceChildren(errorBox(error));
    }
  }

  /** @param {import('../api-types').InferenceKey[]} keys */
  function draw(keys) {
    listProblem.replaceChildren();
    rows.replaceChildren(
      ...keys.map((k) => {
        const revoke = h('button', { type: 'button', class: 'danger small' }, 'Revoke');
        revoke.addEventListener('click', async () => {
          listProblem.replaceChildren();
          try {
            await api.delete('/v1/inference-keys/{id}', { params: { id: k.id } });
          } catch (error) {
            listProblem.replaceChildren(errorBox(error));
          }
          await refresh();
          main.querySelector('h1')?.focus();
        });
        const scope = k.all_endpoints ? 'All' : k.endpoint_ids.map((id) => endpointNames.get(id) ?? id).join(', ');
        return h(
          'tr',
          {},
          h('th', { scope: 'row' }, k.name),
          h('td', {}, h('code', {}, k.prefix)),
          h('td', {}, scope),
          h('td', {}, limitsText(k.limits)),
          h('td', {}, k.tokens_used_today),
          h('td', {}, k.owner_email),
          h('td', {}, time(k.last_used_at, 'Never')),
          h('td', {}, k.revoked_at ? h('span', { class: 'muted' }, 'Revoked ', time(k.revoked_at)) : revoke),
        );
      }),
    );
    empty.hidden = keys.length > 0;
    empty.textContent = 'No inference keys yet.';
  }

  const name = h('input', { id: 'key-name', name: 'name', required: true, autocomplete: 'off', maxlength: 64 });
  const all = h('input', { id: 'key-all', name: 'all', type: 'checkbox', checked: true });
  const endpoints = h('fieldset', { class: 'stack', hidden: true }, h('legend', {}, 'Endpoints it may call'));
  all.addEventListener('change', () => {
    endpoints.hidden = all.checked;
  });
  const limitInputs = limitFields('key');
  const submit = h('button', { type: 'submit' }, 'Create key');
  const form = h(
    'form',
    { class: 'stack', novalidate: true },
    field('Key name', name, 'Which client will use it, e.g. chat-app or an agent.'),
    h('div', { class: 'field checkbox' }, all, h('label', { for: all.id }, 'Every endpoint I can use, those launched later too')),
    endpoints,
    ...limitInputs.fields,
    formProblem,
    h('div', { class: 'actions' }, submit),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    formProblem.replaceChildren();
    created.replaceChildren();
    const limits = limitInputs.read(formProblem);
    if (!limits) return;
    /** @type {import('../api.js').Post['/v1/inference-keys']['body']} */
    const body = { name: name.value.trim(), limits };
    if (all.checked) {
      body.all_endpoints = true;
    } else {
      body.endpoint_ids = [...endpoints.querySelectorAll('input:checked')].map((i) => /** @type {HTMLInputElement} */ (i).value);
    }
    submit.disabled = true;
    try {
      const answer = await api.post('/v1/inference-keys', body);
      created.replaceChildren(newKey(answer));
      name.value = '';
      await refresh();
    } catch (error) {
      formProblem.replaceChildren(errorBox(error));
    } finally {
      submit.disabled = false;
    }
  });

  main.append(
    h('h1', { tabindex: -1 }, 'Inference keys'),
    h(
      'p',
      {},
      'An inference key calls model endpoints and nothing else: give one to each client or agent, send it as ',
      h('code', {}, 'Authorization: Bearer isk_…'),
      ' (an OpenAI SDK\u2019s api_key). Its answers carry ',
      h('code', {}, 'x-ratelimit-*'),
      ' headers with what its limits have left.',
    ),
    h('section', { class: 'card', 'aria-labelledby': 'new-key' }, h('h2', { id: 'new-key' }, 'New key'), form, created),
    listProblem,
    table('Inference keys', COLUMNS, rows),
    empty,
    tenantSection,
  );

  Promise.all([api.get('/v1/me'), listAll('/v1/workloads')])
    .then(([me, listed]) => {
      if (stopped) return;
      const mine = listed.filter((w) => w.kind === 'endpoint' && w.state !== 'deleted');
      for (const w of mine) endpointNames.set(w.id, w.name);
      endpoints.append(
        ...mine.map((w) => {
          const box = h('input', { id: `key-endpoint-${w.id}`, type: 'checkbox', name: 'endpoint', value: w.id });
          return h('div', { class: 'field checkbox' }, box, h('label', { for: box.id }, w.name));
        }),
      );
      if (mine.length === 0) endpoints.append(h('p', { class: 'muted' }, 'No endpoints yet: launch one first.'));
      tenantLimits(tenantSection, me.role === 'owner' || me.role === 'admin', () => stopped);
      refresh();
    })
    .catch((error) => {
      if (!stopped) listProblem.replaceChildren(errorBox(error));
    });
  return () => {
    stopped = true;
  };
}

/**
 * The tenant's limits and what it used today; a form to set them for owners and admins.
 * @param {HTMLElement} section
 * @param {boolean} admin
 * @param {() => boolean} stopped
 */
async function tenantLimits(section, admin, stopped) {
  const problem = h('div', { class: 'problem' });
  const shown = h('p', {});
  /** @param {import('../api-types').TenantInferenceLimits} answer */
  const show = (answer) => {
    const left = answer.tokens_left_today ? `, ${answer.tokens_left_today} left` : '';
    shown.replaceChildren(`Limits: ${limitsText(answer.limits)}. Tokens used today: ${answer.tokens_used_today}${left}.`);
  };
  section.replaceChildren(h('h2', { id: 'tenant-limits' }, 'The tenant\u2019s limits'), shown, problem);
  try {
    const answer = await api.get('/v1/inference-limits');
    if (stopped()) return;
    show(answer);
    if (!admin) return;
    const inputs = limitFields('tenant', answer.limits);
    const submit = h('button', { type: 'submit' }, 'Set limits');
    const form = h('form', { class: 'stack', novalidate: true }, ...inputs.fields, h('div', { class: 'actions' }, submit));
    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      problem.replaceChildren();
      const limits = inputs.read(problem);
      if (!limits) return;
      submit.disabled = true;
      try {
        show(await api.put('/v1/inference-limits', { limits }));
      } catch (error) {
        problem.replaceChildren(errorBox(error));
      } finally {
        submit.disabled = false;
      }
    });
    section.append(h('p', { class: 'muted' }, 'Over every key and API token of the tenant together; empty: no limit.'), form);
  } catch (error) {
    if (!stopped()) problem.replaceChildren(errorBox(error));
  }
}

/**
 * Inputs for the three limits, and a reader that says what is wrong in `problem`.
 * @param {string} prefix
 * @param {import('../api-types').InferenceLimits} [current]
 */
function limitFields(prefix, current = {}) {
  const inputs = LIMITS.map(([key, label]) => {
    const value = current[key] === undefined ? '' : String(current[key]);
    const input = h('input', { id: `${prefix}-${key}`, inputmode: 'numeric', autocomplete: 'off', value });
    return { key, label, input };
  });
  return {
    fields: inputs.map(({ label, input }) => field(label, input, 'A whole number; empty: no limit.')),
    /**
     * @param {HTMLElement} problem
     * @returns {import('../api-types').InferenceLimits | null}
     */
    read(problem) {
      /** @type {import('../api-types').InferenceLimits} */
      const limits = {};
      for (const { key, label, input } of inputs) {
        const text = /** @type {HTMLInputElement} */ (input).value.trim();
        if (!text) continue;
        if (!/^\d+$/.test(text)) {
          problem.replaceChildren(h('p', { role: 'alert' }, `${label} is a whole number, or empty for none.`));
          return null;
        }
        limits[key] = Number(text);
      }
      return limits;
    },
  };
}

/**
 * @param {import('../api-types').InferenceLimits} [limits]
 * @returns {string}
 */
function limitsText(limits = {}) {
  const set = LIMITS.filter(([key]) => limits[key] !== undefined).map(([key, label]) => `${limits[key]} ${label.toLowerCase()}`);
  return set.length ? set.join(', ') : 'none';
}

/**
 * The new key, shown this once.
 * @param {any} answer
 * @returns {HTMLElement}
 */
function newKey(answer) {
  const lead = h('p', {}, h('strong', {}, `Your new key ${answer.inference_key?.name ?? ''}`), ' \u2014 copy it now: it is shown only once.');
  return shownOnce([lead], answer.key, 'token');
}
