// The remote workers the nodes have seen (operator role): one row per worker and node, online when
// seen in the last 30 s, with the tasks it holds there, its key and the tenants that key serves.

import {api, and, quote} from './api.js';
import {h, fill, time, table, field, select, badge} from './dom.js';
import {pager} from './invocations.js';

/** workerFilter builds the $filter of the workers list from the form's query parameters. */
export function workerFilter(q) {
  const status = q.get('status'), node = (q.get('node') || '').trim();
  return and(status ? `status eq ${quote(status)}` : '', node ? `node eq ${quote(node)}` : '');
}

export async function workersPage(ctx) {
  const q = ctx.query;
  const form = h('form', {class: 'filters', 'aria-label': 'Filter workers'},
    field('Status', select('status', [['', 'any'], ['online', 'online'], ['offline', 'offline']], q.get('status') || '')),
    field('Node', h('input', {name: 'node', value: q.get('node') || '', size: 20})),
    h('button', {type: 'submit'}, 'Apply'));
  form.addEventListener('submit', ev => {
    ev.preventDefault();
    const p = new URLSearchParams();
    for (const [k, v] of new FormData(form)) if (v) p.set(k, v);
    ctx.navigate('/workers' + (p.size ? '?' + p : ''));
  });
  const filter = workerFilter(q);
  const page = await api('GET', '/workers', {signal: ctx.signal, query: {$filter: filter, limit: 50, cursor: q.get('cursor')}});
  fill(ctx.main, h('h1', {tabindex: -1}, 'Workers'),
    h('p', {class: 'muted'}, 'Remote workers (lark worker, pkg/larkworker) as each node saw them: a node records the workers that poll or heartbeat every 10 s; a worker is online when seen in the last 30 s.'),
    form,
    h('div', {id: 'worker-list'}, table('Workers by id and node', [
      {label: 'Worker', cell: w => h('span', {class: 'mono'}, w.worker_id)},
      {label: 'Node', cell: w => h('span', {class: 'mono'}, w.node)},
      {label: 'Status', cell: w => badge(w.status)},
      {label: 'Tasks held', cell: w => String(w.tasks_held)},
      {label: 'Capacity', cell: w => w.capacity ? String(w.capacity) : '—'},
      {label: 'Key', cell: w => h('span', {class: 'mono'}, w.key_id)},
      {label: 'Tenants', cell: w => (w.tenants || []).length ? w.tenants.join(', ') : 'all'},
      {label: 'First seen', cell: w => time(w.first_seen_at)},
      {label: 'Last seen', cell: w => time(w.last_seen_at)},
      {label: 'Version', cell: w => w.version || '—'},
    ], page.items, filter ? 'No workers match.' : 'No workers seen. Start one with lark worker (docs/workers.md).')),
    pager(ctx, page.page_info, '/workers'));
}
