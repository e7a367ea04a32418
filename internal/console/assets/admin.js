// Secrets (names and metadata only: the API never answers a value) and API tokens (never their
// secrets; revoke one).

import {api, enc, and, quote, session} from './api.js';
import {h, fill, time, table, field, select} from './dom.js';
import {pager} from './invocations.js';

export async function secretsPage(ctx) {
  const page = await api('GET', '/secrets', {signal: ctx.signal, query: {limit: 50, cursor: ctx.query.get('cursor')}});
  fill(ctx.main, h('h1', {tabindex: -1}, 'Secrets'),
    h('p', {class: 'muted'}, 'Names and metadata only: values are write-only (set them with POST or PUT /secrets, or lark secrets); code refers to one as {{secret:NAME}} in a request header.'),
    h('div', {id: 'secret-list'}, table('Secrets by name', [
      {label: 'Name', cell: r => h('span', {class: 'mono'}, r.name)},
      {label: 'Description', cell: r => r.description || ''},
      {label: 'Allowed hosts', cell: r => (r.allowed_hosts || []).join(', ')},
      {label: 'Version', cell: r => r.version},
      {label: 'Updated', cell: r => `${time(r.updated_at)}${r.updated_by ? ` by ${r.updated_by}` : ''}`},
      {label: 'Last used', cell: r => time(r.last_used_at)},
    ], page.items, 'No secrets.')),
    pager(ctx, page.page_info, '/secrets'));
}

export async function tokensPage(ctx) {
  const q = ctx.query;
  const state = q.get('state') || 'active';
  const form = h('form', {class: 'filters', 'aria-label': 'Filter tokens'},
    field('Subject', h('input', {name: 'subject', value: q.get('subject') || ''})),
    field('Tokens', select('state', [['active', 'not revoked'], ['revoked', 'revoked'], ['all', 'all']], state)),
    h('button', {type: 'submit'}, 'Apply'));
  form.addEventListener('submit', ev => {
    ev.preventDefault();
    const p = new URLSearchParams();
    for (const [k, v] of new FormData(form)) if (v) p.set(k, v);
    ctx.navigate('/tokens?' + p);
  });
  const filter = and(q.get('subject') ? `subject_id eq ${quote(q.get('subject'))}` : '',
    state === 'all' ? '' : `revoked eq ${state === 'revoked'}`);
  const page = await api('GET', '/tokens', {signal: ctx.signal, query: {$filter: filter, $orderby: 'created_at desc', limit: 50, cursor: q.get('cursor')}});
  const revoke = async t => {
    const own = t.id === session.who?.token_id;
    if (!confirm(`Revoke the token of ${t.subject_id} (${t.id})?${own ? ' It is the token of this session: you will be logged out.' : ''}`)) return;
    try {
      await api('DELETE', `/tokens/${enc(t.id)}`);
      ctx.flash(`Revoked ${t.id}.`);
      ctx.navigate(location.pathname.slice('/console'.length) + location.search, true);
    } catch (e) {
      ctx.flash(`Revoke failed: ${e.message}`, 'error');
    }
  };
  fill(ctx.main, h('h1', {tabindex: -1}, 'API tokens'),
    h('p', {class: 'muted'}, 'Secrets of tokens are shown once, when issued (POST /tokens); the list never has them.'), form,
    h('div', {id: 'token-list'}, table('API tokens, newest first', [
      {label: 'Token', cell: t => h('span', {class: 'mono'}, t.id)},
      {label: 'Subject', cell: t => t.subject_id},
      {label: 'Roles', cell: t => (t.roles || []).join(', ')},
      {label: 'Description', cell: t => t.description || ''},
      {label: 'Created', cell: t => `${time(t.created_at)} by ${t.created_by}`},
      {label: 'Expires', cell: t => t.expires_at ? time(t.expires_at) : 'never'},
      {label: 'Revoked', cell: t => t.revoked_at ? time(t.revoked_at) : '—'},
      {label: '', cell: t => t.revoked_at ? null : h('button', {type: 'button', class: 'small', 'data-revoke': t.id, onclick: () => revoke(t)}, 'Revoke')},
    ], page.items, 'No tokens match.')),
    pager(ctx, page.page_info, '/tokens'));
}
