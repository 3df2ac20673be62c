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
  const text = await response.text();
  /** @type {any} */
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (response.ok) return data;
  const envelope = data && typeof data === 'object' ? data.error : null;
  const error = new ApiError(
    response.status,
    envelope?.code ?? 'internal',
    envelope?.message ?? `Einsora answered HTTP ${response.status}.`,
    envelope?.request_id ?? response.headers.get('X-Request-ID') ?? '',
  );
  if (response.status === 401 && !(method === 'POST' && path === '/v1/sessions')) signedOut();
  throw error;
}

export const api = {
  /** @param {string} path */
  get: (path) => request('GET', path),
  /**
   * @param {string} path
   * @param {unknown} [body]
   */
  post: (path, body = {}) => request('POST', path, body),
  /** @param {string} path */
  delete: (path) => request('DELETE', path),
};

/**
 * Every item of a paged list (`next_page_token`).
 * @param {string} path  with its query, if any
 * @param {string} field  the list's field in each page
 * @param {(itemsSoFar: any[]) => void} [onPage]  called after each page but the last
 * @returns {Promise<any[]>}
 */
export async function listAll(path, field, onPage) {
  const items = [];
  let token = '';
  const join = path.includes('?') ? '&' : '?';
  for (let pages = 0; pages < 1000; pages++) {
    const page = await api.get(token ? `${path}${join}page_token=${encodeURIComponent(token)}` : path);
    items.push(...(page[field] ?? []));
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
