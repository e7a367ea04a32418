// Sign-in with the OIDC issuer the server names in /console/config.json: the authorization code
// flow with PKCE (S256), the console being a public client (no secret). The code verifier, the
// state and the page to return to are kept in sessionStorage for the round trip to the issuer;
// the callback checks the state, exchanges the code at the issuer's token endpoint from the
// browser, and the ID token then serves as the bearer token, like a pasted one.

const PENDING_KEY = 'lark.console.oidc';
export const CALLBACK = '/console/oidc/callback';

/** oidcConfig answers {issuer, client_id} when the server offers OIDC sign-in, else null. */
export async function oidcConfig() {
  const res = await fetch('/console/config.json', {cache: 'no-store', credentials: 'omit'});
  if (!res.ok) return null;
  return (await res.json()).oidc || null;
}

async function discover(issuer) {
  const res = await fetch(issuer.replace(/\/$/, '') + '/.well-known/openid-configuration', {credentials: 'omit'});
  if (!res.ok) throw new Error(`the issuer's discovery document answered HTTP ${res.status}`);
  const doc = await res.json();
  if (doc.issuer !== issuer || !doc.authorization_endpoint || !doc.token_endpoint) {
    throw new Error('the issuer\'s discovery document does not name this issuer and its endpoints');
  }
  return doc;
}

function b64url(bytes) {
  return btoa(String.fromCharCode(...new Uint8Array(bytes))).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

function random() {
  return b64url(crypto.getRandomValues(new Uint8Array(32)));
}

/** startSignIn sends the browser to the issuer's authorization endpoint; next is where to return. */
export async function startSignIn(cfg, next) {
  const doc = await discover(cfg.issuer);
  const verifier = random(), state = random(), nonce = random();
  const challenge = b64url(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier)));
  sessionStorage.setItem(PENDING_KEY, JSON.stringify({verifier, state, nonce, next, token_endpoint: doc.token_endpoint}));
  const url = new URL(doc.authorization_endpoint);
  const q = {response_type: 'code', client_id: cfg.client_id, redirect_uri: location.origin + CALLBACK,
    scope: 'openid profile', state, nonce, code_challenge: challenge, code_challenge_method: 'S256'};
  for (const [k, v] of Object.entries(q)) url.searchParams.set(k, v);
  location.assign(url.href);
}

/**
 * finishSignIn completes the flow on the callback page: it checks the state, exchanges the code
 * for tokens and answers {token, next}. The pending sign-in is removed whatever happens.
 */
export async function finishSignIn(cfg, query) {
  const raw = sessionStorage.getItem(PENDING_KEY);
  sessionStorage.removeItem(PENDING_KEY);
  let pending = null;
  try { pending = JSON.parse(raw || 'null'); } catch { pending = null; }
  if (!pending || !query.get('state') || query.get('state') !== pending.state) {
    throw new Error('this sign-in was not started from this tab (state mismatch); start again');
  }
  if (query.get('error')) throw new Error(`the issuer refused: ${query.get('error')} ${query.get('error_description') || ''}`.trim());
  const body = new URLSearchParams({grant_type: 'authorization_code', code: query.get('code') || '',
    redirect_uri: location.origin + CALLBACK, client_id: cfg.client_id, code_verifier: pending.verifier});
  const res = await fetch(pending.token_endpoint, {method: 'POST', body, credentials: 'omit', cache: 'no-store'});
  const tokens = await res.json().catch(() => ({}));
  if (!res.ok) throw new Error(`the code exchange failed: ${tokens.error || 'HTTP ' + res.status} ${tokens.error_description || ''}`.trim());
  const token = tokens.id_token || tokens.access_token;
  if (!token) throw new Error('the issuer answered no token');
  return {token, next: pending.next};
}
