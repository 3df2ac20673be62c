// The dashboard's router: history-API routes, the header with its navigation, and who is
// signed in. Each page is a module with `render(main, params, context)`, which may return a
// function that stops what it started (polling, a followed stream).

import { api, csrf, onSignedOut } from './api.js';
import { h } from './dom.js';
import { watchHealth } from './health.js';
import * as signin from './pages/signin.js';
import * as workloads from './pages/workloads.js';
import * as workload from './pages/workload.js';
import * as launch from './pages/launch.js';
import * as machines from './pages/machines.js';
import * as tokens from './pages/tokens.js';
import * as keys from './pages/keys.js';
import * as usage from './pages/usage.js';
import * as activity from './pages/activity.js';
import * as users from './pages/users.js';
import * as quotas from './pages/quotas.js';
import * as link from './pages/link.js';
import * as notfound from './pages/notfound.js';

/**
 * @typedef {{
 *   navigate: (to: string, options?: {replace?: boolean}) => void,
 *   setQuery: (query: URLSearchParams) => void,
 *   signedIn: (session: any) => void,
 *   notice: string,
 * }} Context
 * @typedef {{render: (main: HTMLElement, params: string[], context: Context) => (void | (() => void))}} Page
 */

/** @type {{pattern: RegExp, page: Page, title: string, public?: boolean}[]} */
const ROUTES = [
  { pattern: /^\/signin$/, page: signin, title: 'Sign in', public: true },
  { pattern: /^\/workloads$/, page: workloads, title: 'Workloads' },
  { pattern: /^\/workloads\/([^/]+)$/, page: workload, title: 'Workload' },
  { pattern: /^\/launch$/, page: launch, title: 'Launch' },
  { pattern: /^\/machines$/, page: machines, title: 'Machines' },
  { pattern: /^\/tokens$/, page: tokens, title: 'API tokens' },
  { pattern: /^\/keys$/, page: keys, title: 'Inference keys' },
  { pattern: /^\/usage$/, page: usage, title: 'Usage' },
  { pattern: /^\/activity$/, page: activity, title: 'Activity' },
  { pattern: /^\/users$/, page: users, title: 'Users' },
  { pattern: /^\/quotas$/, page: quotas, title: 'Quotas' },
];

/** An invite or a password-reset link: its secret in the fragment, never sent to a server. */
const LINK = /^#\/(invite|reset)\/([0-9a-f]{64})$/;

const NAV = [
  ['/workloads', 'Workloads'],
  ['/launch', 'Launch'],
  ['/machines', 'Machines'],
  ['/tokens', 'API tokens'],
  ['/keys', 'Inference keys'],
  ['/usage', 'Usage'],
  ['/activity', 'Activity'],
  ['/users', 'Users'],
  ['/quotas', 'Quotas'],
];

const state = {
  /** @type {any} the signed-in caller (`GET /v1/me`), or null */
  me: null,
  /** @type {(() => void) | null} */
  stop: null,
  /** A `GET /v1/me` is on its way. */
  asking: false,
  /** Shown once on the sign-in page. */
  notice: '',
  /** The path and query on screen. */
  shown: '',
};

const main = /** @type {HTMLElement} */ (document.getElementById('main'));
const header = /** @type {HTMLElement} */ (document.getElementById('top'));

/**
 * @param {string} to  a path (and query) of the dashboard
 * @param {{replace?: boolean}} [options]
 */
function navigate(to, options = {}) {
  if (options.replace) history.replaceState(null, '', to);
  else history.pushState(null, '', to);
  // A redirect leaves the focus alone; a move to another page puts it on the new heading.
  render(!options.replace);
}

/**
 * Whether someone is signed in: the CSRF token of a session is kept. Who it is (`GET /v1/me`)
 * is asked alongside, not before, the page: a session the API no longer knows answers 401
 * there or on the page's own calls, and that signs the dashboard out.
 */
function haveSession() {
  if (!csrf.get()) return false;
  if (!state.me && !state.asking) {
    state.asking = true;
    api.get('/v1/me').then(
      (me) => {
        state.me = me;
        const who = header.querySelector('.who');
        if (who) who.textContent = me.email ?? '';
      },
      () => {
        // A 401 has signed out already; anything else leaves the header without the email.
      },
    ).finally(() => {
      state.asking = false;
    });
  }
  return true;
}

