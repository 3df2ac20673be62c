// Usage: hours per class per day for a chosen period (the last 7 days by default), from the
// hourly usage records of `GET /v1/usage`, as a stacked bar chart drawn here in SVG and a
// table with the same figures; or, grouped by user, team or class, the period's report of
// `GET /v1/usage/report` as a table that downloads as CSV; or the tokens endpoints' answers
// used per endpoint, key and user, per hour or summed (`GET /v1/usage?tokens=hour|range`), as
// a table that downloads as CSV. Time and tokens only: never money.

import { api, listAll } from '../api.js';
import { h, svg, errorBox, field, saveFile, select, table } from '../dom.js';
import { csvField, isoDate, startOfDate, time } from '../format.js';

const DAY_MS = 86_400_000;
const MAX_DAYS = 366;
const SERIES = 8;
/** What the report sums by, as the API's `by` says it; `records` is the chart. */
const GROUPINGS = [
  { value: 'records', text: 'Records (chart)' },
  { value: 'user', text: 'User' },
  { value: 'team', text: 'Team' },
  { value: 'class', text: 'Class' },
  { value: 'tokens-range', text: 'Tokens (endpoint, key, user)' },
  { value: 'tokens-hour', text: 'Tokens per hour' },
];
/** Token usage's CSV: every field of a row, as `einsora usage --tokens … --format csv` writes them. */
const TOKENS_CSV = /** @type {const} */ ([
  'hour_start',
  'tenant_id',
  'endpoint_id',
  'key_id',
  'user_id',
  'requests',
  'prompt_tokens',
  'completion_tokens',
]);
/** The report's CSV: every field of a row, as `einsora usage --by … --format csv` writes them. */
const REPORT_CSV = /** @type {const} */ ([
  'group_id',
  'label',
  'placed_class',
  'workloads',
  'seconds',
  'unit_seconds',
  'unit_hours',
]);

/** @type {import('../app.js').Page['render']} */
export function render(main) {
  const today = new Date();
  const from = h('input', { id: 'usage-from', type: 'date', name: 'from', required: true });
  const to = h('input', { id: 'usage-to', type: 'date', name: 'to', required: true });
  from.value = isoDate(new Date(today.getFullYear(), today.getMonth(), today.getDate() - 6));
  to.value = isoDate(today);
  const by = select('usage-by', GROUPINGS, 'records');
  const problem = h('div', { class: 'problem' });
  const result = h('div', { class: 'usage' });
  const show = h('button', { type: 'submit' }, 'Show');
  let asked = 0;

  async function load() {
    const ask = ++asked;
    problem.replaceChildren();
    const start = startOfDate(from.value);
    const last = startOfDate(to.value);
    if (!start || !last) return problem.replaceChildren(errorBox({ message: 'Choose both dates.' }));
    const days = Math.round((last.getTime() - start.getTime()) / DAY_MS) + 1;
    if (days < 1) return problem.replaceChildren(errorBox({ message: 'To must be on or after From.' }));
    if (days > MAX_DAYS) return problem.replaceChildren(errorBox({ message: `Choose at most ${MAX_DAYS} days.` }));
    const end = new Date(last.getFullYear(), last.getMonth(), last.getDate() + 1);
    const query = { from: start.toISOString(), to: end.toISOString(), page_size: '5000' };
    show.disabled = true;
    try {
      if (by.value === 'records') {
        const records = await listAll('/v1/usage', query);
        if (ask === asked) result.replaceChildren(...draw(start, days, records));
      } else if (by.value === 'tokens-hour' || by.value === 'tokens-range') {
        const per = by.value === 'tokens-hour' ? 'hour' : 'range';
        const rows = await tokensOf({ ...query, tokens: per });
        const name = `einsora-tokens-by-${per}-${from.value}-to-${to.value}.csv`;
        if (ask === asked) result.replaceChildren(...tokensTable(per, rows, name));
      } else {
        const grouping = /** @type {'user' | 'team' | 'class'} */ (by.value);
        const report = await api.get('/v1/usage/report', { query: { from: query.from, to: query.to, by: grouping } });
        const name = `einsora-usage-by-${grouping}-${from.value}-to-${to.value}.csv`;
        if (ask === asked) result.replaceChildren(...reportOf(grouping, report.rows ?? [], name));
      }
    } catch (error) {
      if (ask === asked) problem.replaceChildren(errorBox(error));
    } finally {
      show.disabled = false;
    }
  }

  const form = h(
    'form',
    { class: 'filters', novalidate: true },
    field('From', from),
    field('To', to),
    field('Group by', by),
    h('div', { class: 'field' }, show),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    load();
  });
  by.addEventListener('change', () => load());
  main.append(
    h('h1', { tabindex: -1 }, 'Usage'),
    h(
      'p',
      {},
      'Hours each compute class ran, per day (in your time zone), counted by the class a workload ran on; or the period\u2019s unit-hours by user, team or class; or the tokens your endpoints\u2019 answers used, as their engines counted them.',
    ),
    form,
    problem,
    result,
  );
  load();
}

