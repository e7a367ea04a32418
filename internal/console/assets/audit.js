// The audit log (admin): every change to the tenant's resources, newest first, filtered by actor,
// event type, resource, correlation id and time range.

import {api, and, quote, enc} from './api.js';
import {h, fill, time, table, field, select, json} from './dom.js';
import {pager} from './invocations.js';

const TYPE_PREFIX = 'gts.x.core.serverless.audit.v1~x.core.serverless.audit.';
const RESOURCES = ['entrypoint', 'token', 'tenant', 'secret', 'event_type', 'trigger', 'webhook_trigger', 'schedule', 'backfill', 'identity_provider', 'materialization'];

/** auditType expands a short audit type ("token_created") to its GTS id; a full id is kept. */
export function auditType(v) {
  v = (v || '').trim();
  if (!v || v.startsWith('gts.')) return v;
  return TYPE_PREFIX + v + (/\.v\d+~$/.test(v) ? '' : '.v1~');
}

/** auditFilter builds the $filter of the audit log from the form's query parameters. */
export function auditFilter(q) {
  const local = v => v ? new Date(v).toISOString() : '';
  const eq = (k, v) => v && v.trim() ? `${k} eq ${quote(v.trim())}` : '';
  const from = local(q.get('from')), to = local(q.get('to'));
  return and(eq('actor_id', q.get('actor')), eq('type', auditType(q.get('type'))), eq('resource_type', q.get('resource_type')),
    eq('resource_id', q.get('resource_id')), eq('correlation_id', q.get('correlation')),
    from ? `timestamp ge ${from}` : '', to ? `timestamp lt ${to}` : '');
}

export async function auditPage(ctx) {
  const q = ctx.query;
  const form = h('form', {class: 'filters', 'aria-label': 'Filter the audit log'},
    field('Actor', h('input', {name: 'actor', value: q.get('actor') || '', size: 14})),
    field('Type (e.g. token_created)', h('input', {name: 'type', value: q.get('type') || '', size: 24})),
    field('Resource type', select('resource_type', [['', 'any'], ...RESOURCES.map(r => [r, r])], q.get('resource_type') || '')),
    field('Resource id', h('input', {name: 'resource_id', value: q.get('resource_id') || '', size: 24})),
    field('Correlation id', h('input', {name: 'correlation', value: q.get('correlation') || '', size: 20})),
    field('From', h('input', {type: 'datetime-local', name: 'from', value: q.get('from') || ''})),
    field('Before', h('input', {type: 'datetime-local', name: 'to', value: q.get('to') || ''})),
    h('button', {type: 'submit'}, 'Apply'));
  form.addEventListener('submit', ev => {
    ev.preventDefault();
    const p = new URLSearchParams();
    for (const [k, v] of new FormData(form)) if (v) p.set(k, v);
    ctx.navigate('/audit' + (p.size ? '?' + p : ''));
  });
  const page = await api('GET', '/audit-events', {signal: ctx.signal,
    query: {$filter: auditFilter(q), $orderby: 'timestamp desc', limit: 50, cursor: q.get('cursor')}});
  const filterBy = (k, v, label) => h('a', {href: `/console/audit?${k}=${enc(v)}`, title: `Only ${k.replace('_', ' ')} ${v}`}, label ?? v);
  fill(ctx.main, h('h1', {tabindex: -1}, 'Audit log'), form,
    h('div', {id: 'audit-list'}, table('Audit events, newest first', [
      {label: 'When', cell: e => time(e.timestamp)},
      {label: 'Type', cell: e => filterBy('type', shortType(e.type))},
      {label: 'Actor', cell: e => filterBy('actor', e.actor_id)},
      {label: 'Resource', cell: e => [e.resource_type, ' ', filterBy('resource_id', e.resource_id, h('span', {class: 'mono'}, e.resource_id))]},
      {label: 'Correlation', cell: e => e.correlation_id ? filterBy('correlation', e.correlation_id, h('span', {class: 'mono'}, e.correlation_id)) : ''},
      {label: 'Details', cell: e => e.details === undefined ? '' : h('code', {class: 'details wrap'}, json(e.details).replace(/\s*\n\s*/g, ' '))},
    ], page.items, 'No audit events match.')),
    pager(ctx, page.page_info, '/audit'));
}

/** shortType answers an audit type without its common prefix and version ("token_created"). */
function shortType(t) {
  return String(t).startsWith(TYPE_PREFIX) ? t.slice(TYPE_PREFIX.length).replace(/\.v1~$/, '') : t;
}
