// Webhook triggers and, for one, its settings (never its secret), enable/disable and its last
// deliveries (outcome, status, reason, size, source, invocation).

import {api, enc, quote} from './api.js';
import {h, fill, time, badge, shortGTS, table, dl, pre, field, select, num} from './dom.js';
import {pager} from './invocations.js';

export async function webhooksPage(ctx) {
  const page = await api('GET', '/webhook-triggers', {signal: ctx.signal, query: {limit: 25, cursor: ctx.query.get('cursor')}});
  fill(ctx.main, h('h1', {tabindex: -1}, 'Webhook triggers'),
    h('div', {id: 'webhook-list'}, table('Webhook triggers', [
      {label: 'Webhook trigger', cell: r => h('a', {href: `/console/webhooks/${enc(r.webhook_trigger_id)}`, class: 'mono'}, r.webhook_trigger_id)},
      {label: 'Name', cell: r => r.name || ''},
      {label: 'Entrypoint', cell: r => h('a', {href: `/console/entrypoints/${enc(r.entrypoint_id)}`, class: 'mono', title: r.entrypoint_id}, shortGTS(r.entrypoint_id))},
      {label: 'Authentication', cell: r => r.authentication?.type || '—'},
      {label: 'Status', cell: r => badge(r.status)},
      {label: 'Created', cell: r => time(r.created_at)},
    ], page.items, 'No webhook triggers.')),
    pager(ctx, page.page_info, '/webhooks'));
}

const OUTCOMES = ['accepted', 'redelivered', 'source_not_allowed', 'payload_too_large', 'unauthorized', 'replayed', 'rate_limited', 'invalid_payload', 'failed'];

export async function webhookPage(ctx) {
  const id = ctx.params[0];
  const q = ctx.query;
  const base = `/webhook-triggers/${enc(id)}`;
  const [w, dels] = await Promise.all([
    api('GET', base, {signal: ctx.signal}),
    api('GET', `${base}/deliveries`, {signal: ctx.signal, query: {limit: 50, cursor: q.get('cursor'),
      $filter: q.get('outcome') ? `outcome eq ${quote(q.get('outcome'))}` : ''}}),
  ]);
  const toggle = w.status === 'disabled' ? 'enable' : 'disable';
  const act = async () => {
    try {
      await api('POST', `${base}:${toggle}`, {body: {}});
      ctx.navigate(`/webhooks/${enc(id)}`, true);
      ctx.flash(`${toggle}: done.`);
    } catch (e) {
      ctx.flash(`${toggle} failed: ${e.message}`, 'error');
    }
  };
  const form = h('form', {class: 'filters', 'aria-label': 'Filter deliveries'},
    field('Outcome', select('outcome', [['', 'any'], ...OUTCOMES.map(o => [o, o])], q.get('outcome') || '')),
    h('button', {type: 'submit'}, 'Apply'));
  form.addEventListener('submit', ev => {
    ev.preventDefault();
    const o = new FormData(form).get('outcome');
    ctx.navigate(`/webhooks/${enc(id)}${o ? `?outcome=${enc(o)}` : ''}`);
  });
  const a = w.authentication || {};
  fill(ctx.main,
    h('h1', {tabindex: -1}, 'Webhook trigger ', h('span', {class: 'mono'}, w.webhook_trigger_id), ' ', badge(w.status)),
    h('div', {class: 'actions', role: 'group', 'aria-label': 'Webhook trigger actions'},
      h('button', {type: 'button', 'data-action': toggle, onclick: act}, toggle === 'enable' ? 'Enable' : 'Disable')),
    dl([
      ['URL', h('code', {class: 'wrap'}, location.origin + w.webhook_url)],
      ['Entrypoint', h('a', {href: `/console/entrypoints/${enc(w.entrypoint_id)}`, class: 'mono', title: w.entrypoint_id}, shortGTS(w.entrypoint_id))],
      ['Authentication', [a.type, a.format ? ` (${a.format})` : '', a.header ? `, header ${a.header}` : ''].join('')],
      ['Secret', w.secret_generation ? `generation ${w.secret_generation} (shown only when created or regenerated)` : 'none'],
      ['Allowed sources', (w.allowed_sources || []).join(', ') || 'any address'],
      ['Rate limit', w.rate_limit ? `${w.rate_limit.max_requests_per_second}/s, burst ${w.rate_limit.burst_size}` : null],
      ['Max body', w.max_body_bytes ? `${num(w.max_body_bytes, 0)} bytes` : null],
      ['Created', time(w.created_at)], ['Updated', time(w.updated_at)],
    ]),
    w.payload_schema ? h('details', {}, h('summary', {}, 'Payload schema'), pre(w.payload_schema, 'Payload schema')) : null,
    h('h2', {}, 'Deliveries'), form,
    h('div', {id: 'deliveries'}, table('Deliveries, newest first (the last 100 are kept)', [
      {label: 'Delivery', cell: d => h('span', {class: 'mono'}, d.delivery_id)},
      {label: 'Received', cell: d => time(d.received_at)},
      {label: 'Status', cell: d => String(d.status_code)},
      {label: 'Outcome', cell: d => h('span', {class: `outcome outcome-${d.outcome === 'accepted' || d.outcome === 'redelivered' ? 'ok' : 'bad'}`}, d.outcome)},
      {label: 'Reason', cell: d => d.reason || ''},
      {label: 'Source', cell: d => d.source_ip || ''},
      {label: 'Body', cell: d => h('span', {title: d.body_sha256 ? `SHA-256 ${d.body_sha256}` : null}, `${num(d.body_bytes, 0)} B`)},
      {label: 'Invocation', cell: d => d.invocation_id ? h('a', {href: `/console/invocations/${enc(d.invocation_id)}`, class: 'mono'}, d.invocation_id) : '—'},
    ], dels.items, 'No deliveries yet.')),
    pager(ctx, dels.page_info, `/webhooks/${enc(id)}`));
}