/**
 * The chart, its legend and the table.
 * @param {Date} start  local midnight of the first day
 * @param {number} days
 * @param {any[]} records
 * @returns {HTMLElement[]}
 */
function draw(start, days, records) {
  const dates = Array.from({ length: days }, (_, i) =>
    isoDate(new Date(start.getFullYear(), start.getMonth(), start.getDate() + i)),
  );
  /** @type {Map<string, Map<string, number>>} class → day → hours */
  const hours = new Map();
  for (const r of records) {
    const day = isoDate(new Date(r.hour_start));
    const perDay = hours.get(r.placed_class) ?? new Map();
    perDay.set(day, (perDay.get(day) ?? 0) + Number(r.seconds ?? 0) / 3600);
    hours.set(r.placed_class, perDay);
  }
  const classes = [...hours.keys()].sort();
  const at = (/** @type {string} */ c, /** @type {string} */ d) => hours.get(c)?.get(d) ?? 0;
  const totals = dates.map((d) => classes.reduce((sum, c) => sum + at(c, d), 0));

  return [
    h('div', { class: 'chart card' }, chart(dates, classes, at, totals), legend(classes)),
    tableOf(dates, classes, at, totals),
  ];
}

/**
 * @param {string[]} dates
 * @param {string[]} classes
 * @param {(c: string, d: string) => number} at
 * @param {number[]} totals
 * @returns {SVGElement}
 */
function chart(dates, classes, at, totals) {
  const [width, height] = [640, 280];
  const [left, right, top, bottom] = [44, 12, 12, 40];
  const plotW = width - left - right;
  const plotH = height - top - bottom;
  const max = niceCeiling(Math.max(...totals, 0));
  const y = (/** @type {number} */ v) => top + plotH - (v / max) * plotH;
  const band = plotW / dates.length;
  const barW = Math.max(1, band * 0.6);
  const every = Math.ceil(dates.length / 10);

  const grid = [0, 0.25, 0.5, 0.75, 1].map((f) => {
    const v = max * f;
    return svg(
      'g',
      {},
      svg('line', { x1: left, x2: width - right, y1: y(v), y2: y(v), class: 'grid' }),
      svg('text', { x: left - 6, y: y(v) + 4, 'text-anchor': 'end', class: 'axis' }, formatHours(v)),
    );
  });
  const bars = dates.map((d, i) => {
    let base = 0;
    const x = left + i * band + (band - barW) / 2;
    const stack = classes.map((c, k) => {
      const v = at(c, d);
      const rect = svg('rect', {
        x,
        y: y(base + v),
        width: barW,
        height: Math.max(0, y(base) - y(base + v)),
        class: `series-${k % SERIES}`,
      });
      base += v;
      return v > 0 ? rect : null;
    });
    const label =
      i % every === 0
        ? svg('text', { x: x + barW / 2, y: height - bottom + 16, 'text-anchor': 'middle', class: 'axis' }, d.slice(5))
        : null;
    return svg('g', {}, stack, label);
  });
  return svg(
    'svg',
    {
      viewBox: `0 0 ${width} ${height}`,
      role: 'img',
      'aria-label': 'Hours per class per day',
      class: 'chart-svg',
      preserveAspectRatio: 'xMidYMid meet',
    },
    grid,
    svg('line', { x1: left, x2: width - right, y1: y(0), y2: y(0), class: 'baseline' }),
    bars,
    totals.every((t) => t === 0)
      ? svg('text', { x: left + plotW / 2, y: top + plotH / 2, 'text-anchor': 'middle', class: 'axis' }, 'No usage in this period')
      : null,
  );
}

