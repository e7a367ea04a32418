// Tenant usage (GET /tenants/{id}/usage) and cost over time (…/usage/history) as SVG charts.

import {api, enc, session} from './api.js';
import {h, fill, table, field, select, num, dur} from './dom.js';
import {bars, gauge} from './charts.js';

export async function usagePage(ctx) {
  const q = ctx.query;
  const who = session.who || {};
  const tenant = q.get('tenant') || who.tenant_id || '';
  const gran = q.get('granularity') || 'daily';
  const form = h('form', {class: 'filters', 'aria-label': 'Usage period'},
    who.platform_operator ? field('Tenant', h('input', {name: 'tenant', value: tenant, required: true})) : null,
    field('Buckets', select('granularity', [['hourly', 'hourly (last 24 h)'], ['daily', 'daily (last 30 days)'], ['weekly', 'weekly (last 12 weeks)']], gran)),
    h('button', {type: 'submit'}, 'Apply'));
  form.addEventListener('submit', ev => {
    ev.preventDefault();
    const p = new URLSearchParams();
    for (const [k, v] of new FormData(form)) if (v) p.set(k, v);
    ctx.navigate('/usage?' + p);
  });
  fill(ctx.main, h('h1', {tabindex: -1}, 'Usage and cost'), form);
  if (!tenant) {
    ctx.main.append(h('p', {class: 'muted'}, 'Name a tenant to see its usage.'));
    return;
  }
  const [cur, hist] = await Promise.all([
    api('GET', `/tenants/${enc(tenant)}/usage`, {signal: ctx.signal}),
    api('GET', `/tenants/${enc(tenant)}/usage/history`, {signal: ctx.signal, query: {granularity: gran}}),
  ]);
  const u = cur.utilization_percent || {}, c = cur.current || {}, qu = cur.quotas || {};
  const gauges = [
    ['Concurrent executions', 'concurrent_executions', c.concurrent_executions, qu.max_concurrent_executions],
    ['Definitions', 'definitions', c.total_definitions, qu.max_definitions],
    ['Schedules', 'schedules', c.total_schedules, qu.max_schedules],
    ['Triggers', 'triggers', c.total_triggers, qu.max_triggers],
    ['Execution history', 'execution_history', c.execution_history_mb, qu.max_execution_history_mb],
  ];
  const label = b => {
    const d = new Date(b.start);
    return gran === 'hourly' ? d.toLocaleTimeString(undefined, {hour: '2-digit', minute: '2-digit'}) : d.toLocaleDateString(undefined, {month: 'short', day: 'numeric'});
  };
  const buckets = hist.buckets || [];
  const t = hist.totals || {};
  ctx.main.append(
    h('section', {'aria-labelledby': 'now-h'}, h('h2', {id: 'now-h'}, `Now (tenant ${cur.tenant_id})`),
      gauges.map(([l, k, v, max]) => max === undefined
        ? h('p', {class: 'gauge-row'}, h('span', {class: 'gauge-label'}, l), ` ${num(v)} (no quota)`)
        : gauge(l, u[k], `${num(v)} of ${num(max)}`))),
    h('section', {'aria-labelledby': 'hist-h'}, h('h2', {id: 'hist-h'}, 'History'),
      h('p', {}, `Totals: ${num(t.invocations, 0)} invocations, ${num(t.finished, 0)} finished, ${num(t.executions, 0)} executions, ` +
        `${dur(t.billed_duration_ms)} billed, cost ${num(t.cost, 6)} ${hist.currency || ''}`),
      bars('Runs finished per bucket, by outcome', buckets.map(b => ({label: label(b), values: {
        succeeded: b.by_status?.succeeded, failed: b.by_status?.failed, canceled: b.by_status?.canceled, dead_lettered: b.dead_lettered}})),
      [{key: 'succeeded', label: 'succeeded', cls: 'sw-ok'}, {key: 'failed', label: 'failed', cls: 'sw-fail'},
        {key: 'canceled', label: 'canceled', cls: 'sw-info'}, {key: 'dead_lettered', label: 'dead-lettered', cls: 'sw-retry'}], v => num(v, 0), true),
      bars(`Cost per bucket (${hist.currency || 'no currency'})`, buckets.map(b => ({label: label(b), values: {cost: b.cost}})),
        [{key: 'cost', label: 'cost', cls: 'sw-comp'}], v => num(v, 6)),
      h('details', {}, h('summary', {}, 'The charts\' data'),
        table('Usage per bucket', [
          {label: 'From', cell: b => label(b)}, {label: 'Invocations', cell: b => num(b.invocations, 0)},
          {label: 'Succeeded', cell: b => num(b.by_status?.succeeded, 0)}, {label: 'Failed', cell: b => num(b.by_status?.failed, 0)},
          {label: 'Canceled', cell: b => num(b.by_status?.canceled, 0)}, {label: 'Dead-lettered', cell: b => num(b.dead_lettered, 0)},
          {label: 'Cost', cell: b => num(b.cost, 6)},
        ], buckets)),
      h('details', {}, h('summary', {}, 'Per entrypoint'),
        table('Usage per entrypoint version', [
          {label: 'Entrypoint', cell: e => h('span', {class: 'mono'}, e.entrypoint_id)},
          {label: 'Invocations', cell: e => num(e.invocations, 0)}, {label: 'Finished', cell: e => num(e.finished, 0)},
          {label: 'CPU', cell: e => `${num(e.cpu_seconds, 3)} s`}, {label: 'Cost', cell: e => num(e.cost, 6)},
        ], t.entrypoints || []))));
}
