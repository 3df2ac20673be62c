// The tenant's activity log (docs/api.md, "Activity"): every action of its users through the
// API and every call of theirs it refused, newest first, a page at a time ("Load more"),
// filtered by action, result, object and days (kept in the query string, so a refresh keeps
// them). Every matching entry downloads as CSV or NDJSON. Only the tenant's owner reads it;
// anyone else sees the API's answer.

import { api, listAll } from '../api.js';
import { h, errorBox, field, saveFile, select, table } from '../dom.js';
import { csvField, isoDate, orDash, startOfDate, time } from '../format.js';

const COLUMNS = ['Time', 'Actor', 'Action', 'Object', 'Result', 'Request ID', 'From'];
/** The CSV's columns: every field of an entry, as `einsora activity --format csv` writes them. */
const CSV_COLUMNS = /** @type {const} */ ([
  'id',
  'at',
  'user_id',
  'actor',
  'action',
  'object_kind',
  'object_id',
  'result',
  'request_id',
  'client_addr',
]);
/** Actions to suggest in the filter (any other word can be typed). */
const ACTIONS = [
  'create_workload',
  'start_workload',
  'stop_workload',
  'delete_workload',
  'open_workload',
  'get_workload',
  'create_token',
  'revoke_token',
  'create_enrolment_token',
  'revoke_enrolment_token',
  'revoke_machine',
  'login',
  'logout',
  'change_password',
];
const PAGE_SIZE = '100';
const EXPORT_PAGE_SIZE = '500';

/** @type {import('../app.js').Page['render']} */
export function render(main, _params, context) {
  const query = new URLSearchParams(location.search);
  const text = (/** @type {string} */ id, /** @type {string} */ key, /** @type {Record<string, unknown>} */ more = {}) =>
    h('input', { id, name: key, type: 'text', autocomplete: 'off', spellcheck: 'false', value: query.get(key) ?? '', ...more });
  const action = text('activity-action', 'action', { list: 'activity-actions' });
  const result = select(
    'activity-result',
    [
      { value: '', text: 'All' },
      { value: 'ok', text: 'ok' },
      { value: 'refused', text: 'refused' },
    ],
    query.get('result') ?? '',
  );
  result.name = 'result';
  const object = text('activity-object', 'object_id');
  const from = h('input', { id: 'activity-from', type: 'date', name: 'from', value: query.get('from') ?? '' });
  const to = h('input', { id: 'activity-to', type: 'date', name: 'to', value: query.get('to') ?? '' });
  const show = h('button', { type: 'submit' }, 'Show');

  const body = h('tbody');
  const results = h('div', { hidden: true });
  const empty = h('p', { class: 'empty', hidden: true }, 'No activity matches these filters.');
  const more = h('button', { type: 'button', class: 'secondary', hidden: true }, 'Load more');
  const csv = h('button', { type: 'button', class: 'secondary' }, 'Download CSV');
  const ndjson = h('button', { type: 'button', class: 'secondary' }, 'Download NDJSON');
  const said = h('span', { class: 'muted', 'aria-live': 'polite' });
  const problem = h('div', { class: 'problem' });
  const loading = h('p', { class: 'loading' }, 'Loading…');

  let token = '';
  let asked = 0;

  /**
   * The filters as the API takes them, or what is wrong with them.
   * @returns {Record<string, string> | string}
   */
  function filters() {
    /** @type {Record<string, string>} */
    const q = {};
    if (action.value.trim()) q.action = action.value.trim();
    if (result.value) q.result = result.value;
    if (object.value.trim()) q.object_id = object.value.trim();
    const start = from.value ? startOfDate(from.value) : null;
    const last = to.value ? startOfDate(to.value) : null;
    if (from.value && !start) return 'From is not a date.';
    if (to.value && !last) return 'To is not a date.';
    if (start && last && last < start) return 'To must be on or after From.';
    if (start) q.from = start.toISOString();
    if (last) q.to = new Date(last.getFullYear(), last.getMonth(), last.getDate() + 1).toISOString();
    return q;
  }

  /** @param {boolean} next  the next page (Load more), else the first */
  async function load(next) {
    const ask = ++asked;
    const q = filters();
    problem.replaceChildren();
    if (typeof q === 'string') {
      loading.hidden = true;
      return problem.replaceChildren(errorBox({ message: q }));
    }
    if (next) q.page_token = token;
    q.page_size = PAGE_SIZE;
    show.disabled = true;
    more.disabled = true;
    try {
      const page = await api.get('/v1/activity', { query: q });
      if (ask !== asked) return;
      const rows = (page.entries ?? []).map(row);
      if (next) body.append(...rows);
      else body.replaceChildren(...rows);
      token = page.next_page_token ?? '';
      more.hidden = !token;
      empty.hidden = body.children.length > 0;
      results.hidden = false;
    } catch (error) {
      if (ask !== asked) return;
      // Someone other than the owner: the API's `forbidden` says why.
      if (!next) results.hidden = true;
      problem.replaceChildren(errorBox(error));
    } finally {
      if (ask === asked) {
        loading.hidden = true;
        show.disabled = false;
        more.disabled = false;
      }
    }
  }

  /**
   * Every matching entry, saved as a file.
   * @param {HTMLButtonElement} button
   * @param {'csv' | 'ndjson'} format
   */
  async function save(button, format) {
    const q = filters();
    if (typeof q === 'string') return problem.replaceChildren(errorBox({ message: q }));
    problem.replaceChildren();
    button.disabled = true;
    said.textContent = 'Downloading…';
    try {
      const entries = await listAll('/v1/activity', { ...q, page_size: EXPORT_PAGE_SIZE }, (sofar) => {
        said.textContent = `Downloading… ${sofar.length.toLocaleString()} entries`;
      });
      const lines = format === 'csv'
        ? [`${CSV_COLUMNS.join(',')}\r\n`, ...entries.map((e) => `${CSV_COLUMNS.map((c) => csvField(e[c])).join(',')}\r\n`)]
        : entries.map((e) => `${JSON.stringify(e)}\n`);
      const type = format === 'csv' ? 'text/csv;charset=utf-8' : 'application/x-ndjson';
      saveFile(`einsora-activity-${isoDate(new Date())}.${format}`, lines, type);
      said.textContent = `Saved ${entries.length.toLocaleString()} ${entries.length === 1 ? 'entry' : 'entries'}.`;
    } catch (error) {
      said.textContent = '';
      problem.replaceChildren(errorBox(error));
    } finally {
      button.disabled = false;
    }
  }

  const form = h(
    'form',
    { class: 'filters', novalidate: true, 'aria-label': 'Filters' },
    field('Action', action),
    h('datalist', { id: 'activity-actions' }, ACTIONS.map((a) => h('option', { value: a }))),
    field('Result', result),
    field('Object ID', object),
    field('From', from),
    field('To', to),
    h('div', { class: 'field' }, show),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const q = new URLSearchParams();
    for (const control of [action, result, object, from, to]) {
      if (control.value.trim()) q.set(control.name, control.value.trim());
    }
    context.setQuery(q);
    load(false);
  });
  more.addEventListener('click', () => load(true));
  csv.addEventListener('click', () => save(csv, 'csv'));
  ndjson.addEventListener('click', () => save(ndjson, 'ndjson'));

  results.append(
    h('div', { class: 'actions', role: 'group', 'aria-label': 'Download' }, csv, ndjson, said),
    stacked(table('Activity, newest first', COLUMNS, body)),
    empty,
    more,
  );
  main.append(
    h('h1', { tabindex: -1 }, 'Activity'),
    h(
      'p',
      {},
      'What your tenant\u2019s people did through the API, and the calls it refused them, newest first. Only the tenant\u2019s owner can read it.',
    ),
    form,
    problem,
    loading,
    results,
  );
  load(false);
}

