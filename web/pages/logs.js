// A workload's output, the Logs tab of its page: the last lines it printed, then each new one
// as it arrives (the API's followed stream, docs/api.md "Streams") until it stops. Scrolling up
// stops the view following (the lines still come in below); "Jump to newest" follows again. A
// stream that breaks is followed again after the last line read (a few tries, then it says
// so); Download saves every kept line as a .log file. The page keeps the newest 5,000 lines.

import { ApiError, api, follow } from '../api.js';
import { h, errorBox, saveFile } from '../dom.js';

/** Lines asked for when the tab opens. */
const TAIL = 500;
/** A page's lines at most (the API's bound). */
const PAGE = 1000;
/** Lines kept on the page; older ones leave it (Download still has them). */
const KEEP = 5000;
/** Broken streams followed again in a row, without a new line between, before giving up. */
const RESUMES = 5;
/** How near the bottom (px) still counts as at the bottom. */
const SLACK = 8;
/** Errors a follow outlives: Einsora restarting or failing for a moment, or the network. */
const PASSING = ['unavailable', 'internal', 'timeout', 'bad_gateway'];
/** States in which a workload prints, so an ended stream is followed again. */
const PRINTING = ['provisioning', 'running'];

/**
 * @typedef {{
 *   element: HTMLElement,
 *   show: () => void,
 *   hide: () => void,
 *   stop: () => void,
 *   workloadIs: (workload: import('../api-types').Workload) => void,
 * }} LogsPanel
 */

/**
 * The Logs tab's panel for workload `id`; it reads nothing until first shown.
 * @param {string} id
 * @returns {LogsPanel}
 */
