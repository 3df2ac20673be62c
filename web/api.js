// The one way the dashboard talks to Einsora: the public JSON API under /v1, same origin, with
// the session cookie (HttpOnly: the browser sends it, scripts never see it) and, on every
// state-changing request, the session's CSRF token in the X-CSRF-Token header. The CSRF token
// comes once, in the sign-in answer; it is kept in this origin's localStorage so every tab
// and every reload of the dashboard can send it.

const CSRF_KEY = 'einsora.csrf';

/** An answer in the error envelope `{"error": {"code", "message", "request_id"}}`. */
export class ApiError extends Error {
  /**
   * @param {number} status  the HTTP status; 0 when nothing answered
   * @param {string} code
   * @param {string} message
   * @param {string} requestId
   */
  constructor(status, code, message, requestId) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
    this.requestId = requestId;
  }
}

export const csrf = {
  /** @returns {string | null} */
  get() {
    try {
      return localStorage.getItem(CSRF_KEY);
    } catch {
      return null;
    }
  },
  /** @param {string} token */
  set(token) {
    localStorage.setItem(CSRF_KEY, token);
  },
  clear() {
    try {
      localStorage.removeItem(CSRF_KEY);
    } catch {
      // Nothing kept, nothing to forget.
    }
  },
};

/** @type {() => void} */
let signedOut = () => {};

/**
 * What to do when the API says the session is gone (401 on anything but signing in).
 * @param {() => void} handler
 */
export function onSignedOut(handler) {
  signedOut = handler;
}

/** Routes whose 401 is about what the body carries (a password, a link's secret), not a session. */
const CREDENTIAL_IN_BODY = ['/v1/sessions', '/v1/invites/accept', '/v1/password-resets/accept'];

/**
 * One API call. Resolves with the JSON body; rejects with an ApiError.
 * @param {string} method
 * @param {string} path  starting with /v1/
 * @param {unknown} [body]  sent as JSON
 * @returns {Promise<any>}
 */
export async function request(method, path, body) {
  /** @type {Record<string, string>} */
  const headers = { Accept: 'application/json' };
  /** @type {RequestInit} */
  const init = { method, headers, credentials: 'same-origin', cache: 'no-store' };
  if (method !== 'GET' && method !== 'HEAD') {
    const token = csrf.get();
    if (token) headers['X-CSRF-Token'] = token;
  }
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  /** @type {Response} */
  let response;
  try {
    response = await fetch(path, init);
  } catch {
    throw new ApiError(0, 'unavailable', "Einsora can't be reached: check that it is running, then try again.", '');
  }
  const data = parse(await response.text());
  if (response.ok) return data;
  throw refusal(response, data, method === 'POST' && CREDENTIAL_IN_BODY.includes(path));
}

/**
 * @param {string} text
 * @returns {any}  the JSON value, or null when it isn't JSON
 */
function parse(text) {
  try {
    return text ? JSON.parse(text) : null;
  } catch {
    return null;
  }
}

/**
 * What an answer that isn't OK says, as an ApiError; a 401 signs the dashboard out (unless it
 * is the answer to signing in).
 * @param {Response} response
 * @param {any} data  its body as JSON
 * @param {boolean} signingIn
 * @returns {ApiError}
 */
function refusal(response, data, signingIn) {
  const envelope = data && typeof data === 'object' ? data.error : null;
  const error = new ApiError(
    response.status,
    envelope?.code ?? 'internal',
    envelope?.message ?? `Einsora answered HTTP ${response.status}.`,
    envelope?.request_id ?? response.headers.get('X-Request-ID') ?? '',
  );
  if (response.status === 401 && !signingIn) signedOut();
  return error;
}

/** @typedef {import('./api-types').Get} Get */
/** @typedef {import('./api-types').Post} Post */
/** @typedef {import('./api-types').Patch} Patch */
/** @typedef {import('./api-types').Put} Put */
/** @typedef {import('./api-types').Delete} Delete */

/**
 * How a call names what it is about: the route's `{name}` parameters, and a query.
 * @typedef {{ params?: Record<string, string>, query?: Record<string, string> }} Where
 */

/**
 * A route as the API documents it (`/v1/workloads/{id}`), its parameters filled in and each
 * encoded, then its query. A parameter the route names and the call doesn't give is a bug.
 * @param {string} route
 * @param {Where} [where]
 * @returns {string}
 */
export function url(route, { params = {}, query = {} } = {}) {
  const path = route.replace(/\{(\w+)\}/g, (_, name) => {
    const value = params[name];
    if (value === undefined) throw new TypeError(`${route} needs its ${name}`);
    return encodeURIComponent(value);
  });
  const search = new URLSearchParams(query).toString();
  return search ? `${path}?${search}` : path;
}

/**
 * The API's routes, typed from its OpenAPI document (api-types.d.ts, generated): what a page
 * reads from an answer, and what it sends, tsc checks against the API.
 */
