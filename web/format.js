// How values read on the page: times in the viewer's time zone, sizes in GiB. Never money.

import { h } from './dom.js';

/**
 * A `<time>` for an RFC 3339 instant, or a dash when there is none.
 * @param {string | undefined} iso
 * @param {string} [none]
 * @returns {HTMLElement | string}
 */
export function time(iso, none = '—') {
  if (!iso) return none;
  const at = new Date(iso);
  if (Number.isNaN(at.getTime())) return iso;
  return h('time', { datetime: iso }, at.toLocaleString());
}

/**
 * Bytes (a JSON number or, for 64-bit fields, a string) as GiB.
 * @param {string | number | undefined} bytes
 * @returns {string}
 */
export function gib(bytes) {
  const n = Number(bytes ?? 0);
  if (!Number.isFinite(n) || n <= 0) return '—';
  const value = n / 2 ** 30;
  return `${value >= 10 ? Math.round(value) : value.toFixed(1)} GiB`;
}

/**
 * Bytes as KiB, MiB or GiB, whichever reads best (a file's size).
 * @param {string | number | undefined} bytes
 * @returns {string}
 */
export function size(bytes) {
  const n = Number(bytes ?? 0);
  if (!Number.isFinite(n) || n <= 0) return '—';
  if (n >= 2 ** 30) return gib(n);
  const mib = n / 2 ** 20;
  if (mib >= 1) return `${mib >= 10 ? Math.round(mib) : mib.toFixed(1)} MiB`;
  return `${Math.max(1, Math.round(n / 1024))} KiB`;
}

/**
 * How busy a GPU (or a workload's GPUs) was at its last sample: `87% busy · 20 GiB of 80 GiB
 * used`, or a dash before the first sample.
 * @param {{ utilization_percent?: number, memory_used_bytes?: string | number } | undefined} use
 * @param {string | number | undefined} [total]
 * @returns {string}
 */
export function gpuUse(use, total) {
  if (!use) return '—';
  const used = Number(use.memory_used_bytes ?? 0) > 0 ? size(use.memory_used_bytes) : '0 MiB';
  const of = total ? ` of ${gib(total)}` : '';
  return `${use.utilization_percent ?? 0}% busy · ${used}${of} used`;
}

/**
 * A text, or a dash when empty.
 * @param {string | undefined} text
 * @returns {string}
 */
export function orDash(text) {
  return text ? text : '—';
}

/**
 * A CSV field (RFC 4180): quoted when it holds a comma, a quote or a line break, its quotes
 * doubled; one a spreadsheet would take for a formula (`=`, `+`, `-`, `@`, a tab or a carriage
 * return first: a token's name, an email) starts with `'`, as OWASP advises. As the CLI's
 * `--format csv` writes them.
 * @param {unknown} value
 * @returns {string}
 */
export function csvField(value) {
  const raw = value === undefined || value === null ? '' : String(value);
  const text = /^[=+\-@\t\r]/.test(raw) ? `'${raw}` : raw;
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

/**
 * A local calendar date as `YYYY-MM-DD` (what `<input type="date">` reads and writes).
 * @param {Date} date
 * @returns {string}
 */
export function isoDate(date) {
  const pad = (/** @type {number} */ n) => String(n).padStart(2, '0');
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}`;
}

/**
 * The local midnight that starts a `YYYY-MM-DD` date, or null if it isn't one.
 * @param {string} value
 * @returns {Date | null}
 */
export function startOfDate(value) {
  const match = /^(\d{4})-(\d{2})-(\d{2})$/.exec(value);
  if (!match) return null;
  const date = new Date(Number(match[1]), Number(match[2]) - 1, Number(match[3]));
  return Number.isNaN(date.getTime()) ? null : date;
}

/** Workload states, in lifecycle order. */
export const STATES = [
  'pending',
  'queued',
  'provisioning',
  'running',
  'stopping',
  'stopped',
  'failed',
  'deleting',
  'deleted',
];

/** Workload kinds. */
export const KINDS = ['notebook', 'endpoint', 'vm'];

/**
 * A state as a badge; its text is the state's word.
 * @param {string} state
 * @returns {HTMLElement}
 */
export function stateBadge(state) {
  return h('span', { class: `state state-${STATES.includes(state) ? state : 'unknown'}` }, state || 'unknown');
}

/**
 * How a machine runs VMs, in words: `KVM` or `qemu's emulation (TCG: slow)`; '' when unknown.
 * @param {string} accel
 * @returns {string}
 */
export function accelWords(accel) {
  if (accel === 'kvm') return 'KVM (hardware virtualisation)';
  if (accel === 'tcg') return "qemu's emulation (TCG: slow)";
  return '';
}

/**
 * A machine's VM host line: `VMs: KVM (hardware virtualisation), at most 2 at once`.
 * @param {{ accel?: string, limit?: number }} vm
 * @returns {string}
 */
export function vmHost(vm) {
  const limit = vm.limit ? `, at most ${vm.limit} at once` : '';
  return `VMs: ${accelWords(vm.accel ?? '') || 'yes'}${limit}`;
}