/**
 * One entry as a row.
 * @param {import('../api-types').ActivityEntry} e
 * @returns {HTMLTableRowElement}
 */
function row(e) {
  const ok = e.result === 'ok';
  const object = e.object_kind === 'workload' && e.object_id
    ? h('a', { href: `/workloads/${encodeURIComponent(e.object_id)}` }, h('code', {}, e.object_id))
    : e.object_id && h('code', {}, e.object_id);
  // Each cell says its column, for the phone's layout (a card per entry), and holds one
  // element (a grid item there).
  const [at, actor, action, what, result, request, from] = COLUMNS;
  const cell = (/** @type {string} */ label, /** @type {string} */ kind, /** @type {import('../dom.js').Leaf[]} */ ...content) =>
    h('td', { 'data-label': label, class: kind || false }, h('span', {}, content));
  return h(
    'tr',
    { 'data-id': e.id },
    cell(at, 'nowrap', time(e.at)),
    cell(actor, '', orDash(e.actor)),
    // A long action breaks after its underscores, never inside a word.
    cell(action, '', h('code', { class: 'action' }, e.action.split(/(?<=_)/).flatMap((part, i) => (i ? [h('wbr'), part] : [part])))),
    cell(what, '', e.object_kind ? h('span', { class: 'object-kind' }, e.object_kind) : '—', object ? ' ' : '', object),
    cell(result, '', h('span', { class: `result ${ok ? 'result-ok' : 'result-refused'}` }, e.result || '—')),
    cell(request, 'request', e.request_id ? h('code', {}, e.request_id) : '—'),
    cell(from, '', orDash(e.client_addr)),
  );
}

/**
 * A table that, on a phone, shows each row as a card of labelled cells (`data-label`).
 * @param {HTMLElement} wrap
 * @returns {HTMLElement}
 */
function stacked(wrap) {
  wrap.classList.add('stacked');
  return wrap;
}