export const api = {
  /**
   * @template {keyof Get} R
   * @param {R} route
   * @param {Where} [where]
   * @returns {Promise<Get[R]>}
   */
  get: (route, where) => request('GET', url(route, where)),
  /**
   * @template {keyof Post} R
   * @param {R} route
   * @param {Post[R]['body']} body
   * @param {Where} [where]
   * @returns {Promise<Post[R]['answer']>}
   */
  post: (route, body, where) => request('POST', url(route, where), body),
  /**
   * @template {keyof Patch} R
   * @param {R} route
   * @param {Patch[R]['body']} body
   * @param {Where} [where]
   * @returns {Promise<Patch[R]['answer']>}
   */
  patch: (route, body, where) => request('PATCH', url(route, where), body),
  /**
   * @template {keyof Put} R
   * @param {R} route
   * @param {Put[R]['body']} body
   * @param {Where} [where]
   * @returns {Promise<Put[R]['answer']>}
   */
  put: (route, body, where) => request('PUT', url(route, where), body),
  /**
   * @template {keyof Delete} R
   * @param {R} route
   * @param {Where} [where]
   * @returns {Promise<Delete[R]>}
   */
  delete: (route, where) => request('DELETE', url(route, where)),
};

/**
 * The routes that stream (docs/api.md, "Streams"): with `follow=true` they answer NDJSON.
 * @typedef {'/v1/workloads/{id}/logs'} Streaming
 */

const BROKEN = 'The connection to Einsora broke.';

/**
 * Follows a streaming route: `GET` with `follow=true`, answered in NDJSON, one message a line,
 * each given to `onMessage` as it arrives. Resolves when the stream ends; rejects with an
 * ApiError: the refusal before the first line, the error envelope of a last line, or
 * `unavailable` (status 0) when the connection breaks. `signal` aborts it (the promise then
 * rejects with the signal's reason).
 * @template {Streaming} R
 * @param {R} route
 * @param {Where} where  its query without `follow`
 * @param {(message: Get[R]) => void} onMessage
 * @param {AbortSignal} signal
 * @returns {Promise<void>}
 */
export async function follow(route, where, onMessage, signal) {
  const path = url(route, { ...where, query: { ...where.query, follow: 'true' } });
  /** @type {Response} */
  let response;
  try {
    response = await fetch(path, {
      headers: { Accept: 'application/x-ndjson' },
      credentials: 'same-origin',
      cache: 'no-store',
      signal,
    });
  } catch (error) {
    if (signal.aborted) throw error;
    throw new ApiError(0, 'unavailable', "Einsora can't be reached: check that it is running, then try again.", '');
  }
  if (!response.ok || !response.body) throw refusal(response, parse(await response.text()), false);
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  const take = (/** @type {string} */ line) => {
    if (!line.trim()) return;
    const message = parse(line);
    if (message && typeof message === 'object' && message.error) {
      const { code = 'internal', message: text = 'The stream ended with an error.', request_id = '' } = message.error;
      if (code === 'unauthenticated') signedOut();
      throw new ApiError(response.status, code, text, request_id);
    }
    if (message === null) throw new ApiError(0, 'unavailable', BROKEN, '');
    onMessage(message);
  };
  try {
    for (;;) {
      /** @type {ReadableStreamReadResult<Uint8Array>} */
      let chunk;
      try {
        chunk = await reader.read();
      } catch (error) {
        if (signal.aborted) throw error;
        throw new ApiError(0, 'unavailable', BROKEN, '');
      }
      if (chunk.done) break;
      buffer += decoder.decode(chunk.value, { stream: true });
      const lines = buffer.split('\n');
      buffer = lines.pop() ?? '';
      for (const line of lines) take(line);
    }
    take(buffer + decoder.decode());
  } finally {
    // Whatever ended the reading (the end, an error line, a page it couldn't take), the
    // connection goes with it.
    reader.cancel().catch(() => {});
  }
}

/**
 * The routes that answer in pages (`next_page_token`), and the list each page holds.
 * @typedef {{
 *   '/v1/workloads': import('./api-types').Workload,
 *   '/v1/usage': import('./api-types').UsageRecord,
 *   '/v1/activity': import('./api-types').ActivityEntry,
 * }} Paged
 */
/** @type {{ [R in keyof Paged]: keyof Get[R] }} */
const PAGED_FIELD = { '/v1/workloads': 'workloads', '/v1/usage': 'records', '/v1/activity': 'entries' };

/**
 * Every item of a paged list.
 * @template {keyof Paged} R
 * @param {R} route
 * @param {Record<string, string>} [query]
 * @param {(itemsSoFar: Paged[R][]) => void} [onPage]  called after each page but the last
 * @returns {Promise<Paged[R][]>}
 */
export async function listAll(route, query = {}, onPage) {
  /** @type {Paged[R][]} */
  const items = [];
  let token = '';
  for (let pages = 0; pages < 1000; pages++) {
    /** @type {Record<string, any>} */
    const page = await api.get(route, { query: token ? { ...query, page_token: token } : query });
    items.push(...(page[PAGED_FIELD[route]] ?? []));
    token = page.next_page_token ?? '';
    if (!token) break;
    onPage?.(items);
  }
  return items;
}

/**
 * Calls `tick` now and then every `ms` after it settles, until the returned function is
 * called. `tick` handles its own errors.
 * @param {() => Promise<void>} tick
 * @param {number} ms
 * @returns {() => void}
 */
export function poll(tick, ms) {
  let stopped = false;
  /** @type {number | undefined} */
  let timer;
  const run = async () => {
    if (stopped) return;
    try {
      await tick();
    } finally {
      if (!stopped) timer = window.setTimeout(run, ms);
    }
  };
  run();
  return () => {
    stopped = true;
    window.clearTimeout(timer);
  };
}
