// The console's shell: a router over History API paths under /console, the login page and the
// header (who is logged in, log out). Each page is a module function page(ctx).

import {api, ApiError, session} from './api.js';
import {h, clear, fill} from './dom.js';
import {entrypointsPage, entrypointPage} from './entrypoints.js';
import {invocationsPage, invocationPage} from './invocations.js';
import {schedulesPage, schedulePage, backfillsPage, backfillPage} from './schedules.js';
import {triggersPage} from './triggers.js';
import {triggerPage} from './deadletters.js';
import {eventTypesPage, eventTypePage, eventsPage, eventPage} from './events.js';
import {webhooksPage, webhookPage} from './webhooks.js';
import {secretsPage, tokensPage} from './admin.js';
import {auditPage} from './audit.js';
import {workersPage} from './workers.js';
import {searchPage} from './search.js';
import {usagePage} from './usage.js';
import {assetsPage} from './assets.js';
import {oidcConfig, startSignIn, finishSignIn} from './oidc.js';

const ROOT = '/console';
const main = document.getElementById('main');
const nav = document.getElementById('nav');
const whoEl = document.getElementById('who');
const flashEl = document.getElementById('flash');
const searchForm = document.getElementById('search-form');

const routes = [
  [/^\/?$/, null],
  [/^\/login$/, loginPage, {public: true, title: 'Log in'}],
  [/^\/oidc\/callback$/, callbackPage, {public: true, title: 'Signing in'}],
  [/^\/entrypoints$/, entrypointsPage, {title: 'Entrypoints'}],
  [/^\/entrypoints\/([^/]+)$/, entrypointPage, {title: 'Entrypoint'}],
  [/^\/invocations$/, invocationsPage, {title: 'Invocations'}],
  [/^\/invocations\/([^/]+)$/, invocationPage, {title: 'Invocation'}],
  [/^\/schedules$/, schedulesPage, {title: 'Schedules'}],
  [/^\/schedules\/([^/]+)$/, schedulePage, {title: 'Schedule'}],
  [/^\/backfills$/, backfillsPage, {title: 'Backfills'}],
  [/^\/backfills\/([^/]+)$/, backfillPage, {title: 'Backfill'}],
  [/^\/triggers$/, triggersPage, {title: 'Triggers'}],
  [/^\/triggers\/([^/]+)$/, triggerPage, {title: 'Trigger'}],
  [/^\/webhooks$/, webhooksPage, {title: 'Webhook triggers'}],
  [/^\/webhooks\/([^/]+)$/, webhookPage, {title: 'Webhook trigger'}],
  [/^\/events$/, eventsPage, {title: 'Events'}],
  [/^\/events\/([^/]+)$/, eventPage, {title: 'Event'}],
  [/^\/event-types$/, eventTypesPage, {title: 'Event types'}],
  [/^\/event-types\/([^/]+)$/, eventTypePage, {title: 'Event type'}],
  [/^\/secrets$/, secretsPage, {title: 'Secrets'}],
  [/^\/tokens$/, tokensPage, {title: 'API tokens'}],
  [/^\/audit$/, auditPage, {title: 'Audit log'}],
  [/^\/workers$/, workersPage, {title: 'Workers'}],
  [/^\/search$/, searchPage, {title: 'Search'}],
  [/^\/usage$/, usagePage, {title: 'Usage'}],
  [/^\/assets$/, assetsPage, {title: 'Assets'}],
];

let current = null; // {controller, cleanups}

/** flash shows a short message in the live region. */
export function flash(msg, kind = 'info') {
  fill(flashEl, h('p', {class: `msg ${kind}`}, msg));
}

/** navigate goes to a console path (with or without the /console prefix). */
export function navigate(path, replace = false) {
  const url = path.startsWith(ROOT) ? path : ROOT + path;
  if (replace) history.replaceState(null, '', url);
  else history.pushState(null, '', url);
  render();
}

