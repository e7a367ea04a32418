// DAG runs: the graph of a run's tasks (GET /invocations/{id}/tasks), laid out in layers by
// depends_on and colored by state, with the run's counts and fingerprint and a table of the tasks.

import {h, s, fill, badge, shortGTS, table, dl} from './dom.js';
import {enc} from './api.js';

/**
 * layout places tasks in layers: a task's layer is one more than the deepest of its depends_on
 * (0 without any). Within a layer tasks keep the plan's order, then move towards the mean row of
 * their upstream tasks (fewer crossings). It answers {layers: [[task]], pos: Map(id → {layer, row})}.
 */
export function layout(tasks) {
  const byId = new Map(tasks.map(t => [t.task_id, t]));
  const depth = new Map();
  const layerOf = (t, seen = new Set()) => {
    if (depth.has(t.task_id)) return depth.get(t.task_id);
    if (seen.has(t.task_id)) return 0; // a cycle cannot be registered; never loop on one
    seen.add(t.task_id);
    let d = 0;
    for (const up of t.depends_on || []) {
      if (byId.has(up)) d = Math.max(d, layerOf(byId.get(up), seen) + 1);
    }
    depth.set(t.task_id, d);
    return d;
  };
  const layers = [];
  tasks.forEach((t, i) => {
    const d = layerOf(t);
    (layers[d] ||= []).push({t, i});
  });
  const pos = new Map();
  layers.forEach((layer, d) => {
    const key = ({t, i}) => {
      const ups = (t.depends_on || []).map(u => pos.get(u)?.row).filter(r => r !== undefined);
      return ups.length ? ups.reduce((a, b) => a + b, 0) / ups.length : i / tasks.length;
    };
    if (d > 0) layer.sort((a, b) => key(a) - key(b) || a.i - b.i);
    layer.forEach(({t}, row) => pos.set(t.task_id, {layer: d, row}));
  });
  return {layers: layers.map(l => l.map(x => x.t)), pos};
}

const NODE_W = 180, NODE_H = 48, GAP_X = 70, GAP_Y = 18, PAD = 12;

/** stateClass is a task state's CSS class (ds-succeeded, ds-retry_wait…). */
export function stateClass(state) {
  return `ds-${String(state || '').toLowerCase().replace(/[^a-z_]/g, '')}`;
}

/** graph draws the tasks as an SVG: a node per task (a link to its child invocation once it has one), edges from depends_on. */
export function graph(tasks) {
  const {layers, pos} = layout(tasks);
  const rows = Math.max(1, ...layers.map(l => l.length));
  const width = PAD * 2 + layers.length * NODE_W + Math.max(0, layers.length - 1) * GAP_X;
  const height = PAD * 2 + rows * NODE_H + (rows - 1) * GAP_Y;
  const at = id => {
    const p = pos.get(id);
    return {x: PAD + p.layer * (NODE_W + GAP_X), y: PAD + p.row * (NODE_H + GAP_Y)};
  };
  const counts = {};
  for (const t of tasks) counts[t.state] = (counts[t.state] || 0) + 1;
  const svg = s('svg', {class: 'dag', viewBox: `0 0 ${width} ${height}`, width: Math.min(width, 1240), role: 'group',
    'aria-label': `Task graph: ${tasks.length} tasks in ${layers.length} layers; ` +
      Object.entries(counts).map(([k, n]) => `${n} ${k}`).join(', ')},
  s('defs', {}, s('marker', {id: 'dag-arrow', viewBox: '0 0 8 8', refX: 8, refY: 4, markerWidth: 7, markerHeight: 7, orient: 'auto'},
    s('path', {d: 'M0 0L8 4L0 8Z', class: 'dag-arrowhead'}))));
  for (const t of tasks) {
    const to = at(t.task_id);
    for (const up of t.depends_on || []) {
      if (!pos.has(up)) continue;
      const from = at(up);
      const x1 = from.x + NODE_W, y1 = from.y + NODE_H / 2, x2 = to.x, y2 = to.y + NODE_H / 2, mx = (x1 + x2) / 2;
      svg.append(s('path', {class: 'dag-edge', 'data-edge': `${up}->${t.task_id}`, 'marker-end': 'url(#dag-arrow)',
        d: `M${x1} ${y1}C${mx} ${y1} ${mx} ${y2} ${x2 - 1} ${y2}`}));
    }
  }
  for (const t of tasks) {
    const {x, y} = at(t.task_id);
    const sub = [t.state, t.attempts > 1 ? `${t.attempts} attempts` : '', t.gating_decision && t.gating_decision !== 'allow' ? t.gating_decision : '']
      .filter(Boolean).join(' · ');
    const label = `${t.task_id}: ${sub}${t.invocation_id ? '' : ' (no invocation yet)'}`;
    const body = [
      s('rect', {x, y, width: NODE_W, height: NODE_H, rx: 6}),
      s('text', {class: 'dag-id', x: x + 10, y: y + 19}, truncate(t.task_id, 22)),
      s('text', {class: 'dag-state', x: x + 10, y: y + 37}, truncate(sub, 28)),
      s('title', {}, `${label}${t.asset_key ? ` — asset ${t.asset_key}` : ''}${t.reason ? ` — ${t.reason}` : ''}`),
    ];
    const cls = `dag-node ${stateClass(t.state)}${t.gating_decision === 'quarantine' ? ' dag-quarantine' : ''}`;
    svg.append(t.invocation_id
      ? s('a', {class: cls, href: `/console/invocations/${enc(t.invocation_id)}`, 'data-task': t.task_id, 'data-state': t.state, 'aria-label': label}, body)
      : s('g', {class: cls, 'data-task': t.task_id, 'data-state': t.state, role: 'img', 'aria-label': label}, body));
  }
  const legend = h('ul', {class: 'legend', 'aria-label': 'Legend'},
    [['succeeded', 'succeeded'], ['failed', 'failed'], ['running', 'queued / running'], ['retry_wait', 'waiting to retry'],
      ['skipped', 'skipped / cancelled'], ['pending', 'pending']].map(([c, l]) =>
      h('li', {}, h('span', {class: `swatch dsw-${c}`, 'aria-hidden': 'true'}), l)));
  return h('div', {class: 'dag-wrap'}, svg, legend);
}