/** @param {string[]} classes */
function legend(classes) {
  return h(
    'ul',
    { class: 'legend', 'aria-hidden': 'true' },
    classes.map((c, k) => h('li', {}, h('span', { class: `swatch series-${k % SERIES}` }), c)),
  );
}

/**
 * @param {string[]} dates
 * @param {string[]} classes
 * @param {(c: string, d: string) => number} at
 * @param {number[]} totals
 * @returns {HTMLElement}
 */
function tableOf(dates, classes, at, totals) {
  const label = 'Hours per class per day';
  const head = h('tr', {}, h('th', { scope: 'col' }, 'Day'), classes.map((c) => h('th', { scope: 'col' }, c)), h('th', { scope: 'col' }, 'Total'));
  const body = dates.map((d, i) =>
    h(
      'tr',
      {},
      h('th', { scope: 'row' }, d),
      classes.map((c) => h('td', { class: 'number' }, formatHours(at(c, d)))),
      h('td', { class: 'number' }, formatHours(totals[i])),
    ),
  );
  const sums = classes.map((c) => dates.reduce((sum, d) => sum + at(c, d), 0));
  const foot = h(
    'tr',
    {},
    h('th', { scope: 'row' }, 'Total'),
    sums.map((s) => h('td', { class: 'number' }, formatHours(s))),
    h('td', { class: 'number' }, formatHours(totals.reduce((a, b) => a + b, 0))),
  );
  return h(
    'div',
    { class: 'table-wrap', tabindex: 0, role: 'region', 'aria-label': `${label} (table)` },
    h('table', {}, h('caption', {}, `${label} (hours)`), h('thead', {}, head), h('tbody', {}, body), h('tfoot', {}, foot)),
  );
}

/**
 * The report as a table, with a button that downloads it as CSV.
 * @param {'user' | 'team' | 'class'} by
 * @param {import('../api-types').UsageReportRow[]} rows
 * @param {string} name  the CSV file's name
 * @returns {HTMLElement[]}
 */
function reportOf(by, rows, name) {
  const group = { user: 'User', team: 'Team', class: 'Class' }[by];
  const columns = by === 'class' ? ['Class', 'Workloads', 'Unit-hours', 'Seconds'] : [group, 'Class', 'Workloads', 'Unit-hours', 'Seconds'];
  const number = (/** @type {string | number} */ v) => h('td', { class: 'number' }, String(v));
  const who = (/** @type {import('../api-types').UsageReportRow} */ r) =>
    r.label || (by === 'team' ? 'No team' : r.group_id ? h('code', {}, r.group_id) : 'No owner');
  const body = h(
    'tbody',
    {},
    rows.map((r) =>
      h(
        'tr',
        {},
        by === 'class' ? null : h('th', { scope: 'row' }, who(r)),
        by === 'class' ? h('th', { scope: 'row' }, r.placed_class) : h('td', {}, r.placed_class),
        number(r.workloads),
        number(r.unit_hours),
        number(r.seconds),
      ),
    ),
  );
  const csv = h('button', { type: 'button', class: 'secondary' }, 'Download CSV');
  csv.addEventListener('click', () => {
    const lines = [
      `${REPORT_CSV.join(',')}\r\n`,
      ...rows.map((r) => `${REPORT_CSV.map((c) => csvField(r[c])).join(',')}\r\n`),
    ];
    saveFile(name, lines, 'text/csv;charset=utf-8');
  });
  return [
    h('div', { class: 'actions', role: 'group', 'aria-label': 'Download' }, csv),
    table(`Unit-hours by ${by}`, columns, body),
    rows.length ? h('span') : h('p', { class: 'empty' }, 'No usage in this period.'),
  ];
}