function renderWho() {
  const who = session.who;
  clear(whoEl);
  nav.hidden = !session.token;
  searchForm.hidden = !session.token;
  if (!session.token || !who) return;
  const tenant = who.platform_operator ? 'platform operator' : `tenant ${who.tenant_id}`;
  whoEl.append(
    h('span', {id: 'whoami', 'data-tenant': who.tenant_id || '', 'data-subject': who.subject_id},
      `${who.subject_id} · ${tenant} · ${(who.roles || []).join(', ') || 'all roles'}`),
    h('button', {type: 'button', class: 'link', onclick: () => { session.clear(); navigate('/login'); }}, 'Log out'));
}

function markNav(path) {
  for (const a of nav.querySelectorAll('a')) {
    const here = path === a.getAttribute('href') || path.startsWith(a.getAttribute('href') + '/');
    if (here) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
}

/** render shows the page of the current location. */
async function render() {
  if (current) {
    current.controller.abort();
    current.cleanups.forEach(f => f());
  }
  const here = {controller: new AbortController(), cleanups: []};
  current = here;
  const rel = location.pathname.slice(ROOT.length) || '/';
  renderWho();
  markNav(location.pathname);
  let page = null, match = null, opts = {};
  for (const [re, fn, o] of routes) {
    match = rel.match(re);
    if (match) { page = fn; opts = o || {}; break; }
  }
  if (!page && match) return navigate(session.token ? '/invocations' : '/login', true);
  if (!page) {
    fill(main, h('h1', {tabindex: -1}, 'Not found'),
      h('p', {}, 'No console page here. ', h('a', {href: ROOT + '/invocations'}, 'Go to the invocations.')));
    return;
  }
  if (!opts.public && !session.token) return navigate('/login?next=' + encodeURIComponent(location.pathname + location.search), true);
  document.title = `${opts.title} · Lark console`;
  clear(flashEl);
  fill(main, h('p', {class: 'muted'}, 'Loading…'));
  const ctx = {
    main, navigate, flash,
    params: match.slice(1).map(decodeURIComponent),
    query: new URLSearchParams(location.search),
    signal: here.controller.signal,
    live: () => current === here,
    onCleanup: f => here.cleanups.push(f),
    /** every(ms, f) runs f every ms while this page is shown and the tab visible (never overlapping itself). */
    every(ms, f) {
      let t = null;
      const tick = async () => {
        if (current !== here) return;
        if (!document.hidden) {
          try { await f(); } catch (e) { if (!(e instanceof DOMException)) showError(e); }
        }
        if (current === here) t = setTimeout(tick, ms);
      };
      t = setTimeout(tick, ms);
      here.cleanups.push(() => clearTimeout(t));
    },
  };
  try {
    await page(ctx);
    if (current === here) main.querySelector('h1')?.focus({preventScroll: true});
  } catch (e) {
    if (current !== here || e?.name === 'AbortError') return;
    showError(e);
    // A page that failed to load says so in the page (in place of "Loading…" if it drew nothing).
    const note = h('p', {class: 'msg error page-error'}, `Could not load this page: ${e?.message || e}`);
    if (!main.querySelector('h1')) fill(main, h('h1', {tabindex: -1}, opts.title), note);
    else main.append(note);
  }
}

/** showError renders a failed call in the page. */
export function showError(e) {
  const msg = e instanceof ApiError ? `${e.problem.title || 'Error'} (${e.status}): ${e.message}` : String(e?.message || e);
  flash(msg, 'error');
}

/** safeNext answers next when it is a console page other than the login's, else the invocations. */
function safeNext(next) {
  return next && next.startsWith(ROOT + '/') && !next.startsWith(ROOT + '/login') && !next.startsWith(ROOT + '/oidc/') ? next : '/invocations';
}

/** oidcButton offers sign-in with the configured issuer, when there is one. */
async function oidcButton(ctx, err) {
  const cfg = await oidcConfig().catch(() => null);
  if (!cfg) return null;
  const button = h('button', {type: 'button', class: 'primary', id: 'oidc-signin'}, `Sign in with ${cfg.issuer}`);
  button.addEventListener('click', async () => {
    err.hidden = true;
    button.disabled = true;
    try {
      await startSignIn(cfg, ctx.query.get('next') || '');
    } catch (e) {
      err.hidden = false;
      err.textContent = `Sign-in failed: ${e.message || e}`;
      button.disabled = false;
    }
  });
  return h('div', {class: 'field'}, button,
    h('p', {class: 'muted'}, 'Or paste a token below (development).'));
}

async function callbackPage(ctx) {
  fill(ctx.main, h('h1', {tabindex: -1}, 'Signing in…'));
  const cfg = await oidcConfig();
  if (!cfg) throw new Error('this server offers no OIDC sign-in');
  try {
    const {token, next} = await finishSignIn(cfg, ctx.query);
    const who = await api('GET', '/whoami', {token});
    session.set(token, who);
    navigate(safeNext(next), true);
  } catch (e) {
    fill(ctx.main, h('h1', {tabindex: -1}, 'Sign-in failed'),
      h('p', {class: 'msg error', role: 'alert', id: 'signin-error'}, e instanceof ApiError ? `The server refused the token: ${e.message}` : String(e.message || e)),
      h('p', {}, h('a', {href: ROOT + '/login'}, 'Back to the log-in page')));
  }
}

async function loginPage(ctx) {
  const token = h('input', {type: 'password', name: 'token', autocomplete: 'off', required: true, spellcheck: 'false', 'aria-describedby': 'token-help'});
  const err = h('p', {class: 'msg error', role: 'alert', hidden: true});
  const form = h('form', {class: 'login', id: 'login-form'},
    h('h1', {tabindex: -1}, 'Log in to Lark'),
    h('div', {class: 'field'}, h('label', {for: 'token'}, 'API token'), token),
    h('p', {id: 'token-help', class: 'muted'},
      'Paste a bearer token (lark_…) issued by POST /tokens, or printed by lark dev. It is kept in this tab only (sessionStorage) and sent to this server\'s API, nowhere else.'),
    err,
    h('button', {type: 'submit', class: 'primary'}, 'Log in'));
  token.id = 'token';
  form.addEventListener('submit', async ev => {
    ev.preventDefault();
    err.hidden = true;
    const t = token.value.trim();
    try {
      const who = await api('GET', '/whoami', {token: t});
      session.set(t, who);
      const next = ctx.query.get('next');
      navigate(safeNext(next));
    } catch (e) {
      err.hidden = false;
      err.textContent = e instanceof ApiError ? `Log-in failed: ${e.message}` : `Log-in failed: ${e.message || e}`;
      token.focus();
    }
  });
  fill(ctx.main, form);
  token.focus();
  const offer = await oidcButton(ctx, err);
  if (offer && ctx.live()) form.insertBefore(offer, form.querySelector('.field'));
}

document.addEventListener('click', ev => {
  const a = ev.target.closest?.('a[href]');
  // getAttribute, not a.href and a.target: an SVG link (a DAG's task) has them as SVGAnimatedString.
  if (!a || ev.defaultPrevented || ev.button !== 0 || ev.metaKey || ev.ctrlKey || ev.shiftKey || ev.altKey || a.getAttribute('target')) return;
  const url = new URL(a.getAttribute('href'), location.href);
  if (url.origin !== location.origin || !(url.pathname === ROOT || url.pathname.startsWith(ROOT + '/'))) return;
  ev.preventDefault();
  navigate(url.pathname + url.search);
});
searchForm.addEventListener('submit', ev => {
  ev.preventDefault();
  const box = searchForm.elements.q;
  const q = box.value.trim();
  if (!q) return;
  box.value = '';
  navigate('/search?q=' + encodeURIComponent(q));
});
window.addEventListener('popstate', render);
window.addEventListener('lark:logout', ev => {
  navigate('/login?next=' + encodeURIComponent(location.pathname), true);
  flash(`Your session ended: ${ev.detail || 'the token was refused'}. Log in again.`, 'error');
});
render();
