// The console's only way to the server: the public API under /api/serverless-runtime/v1, with the
// bearer token the user pasted at login (kept in sessionStorage, so it ends with the tab).

export const BASE = '/api/serverless-runtime/v1';
const TOKEN_KEY = 'lark.console.token';
const WHO_KEY = 'lark.console.whoami';

/** ApiError is a failed API call: the HTTP status and the RFC 9457 problem document. */
export class ApiError extends Error {
  constructor(status, problem) {
    super(problem?.detail || problem?.title || `HTTP ${status}`);
    this.status = status;
    this.problem = problem || {};
  }
}

/** session holds the token and the identity GET /whoami answered for it. */
export const session = {
  get token() { return sessionStorage.getItem(TOKEN_KEY); },
  get who() {
    try { return JSON.parse(sessionStorage.getItem(WHO_KEY) || 'null'); } catch { return null; }
  },
  set(token, who) {
    sessionStorage.setItem(TOKEN_KEY, token);
    sessionStorage.setItem(WHO_KEY, JSON.stringify(who));
  },
  clear() {
    sessionStorage.removeItem(TOKEN_KEY);
    sessionStorage.removeItem(WHO_KEY);
  },
};

/**
 * api calls METHOD BASE+path with the session's token (or opts.token), query parameters
 * opts.query (empty values left out) and JSON body opts.body. It answers the decoded JSON (null
 * for an empty body) and throws ApiError otherwise. A 401 ends the session.
 */
export async function api(method, path, opts = {}) {
  const url = new URL(BASE + path, location.origin);
  for (const [k, v] of Object.entries(opts.query || {})) {
    if (v !== undefined && v !== null && v !== '') url.searchParams.set(k, v);
  }
  const headers = {Authorization: `Bearer ${opts.token || session.token || ''}`, Accept: 'application/json'};
  const init = {method, headers, signal: opts.signal, cache: 'no-store', credentials: 'omit'};
  if (opts.body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(opts.body);
  }
  const res = await fetch(url, init);
  const text = await res.text();
  let body = null;
  if (text) {
    try { body = JSON.parse(text); } catch { body = {detail: text.slice(0, 500)}; }
  }
  if (!res.ok) {
    if (res.status === 401 && !opts.token) {
      session.clear();
      window.dispatchEvent(new CustomEvent('lark:logout', {detail: body?.detail}));
    }
    throw new ApiError(res.status, body);
  }
  return body;
}

/** quote makes an OData string literal. */
export function quote(v) {
  return `'${String(v).replace(/'/g, "''")}'`;
}

/** enc encodes one path segment. */
export function enc(v) {
  return encodeURIComponent(v);
}

/** and joins the non-empty clauses of a $filter. */
export function and(...clauses) {
  return clauses.filter(Boolean).join(' and ');
}

/** TERMINAL lists the invocation statuses that do not change by themselves. */
export const TERMINAL = new Set(['succeeded', 'failed', 'canceled', 'compensated', 'dead_lettered']);