export function logsPanel(id) {
  const where = { params: { id } };
  const view = h('div', { class: 'log', role: 'log', 'aria-live': 'off', tabindex: 0, 'aria-label': 'Output' });
  const empty = h('p', { class: 'empty' }, 'Nothing printed yet.');
  const said = h('p', { class: 'log-status', 'aria-live': 'polite' });
  const notes = h('p', { class: 'hint' });
  const problem = h('div', { class: 'problem' });
  const jump = h('button', { type: 'button', class: 'secondary', hidden: true }, 'Jump to newest');
  const again = h('button', { type: 'button', class: 'secondary', hidden: true }, 'Follow again');
  const download = h('button', { type: 'button', class: 'secondary' }, 'Download');
  const downloadSaid = h('span', { class: 'muted', 'aria-live': 'polite' });
  const downloadProblem = h('div', { class: 'problem' });

  /** The last line's number read, and what to ask after next (`next_after`). */
  let last = 0n;
  let after = '0';
  /** Lines on the page, lines taken off it (the oldest), lines gone for good (the API's). */
  let shown = 0;
  let trimmed = 0;
  let dropped = 0;
  /** New lines below while the view is scrolled up. */
  let unseen = 0;
  /** The view sticks to the newest line. */
  let following = true;
  let visible = false;
  let left = false;
  /** The stream ended by itself (the workload stopped), and when. */
  let ended = false;
  let endedAt = 0;
  let resumes = RESUMES;
  /** @type {AbortController | null} */
  let current = null;
  /** @type {number | undefined} */
  let retry;
  /** @type {unknown} what ended following for good */
  let failure = null;
  let name = '';
  let state = '';

  async function connect() {
    if (left || !visible || current) return;
    window.clearTimeout(retry);
    retry = undefined;
    failure = null;
    ended = false;
    const controller = new AbortController();
    current = controller;
    draw();
    /** @type {Record<string, string>} */
    const query = last > 0n ? { after, limit: String(PAGE) } : { tail: String(TAIL) };
    let progressed = false;
    try {
      await follow('/v1/workloads/{id}/logs', { ...where, query }, (page) => {
        progressed = receive(page) || progressed;
        if (progressed) resumes = RESUMES;
      }, controller.signal);
      ended = true;
      endedAt = Date.now();
    } catch (error) {
      if (controller.signal.aborted) return;
      const code = error instanceof ApiError ? error.code : 'unavailable';
      if (PASSING.includes(code) && resumes > 0) {
        resumes -= 1;
        retry = window.setTimeout(() => {
          retry = undefined;
          connect();
        }, 1000 * (RESUMES - resumes));
      } else {
        failure = error;
      }
    } finally {
      if (current === controller) current = null;
      draw();
    }
  }

  /**
   * Adds a page's new lines; whether there were any.
   * @param {import('../api-types').ListWorkloadLogsResponse} page
   * @returns {boolean}
   */
  function receive(page) {
    if (big(page.next_after) > big(after)) after = String(page.next_after);
    dropped = Number(page.dropped ?? 0);
    const fresh = (page.lines ?? []).filter((line) => big(line.number) > last);
    if (fresh.length === 0) {
      draw();
      return false;
    }
    const lines = document.createDocumentFragment();
    for (const line of fresh) {
      for (const note of droppedNotes(line)) lines.append(h('div', { class: 'dropped' }, note));
      lines.append(lineOf(line));
    }
    last = big(fresh[fresh.length - 1].number);
    view.append(lines);
    shown += fresh.length;
    while (shown > KEEP && view.firstElementChild) {
      const oldest = view.firstElementChild;
      if (oldest.classList.contains('line')) {
        shown -= 1;
        trimmed += 1;
      }
      oldest.remove();
    }
    if (!following) unseen += fresh.length;
    draw();
    if (following) toBottom();
    return true;
  }

  function toBottom() {
    view.scrollTop = view.scrollHeight;
  }

  function draw() {
    empty.hidden = shown > 0;
    view.hidden = shown === 0;
    jump.hidden = following || shown === 0;
    again.hidden = !failure;
    problem.replaceChildren(...(failure ? [errorBox(failure)] : []));
    /** @type {string} */
    let text;
    if (failure) text = 'Not following: the stream ended with an error.';
    else if (retry !== undefined) text = 'The stream broke: following again…';
    else if (ended) {
      text = PRINTING.includes(state)
        ? 'The stream ended: following again…'
        : 'The workload isn\u2019t running: these are its last lines. New ones appear here when it runs again.';
    } else if (!current) text = '';
    else if (!following) {
      text = unseen > 0 ? `Paused where you scrolled: ${unseen} new ${unseen === 1 ? 'line' : 'lines'} below.` : 'Paused where you scrolled.';
    } else text = 'Following: new lines appear as the workload prints them.';
    if (said.textContent !== text) said.textContent = text;
    const parts = [];
    if (dropped > 0) parts.push(`${count(dropped)} older ${dropped === 1 ? 'line is' : 'lines are'} no longer kept.`);
    if (trimmed > 0) parts.push(`Showing the newest ${count(KEEP)} lines; ${count(trimmed)} older left the page (Download has them).`);
    const note = parts.join(' ');
    if (notes.textContent !== note) notes.textContent = note;
    notes.hidden = !note;
  }

  view.addEventListener('scroll', () => {
    const bottom = view.scrollHeight - view.scrollTop - view.clientHeight <= SLACK;
    if (bottom === following) return;
    following = bottom;
    if (following) unseen = 0;
    draw();
  });
  // A resize (a phone turned, the window narrowed) re-wraps the lines: stay on the newest.
  const resized = new ResizeObserver(() => {
    if (following) toBottom();
  });
  resized.observe(view);

  jump.addEventListener('click', () => {
    following = true;
    unseen = 0;
    toBottom();
    draw();
    view.focus();
  });
  again.addEventListener('click', () => {
    resumes = RESUMES;
    connect();
  });
  download.addEventListener('click', async () => {
    download.disabled = true;
    downloadSaid.textContent = 'Downloading…';
    downloadProblem.replaceChildren();
    try {
      const { parts, lines } = await everyLine(id, (n) => {
        downloadSaid.textContent = `Downloading… ${count(n)} lines`;
      });
      saveFile(`${fileName(name || id)}.log`, parts, 'text/plain;charset=utf-8');
      downloadSaid.textContent = `Saved ${count(lines)} ${lines === 1 ? 'line' : 'lines'}.`;
    } catch (error) {
      downloadSaid.textContent = '';
      downloadProblem.replaceChildren(errorBox(error));
    } finally {
      download.disabled = false;
    }
  });

  const element = h(
    'div',
    { class: 'logs' },
    h('div', { class: 'actions' }, jump, again, download, downloadSaid),
    downloadProblem,
    said,
    notes,
    problem,
    empty,
    view,
  );
  draw();

  return {
    element,
    show() {
      visible = true;
      if (following) toBottom();
      if (!ended && !failure) connect();
      else draw();
    },
    hide() {
      visible = false;
      current?.abort();
      current = null;
      window.clearTimeout(retry);
      retry = undefined;
      draw();
    },
    stop() {
      left = true;
      current?.abort();
      current = null;
      window.clearTimeout(retry);
      resized.disconnect();
    },
    workloadIs(workload) {
      name = workload.name;
      state = workload.state ?? '';
      // Started again: its new lines are followed (at most every few seconds).
      if (ended && visible && PRINTING.includes(state) && Date.now() - endedAt > 3000) connect();
      else draw();
    },
  };
}

