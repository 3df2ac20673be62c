// The caller's workloads, newest first, kept current by polling the API every 2 s; filtered
// by kind and state in the page, deleted ones on request (the filters live in the query
// string, so a refresh keeps them).

import { listAll, poll } from '../api.js';
import { h, describe, field, select, table } from '../dom.js';
import { KINDS, STATES, stateBadge } from '../format.js';

const COLUMNS = ['Name', 'Kind', 'Class', 'State', 'Region'];

/** @type {import('../app.js').Page['render']} */
export function render(main, _params, context) {
  const query = new URLSearchParams(location.search);
  const filters = {
    kind: KINDS.includes(query.get('kind') ?? '') ? query.get('kind') ?? '' : '',
    state: STATES.includes(query.get('state') ?? '') ? query.get('state') ?? '' : '',
    deleted: query.get('deleted') === '1',
  };
  const all = (/** @type {string[]} */ words) => [
    { value: '', text: 'All' },
    ...words.map((w) => ({ value: w, text: w })),
  ];
  const kind = select('filter-kind', all(KINDS), filters.kind);
  const state = select('filter-state', all(STATES), filters.state);
  const deleted = h('input', { id: 'filter-deleted', type: 'checkbox', checked: filters.deleted });
  const body = h('tbody');
  const empty = h('p', { class: 'empty' }, 'Loading…');
  const problem = h('p', { class: 'problem', 'aria-live': 'polite' });

  /** @type {any[] | null} */
  let workloads = null;
  /** @type {Map<string, HTMLTableRowElement>} */
  const rows = new Map();
  let asked = 0;

  async function refresh() {
    const ask = ++asked;
    /** @type {Record<string, string>} */
    const query = { page_size: '500' };
    if (filters.deleted) query.include_deleted = 'true';
    try {
      // The first time, the first page is shown while the rest come.
      const early = workloads
        ? undefined
        : (/** @type {import('../api-types').Workload[]} */ some) => {
            if (ask !== asked) return;
            workloads = [...some];
            draw();
          };
      const answer = await listAll('/v1/workloads', query, early);
      if (ask !== asked) return;
      workloads = answer;
      problem.replaceChildren();
      draw();
    } catch (error) {
      if (ask !== asked) return;
      const { message, requestId } = describe(error);
      problem.replaceChildren(`Couldn't refresh the list: ${message}${requestId ? ` (Request ID: ${requestId})` : ''}`);
    }
  }

  function draw() {
    if (!workloads) return;
    const shown = workloads.filter(
      (w) => (!filters.kind || w.kind === filters.kind) && (!filters.state || w.state === filters.state),
    );
    const ids = shown.map((w) => w.id);
    const current = [...body.children].map((tr) => /** @type {HTMLElement} */ (tr).dataset.id);
    for (const w of shown) update(w);
    // Reorder (and so move focus) only when the order really changed.
    if (ids.join() !== current.join()) {
      body.replaceChildren(...ids.map((id) => /** @type {HTMLTableRowElement} */ (rows.get(id))));
    }
    const kept = new Set(ids);
    for (const id of [...rows.keys()]) if (!kept.has(id)) rows.delete(id);
    empty.hidden = shown.length > 0;
    empty.textContent = workloads.length ? 'No workloads match these filters.' : 'No workloads yet: launch one.';
  }

  /** @param {any} w */
  function update(w) {
    let row = rows.get(w.id);
    if (!row) {
      row = h(
        'tr',
        { 'data-id': w.id },
        h('th', { scope: 'row' }, h('a', { href: `/workloads/${encodeURIComponent(w.id)}` }, w.name)),
        h('td'),
        h('td'),
        h('td'),
        h('td'),
      );
      rows.set(w.id, row);
    }
    const cells = row.children;
    const link = /** @type {HTMLElement} */ (cells[0].firstElementChild);
    if (link.textContent !== w.name) link.textContent = w.name;
    setText(cells[1], w.kind);
    const placed = w.placed_class && w.placed_class !== w.gpu_class ? ` (placed on ${w.placed_class})` : '';
    setText(cells[2], w.gpu_class + placed);
    if (cells[3].textContent !== w.state) cells[3].replaceChildren(stateBadge(w.state));
    setText(cells[4], w.region);
  }

  const filtersChanged = () => {
    const refetch = filters.deleted !== deleted.checked;
    filters.kind = kind.value;
    filters.state = state.value;
    filters.deleted = deleted.checked;
    const q = new URLSearchParams();
    if (filters.kind) q.set('kind', filters.kind);
    if (filters.state) q.set('state', filters.state);
    if (filters.deleted) q.set('deleted', '1');
    context.setQuery(q);
    if (refetch) refresh();
    else draw();
  };
  for (const control of [kind, state, deleted]) control.addEventListener('change', filtersChanged);

  main.append(
    h('h1', { tabindex: -1 }, 'Workloads'),
    h(
      'div',
      { class: 'filters', role: 'group', 'aria-label': 'Filters' },
      field('Kind', kind),
      field('State', state),
      h('div', { class: 'field checkbox' }, deleted, h('label', { for: deleted.id }, 'Show deleted')),
    ),
    problem,
    table('Your workloads', COLUMNS, body),
    empty,
  );
  return poll(refresh, 2000);
}

/**
 * @param {Element} cell
 * @param {string} text
 */
function setText(cell, text) {
  if (cell.textContent !== text) cell.textContent = text;
}
