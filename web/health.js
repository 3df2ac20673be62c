// The banner under the header while a part of Einsora is down. While someone is signed in,
// `GET /v1/status` is asked every 15 s (not while the tab is hidden; at once when it shows
// again), and each role the API reports unhealthy is named with what it means for the user.
// A poll that fails (nothing answered, or an error answer such as the gateway's 503
// `unavailable` when the api can't answer) is asked again after 3 s, and only a second failure
// in a row shows: one lost request doesn't flash a banner.

import { api, ApiError } from './api.js';
import { h } from './dom.js';

/** How often the status is asked. */
const EVERY = 15_000;
/** How soon a failed ask is tried again, before it shows. */
const RECHECK = 3_000;
/** Failed asks in a row that show the banner. */
const SHOW_AFTER = 2;

/**
 * What each role is, and what its being down means; `usual` is the API's own detail that the
 * sentence already says (any other detail is shown after it).
 * @type {Record<string, {what: string, means: string, usual?: string}>}
 */
const ROLES = {
  gateway: { what: "Einsora's gateway", means: 'the dashboard, the CLI and the API may not work until it\'s back' },
  api: { what: "Einsora's API", means: 'pages can\'t load or change anything until it\'s back' },
  store: {
    what: 'The database',
    means: 'nothing can be read or changed until it\'s back',
    usual: 'the database isn\'t answering',
  },
  controller: {
    what: 'The controller',
    means: 'workloads won\'t start or stop until it\'s back',
    usual: 'not answering',
  },
  metering: {
    what: 'Metering',
    means: 'usage isn\'t counted until it\'s back (it catches up then)',
    usual: 'not answering',
  },
  access: {
    what: 'The access proxy',
    means: 'notebooks and endpoints can\'t be opened until it\'s back',
    usual: 'not answering',
  },
};
const REGION_USUAL = 'no controller leads it: workloads there won\'t start or stop';

/**
 * One thing that is down, as the banner says it: `lead` in bold, then the rest.
 * @typedef {{lead: string, rest: string, requestId?: string}} Problem
 */

/**
 * @param {import('./api-types').RoleStatus} role  an unhealthy one
 * @returns {Problem}
 */
function roleProblem({ name, detail }) {
  const region = /^region (.+)$/.exec(name);
  if (region) {
    const rest = 'workloads there won\'t start or stop until one does';
    return { lead: `No controller leads region ${region[1]}`, rest: withDetail(rest, detail, REGION_USUAL) };
  }
  const known = ROLES[name];
  if (!known) return { lead: `Einsora's ${name} isn't working`, rest: detail || 'it gave no reason' };
  const answering = !detail || /answer/i.test(detail);
  return {
    lead: `${known.what} ${answering ? 'isn\'t answering' : 'isn\'t working'}`,
    rest: withDetail(known.means, detail, known.usual),
  };
}

/**
 * @param {string} text
 * @param {string} detail  what the API said
 * @param {string} [usual]  what the text already says
 */
function withDetail(text, detail, usual) {
  return detail && detail !== usual ? `${text} (${detail})` : text;
}

/**
 * The poll itself failed: what that means.
 * @param {unknown} error
 * @returns {Problem}
 */
function pollProblem(error) {
  const failed = error instanceof ApiError ? error : new ApiError(0, 'unavailable', String(error), '');
  if (failed.status === 0) {
    return {
      lead: 'Can\'t reach Einsora',
      rest: 'check that it is running and that this computer can reach it; the dashboard keeps trying',
    };
  }
  if (failed.code === 'unavailable') {
    return {
      lead: 'Einsora\'s API isn\'t answering',
      rest: 'pages can\'t load or change anything until it\'s back',
      requestId: failed.requestId,
    };
  }
  return {
    lead: 'Einsora can\'t say how it is',
    rest: `asking its status failed: ${failed.message}`,
    requestId: failed.requestId,
  };
}

/** @type {HTMLElement | null} */
let live = null;
let watching = false;
/** Each ask's number: only the latest one's answer counts. */
let asked = 0;
let failures = 0;
/** @type {number | undefined} */
let timer;
/** What the banner says now, to leave it (and screen readers) alone when nothing changed. */
let shown = '';

/**
 * Starts or stops watching: on while someone is signed in (the banner's live region is
 * `#health` in index.html). Stopping takes the banner away.
 * @param {boolean} on
 */
export function watchHealth(on) {
  live ??= document.getElementById('health');
  if (on === watching || !live) return;
  watching = on;
  asked++;
  failures = 0;
  window.clearTimeout(timer);
  timer = undefined;
  if (on) {
    document.addEventListener('visibilitychange', onVisibility);
    ask();
  } else {
    document.removeEventListener('visibilitychange', onVisibility);
    show([]);
  }
}

function onVisibility() {
  if (document.hidden) {
    // Nothing asked while nobody looks; the next look asks at once.
    asked++;
    window.clearTimeout(timer);
    timer = undefined;
  } else {
    ask();
  }
}

async function ask() {
  window.clearTimeout(timer);
  timer = undefined;
  if (!watching || document.hidden) return;
  const mine = ++asked;
  let next = EVERY;
  try {
    const status = await api.get('/v1/status');
    if (mine !== asked) return;
    failures = 0;
    show((status.roles ?? []).filter((r) => !r.healthy).map(roleProblem));
  } catch (error) {
    if (mine !== asked) return;
    // A 401 has signed the dashboard out, which stops the watching.
    if (error instanceof ApiError && error.status === 401) return;
    failures++;
    if (failures >= SHOW_AFTER) show([pollProblem(error)]);
    else next = RECHECK;
  }
  if (watching && !document.hidden) timer = window.setTimeout(ask, next);
}

/** @param {Problem[]} problems */
function show(problems) {
  if (!live) return;
  const said = JSON.stringify(problems);
  if (said === shown) return;
  shown = said;
  if (problems.length === 0) {
    live.replaceChildren();
    return;
  }
  const severe = problems.some((p) => p.lead.startsWith('Can\'t reach') || p.lead.startsWith('Einsora\'s API'));
  live.replaceChildren(
    h(
      'div',
      { class: severe ? 'health-banner severe' : 'health-banner' },
      problems.map((p) =>
        h(
          'p',
          {},
          h('strong', {}, `${p.lead}:`),
          ` ${p.rest}.`,
          p.requestId && h('span', { class: 'request-id' }, ' Request ID: ', h('code', {}, p.requestId)),
        ),
      ),
    ),
  );
}
