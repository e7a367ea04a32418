// Event triggers with their metrics (GET /triggers/{id}/metrics) over a chosen window.

import {api, enc} from './api.js';
import {h, fill, badge, shortGTS, table, field, select, num} from './dom.js';
import {pager} from './invocations.js';

export async function triggersPage(ctx) {
  const q = ctx.query;
  const windowSel = q.get('window') || '24h';
  const form = h('form', {class: 'filters', 'aria-label': 'Metrics window'},
    field('Metrics window', select('window', [['1h', 'last hour'], ['24h', 'last 24 hours'], ['7d', 'last 7 days'], ['30d', 'last 30 days']], windowSel)),
    h('button', {type: 'submit'}, 'Apply'));
  form.addEventListener('submit', ev => {
    ev.preventDefault();
    ctx.navigate(`/triggers?window=${enc(new FormData(form).get('window'))}`);
  });
  const page = await api('GET', '/triggers', {signal: ctx.signal, query: {limit: 25, cursor: q.get('cursor')}});
  const metrics = await Promise.all(page.items.map(t =>
    api('GET', `/triggers/${enc(t.trigger_id)}/metrics`, {signal: ctx.signal, query: {window: windowSel}}).catch(e => ({error: e.message}))));
  const rows = page.items.map((t, i) => ({...t, m: metrics[i]}));
  const c = (r, k) => r.m?.metrics ? num(r.m.metrics[k], 0) : '—';
  fill(ctx.main, h('h1', {tabindex: -1}, 'Triggers'), form,
    table(`Event triggers with their metrics over ${windowSel}`, [
      {label: 'Trigger', cell: r => h('a', {href: `/console/triggers/${enc(r.trigger_id)}`, class: 'mono'}, r.trigger_id)},
      {label: 'Event type', cell: r => h('span', {class: 'mono', title: r.event_type_id}, shortGTS(r.event_type_id))},
      {label: 'Entrypoint', cell: r => h('a', {href: `/console/entrypoints/${enc(r.entrypoint_id)}`, class: 'mono', title: r.entrypoint_id}, shortGTS(r.entrypoint_id))},
      {label: 'Status', cell: r => badge(r.status)},
      {label: 'Received', cell: r => c(r, 'events_received')},
      {label: 'Filtered out', cell: r => c(r, 'events_filtered_out')},
      {label: 'Triggered', cell: r => c(r, 'executions_triggered')},
      {label: 'Succeeded', cell: r => c(r, 'executions_succeeded')},
      {label: 'Failed', cell: r => c(r, 'executions_failed')},
      {label: 'Dead-lettered', cell: r => r.m?.metrics?.events_dead_lettered
        ? h('a', {href: `/console/triggers/${enc(r.trigger_id)}`}, c(r, 'events_dead_lettered')) : c(r, 'events_dead_lettered')},
      {label: 'p50 / p99', cell: r => r.m?.metrics ? `${r.m.p50_latency_ms ?? '—'} / ${r.m.p99_latency_ms ?? '—'} ms` : (r.m?.error || '—')},
    ], rows, 'No triggers.'),
    pager(ctx, page.page_info, '/triggers'));
}