/** checks summarises a task's or a materialization's check results: "2 passed, 1 failed (has_rows)". */
export function checksText(checks) {
  if (!Array.isArray(checks) || !checks.length) return '—';
  const failed = checks.filter(c => !c.passed && !c.skipped);
  const passed = checks.filter(c => c.passed).length;
  const skipped = checks.filter(c => c.skipped).length;
  return [passed ? `${passed} passed` : '', failed.length ? `${failed.length} failed (${failed.map(c => c.name).join(', ')})` : '',
    skipped ? `${skipped} skipped` : ''].filter(Boolean).join(', ');
}

/** dagSection renders a DAG run: its counts and fingerprint, the task graph and the tasks' table. */
export function dagSection(rec, tasks) {
  const d = rec.dag || {};
  const ended = (d.succeeded || 0) + (d.failed || 0) + (d.skipped || 0) + (d.cancelled || 0);
  return [
    h('h2', {id: 'dag-h'}, 'Tasks'),
    dl([
      ['Partition', d.partition_key || '(unpartitioned)'],
      ['Tasks', h('span', {id: 'dag-counts'},
        `${d.tasks ?? tasks.length} tasks: ${d.succeeded || 0} succeeded, ${d.failed || 0} failed, ${d.skipped || 0} skipped, ` +
        `${d.cancelled || 0} cancelled${ended < (d.tasks ?? tasks.length) ? `, ${(d.tasks ?? tasks.length) - ended} not ended` : ''}`)],
      d.warning ? ['Warning', h('span', {class: 'bad'}, 'a check failed with severity ERROR, or an output was quarantined')] : null,
      ['Plan fingerprint', h('code', {id: 'dag-fingerprint', class: 'wrap'}, d.fingerprint || '—')],
    ]),
    tasks.length ? graph(tasks) : h('p', {class: 'muted'}, 'The run has not planned its tasks yet.'),
    table('Tasks in plan order', [
      {label: 'Task', cell: t => h('strong', {}, t.task_id)},
      {label: 'State', cell: t => h('span', {class: `badge ${stateClass(t.state)}`}, t.state)},
      {label: 'Function', cell: t => h('span', {class: 'mono', title: t.entrypoint_id}, shortGTS(t.entrypoint_id))},
      {label: 'Depends on', cell: t => (t.depends_on || []).join(', ') || '—'},
      {label: 'Attempts', cell: t => t.attempts},
      {label: 'Checks', cell: t => checksText(t.checks)},
      {label: 'Gating', cell: t => t.gating_decision || '—'},
      {label: 'Asset', cell: t => t.asset_key
        ? h('a', {href: `/console/assets?asset=${enc(t.asset_key)}`}, t.asset_key, t.materialization_id ? h('span', {class: 'mono muted'}, ` ${t.materialization_id}`) : null)
        : '—'},
      {label: 'Invocation', cell: t => t.invocation_id ? h('a', {href: `/console/invocations/${enc(t.invocation_id)}`, class: 'mono'}, t.invocation_id) : '—'},
      {label: 'Reason', cell: t => t.reason || t.error?.message || ''},
    ], tasks, 'No tasks.'),
  ];
}

function truncate(t, n) {
  t = String(t);
  return t.length > n ? t.slice(0, n - 1) + '…' : t;
}