/**
 * What is missing just before a line: a counted drop (a native workload's log rotated before
 * it was read), and a gap of unknown size (a container's log rotated before it was read).
 * @param {import('../api-types').LogLine} line
 * @returns {string[]}
 */
function droppedNotes(line) {
  const notes = [];
  const gone = Number(line.dropped_before ?? 0);
  if (gone > 0) notes.push(`(${gone} lines dropped here)`);
  if (line.gap_before) notes.push("(lines may be missing here: the container's log rotated before they were read)");
  return notes;
}

/**
 * One line as the page shows it: when its machine read it, and its text.
 * @param {import('../api-types').LogLine} line
 * @returns {HTMLElement}
 */
function lineOf(line) {
  const at = line.printed_at ? new Date(line.printed_at) : null;
  const when = at && !Number.isNaN(at.getTime())
    ? h('time', { class: 'at', datetime: line.printed_at, title: at.toLocaleString() }, at.toLocaleTimeString())
    : h('span', { class: 'at' });
  return h(
    'div',
    { class: line.stream === 'stderr' ? 'line stderr' : 'line', 'data-number': line.number },
    when,
    h('span', { class: 'text' }, line.text),
  );
}

/**
 * Every kept line of the workload, as the text of a .log file (what it printed, with where
 * lines were dropped), a page of a thousand at a time.
 * @param {string} id
 * @param {(lines: number) => void} progress
 * @returns {Promise<{parts: string[], lines: number}>}
 */
async function everyLine(id, progress) {
  /** @type {string[]} */
  const parts = [];
  let lines = 0;
  let after = '0';
  for (let pages = 0; ; pages++) {
    const page = await api.get('/v1/workloads/{id}/logs', {
      params: { id },
      query: { after, limit: String(PAGE) },
    });
    const gone = Number(page.dropped ?? 0);
    if (pages === 0 && gone > 0) parts.push(`(${gone} older lines were dropped)\n`);
    for (const line of page.lines ?? []) {
      for (const note of droppedNotes(line)) parts.push(`${note}\n`);
      parts.push(`${line.text}\n`);
    }
    lines += (page.lines ?? []).length;
    if ((page.lines ?? []).length < PAGE || big(page.next_after) <= big(after)) break;
    after = String(page.next_after);
    progress(lines);
  }
  return { parts, lines };
}

/**
 * proto3 JSON writes 64-bit numbers as strings.
 * @param {string | number | undefined} value
 * @returns {bigint}
 */
function big(value) {
  try {
    return BigInt(value ?? 0);
  } catch {
    return 0n;
  }
}

/** @param {number} n */
function count(n) {
  return n.toLocaleString();
}

/**
 * A name safe for a file.
 * @param {string} name
 */
function fileName(name) {
  return name.replace(/[^A-Za-z0-9._-]+/g, '-').replace(/^[.-]+/, '') || 'workload';
}