/** @param {boolean} moveFocus  after a navigation in the page (not on first load) */
function render(moveFocus) {
  const path = location.pathname.replace(/\/+$/, '') || '/';
  state.stop?.();
  state.stop = null;
  state.shown = location.pathname + location.search;

  const fromLink = LINK.exec(location.hash);
  const route = fromLink
    ? { pattern: LINK, page: link, title: fromLink[1] === 'invite' ? 'Join' : 'Set a password', public: true }
    : ROUTES.find((r) => r.pattern.test(path));
  if (!route?.public) {
    if (!haveSession()) return navigate('/signin', { replace: true });
    if (path === '/') return navigate('/workloads', { replace: true });
  }
  // The banner of what is down, while someone is signed in.
  watchHealth(!route?.public);
  drawHeader(path);
  main.replaceChildren();
  const params = fromLink
    ? fromLink.slice(1)
    : route
      ? (route.pattern.exec(path) ?? []).slice(1).map(decode)
      : [];
  const page = route?.page ?? notfound;
  document.title = `${route?.title ?? 'Not found'} · Einsora`;
  const notice = state.notice;
  state.notice = '';
  const stop = page.render(main, params, {
    navigate,
    setQuery: (query) => {
      const search = query.toString();
      history.replaceState(null, '', search ? `${location.pathname}?${search}` : location.pathname);
      state.shown = location.pathname + location.search;
    },
    notice,
    signedIn: (session) => {
      csrf.set(session.csrf_token);
      state.me = session.me;
      navigate('/workloads');
    },
  });
  if (typeof stop === 'function') state.stop = stop;
  if (moveFocus && !main.contains(document.activeElement)) main.querySelector('h1')?.focus();
}

/** @param {string} part  of a path */
function decode(part) {
  try {
    return decodeURIComponent(part);
  } catch {
    return part;
  }
}

/** The header: the product's name, and for a signed-in user the navigation and Sign out. */
function drawHeader(/** @type {string} */ path) {
  const brand = h('span', { class: 'brand' }, 'Einsora');
  if (!csrf.get() || path === '/signin') {
    header.replaceChildren(brand);
    return;
  }
  const links = NAV.map(([href, text]) => {
    const current = path === href || path.startsWith(`${href}/`);
    return h('li', {}, h('a', { href, 'aria-current': current ? 'page' : false }, text));
  });
  const signOut = h('button', { type: 'button', class: 'secondary', onclick: endSession }, 'Sign out');
  header.replaceChildren(
    brand,
    h(
      'nav',
      { 'aria-label': 'Main' },
      h('ul', {}, links),
      h('span', { class: 'who' }, state.me?.email ?? ''),
      signOut,
    ),
  );
}

async function endSession() {
  try {
    await api.delete('/v1/sessions/current');
  } catch {
    // Signed out here either way: the session is forgotten below.
  }
  forget('');
}

/** @param {string} notice */
function forget(notice) {
  csrf.clear();
  state.me = null;
  state.notice = notice;
  navigate('/signin');
}

onSignedOut(() => {
  if (location.pathname === '/signin') return;
  forget('Your session has ended: sign in again.');
});

// Links inside the dashboard change the route without loading the page again.
document.addEventListener('click', (event) => {
  const target = event.target instanceof Element ? event.target.closest('a') : null;
  if (!target || event.defaultPrevented || event.button !== 0) return;
  if (event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
  const href = target.getAttribute('href') ?? '';
  if (href.startsWith('#')) {
    // The skip link: move the focus without touching the history.
    event.preventDefault();
    document.getElementById(href.slice(1))?.focus();
    return;
  }
  if (target.target || target.hasAttribute('download')) return;
  const url = new URL(target.href, location.href);
  if (url.origin !== location.origin || url.pathname.startsWith('/v1/')) return;
  event.preventDefault();
  if (url.pathname + url.search !== state.shown) navigate(url.pathname + url.search);
});

window.addEventListener('popstate', () => {
  if (location.pathname + location.search !== state.shown) render(true);
});

render(false);