/**
 * Every token row of the period (`hour`: page by page, as records are).
 * @param {Record<string, string>} query
 * @returns {Promise<import('../api-types').TokenUsage[]>}
 */
async function tokensOf(query) {
  /** @type {import('../api-types').TokenUsage[]} */
  const rows = [];
  let token = '';
  for (let pages = 0; pages < 1000; pages++) {
    const page = await api.get('/v1/usage', { query: token ? { ...query, page_token: token } : query });
    rows.push(...(page.tokens ?? []));
    token = page.next_page_token ?? '';
    if (!token) break;
  }
  return rows;
}

/**
 * Token usage as a table, with a button that downloads it as CSV.
 * @param {'hour' | 'range'} per
 * @param {import('../api-types').TokenUsage[]} rows
 * @param {string} name  the CSV file's name
 * @returns {HTMLElement[]}
 */
function tokensTable(per, rows, name) {
  const columns = ['Endpoint', 'Key', 'User', 'Requests', 'Prompt', 'Completion'];
  if (per === 'hour') columns.unshift('Hour');
  const number = (/** @type {string} */ v) => h('td', { class: 'number' }, String(v ?? '0'));
  const body = h(
    'tbody',
    {},
    rows.map((r) =>
      h(
        'tr',
        {},
        per === 'hour' ? h('td', {}, time(r.hour_start)) : null,
        h('th', { scope: 'row' }, h('code', {}, r.endpoint_id)),
        h('td', {}, r.key_id ? h('code', {}, r.key_id) : 'API token'),
        h('td', {}, h('code', {}, r.user_id)),
        number(r.requests),
        number(r.prompt_tokens),
        number(r.completion_tokens),
      ),
    ),
  );
  const csv = h('button', { type: 'button', class: 'secondary' }, 'Download CSV');
  csv.addEventListener('click', () => {
    const lines = [
      `${TOKENS_CSV.join(',')}\r\n`,
      ...rows.map((r) => `${TOKENS_CSV.map((c) => csvField(r[c])).join(',')}\r\n`),
    ];
    saveFile(name, lines, 'text/csv;charset=utf-8');
  });
  const label = per === 'hour' ? 'Tokens per hour' : 'Tokens by endpoint, key and user';
  return [
    h(
      'div',
      { class: 'usage-tokens' },
      h('div', { class: 'actions', role: 'group', 'aria-label': 'Download' }, csv),
      table(label, columns, body),
      rows.length ? null : h('p', { class: 'empty' }, 'No tokens in this period.'),
    ),
  ];
}

/** @param {number} v */
function formatHours(v) {
  if (v === 0) return '0';
  if (v < 1) return String(Number(v.toPrecision(2)));
  return v < 10 ? v.toFixed(1) : String(Math.round(v));
}

/**
 * The smallest 1, 2 or 5 × 10ⁿ at or above `v` (1 for nothing).
 * @param {number} v
 */
function niceCeiling(v) {
  if (v <= 0) return 1;
  const power = 10 ** Math.floor(Math.log10(v));
  const step = [1, 2, 5, 10].find((m) => m * power >= v) ?? 10;
  return step * power;
}
