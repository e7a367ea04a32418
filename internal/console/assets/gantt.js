// The invocation timeline as a Gantt chart: one row for the invocation, one per step (each attempt a
// bar, retries and failures marked), one per compensation, one for suspensions and one for events,
// in the order they first appear in the log. Built as SVG elements; every bar and mark is
// focusable and opens the entries it stands for.

import {h, s, dur, time} from './dom.js';

const TERMINAL = new Set(['succeeded', 'failed', 'canceled', 'dead_lettered', 'compensated']);

/**
 * model turns timeline items (seq order) into rows:
 * [{key, label, kind, bars: [{start, end, cls, entries, title}], marks: [{at, cls, entries, title}]}]
 * plus t0 and t1, the first and last times (ms since the epoch).
 */
export function model(items) {
  const rows = new Map();
  const row = (key, label, kind) => {
    if (!rows.has(key)) rows.set(key, {key, label, kind, bars: [], marks: [], open: null});
    return rows.get(key);
  };
  const t = e => Date.parse(e.at);
  let t0 = Infinity, t1 = -Infinity;
  let inv = null, susp = null, currentStep = null;
  for (const e of items) {
    const at = t(e);
    if (isNaN(at)) continue;
    t0 = Math.min(t0, at);
    t1 = Math.max(t1, at);
    const name = e.step_name;
    const d = e.details || {};
    switch (e.event_type) {
      case 'created':
        inv = row('invocation', 'invocation', 'run');
        inv.open = {start: at, cls: 'run', entries: [e], title: 'invocation'};
        break;
      case 'step_started': {
        const r = row(`step:${name}`, name, 'step');
        if (r.open) closeBar(r, at, 'retry');
        r.open = {start: at, cls: 'step', entries: [e], title: `${name}, attempt ${d.attempt ?? 1}`};
        currentStep = r;
        break;
      }
      case 'step_retried':
        if (name) {
          const r = row(`step:${name}`, name, 'step');
          if (r.open) { r.open.entries.push(e); closeBar(r, at, 'retry'); }
          r.marks.push({at, cls: 'retry', entries: [e], title: `${name}: ${retryText(e)}`});
        } else {
          inv = inv || row('invocation', 'invocation', 'run');
          inv.marks.push({at, cls: 'retry', entries: [e], title: retryText(e)});
        }
        break;
      case 'step_completed':
      case 'step_failed': {
        const r = row(`step:${name}`, name, 'step');
        const cls = e.event_type === 'step_completed' ? 'ok' : 'fail';
        if (!r.open) r.open = {start: at, cls, entries: [], title: name};
        r.open.entries.push(e);
        r.open.title = `${name}: ${e.event_type === 'step_completed' ? 'completed' : 'failed'}`;
        closeBar(r, at, cls);
        if (currentStep === r) currentStep = null;
        break;
      }
      case 'compensation_started': {
        // A step's compensation names the step; the workflow's compensation handler names none.
        const r = compRow(row, name);
        r.open = {start: at, cls: 'comp', entries: [e], title: r.label};
        currentStep = r;
        break;
      }
      case 'compensation_completed':
      case 'compensation_failed': {
        const r = compRow(row, name);
        const cls = e.event_type === 'compensation_completed' ? 'comp' : 'fail';
        if (!r.open) r.open = {start: at, cls, entries: [], title: r.label};
        r.open.entries.push(e);
        r.open.title = `${r.label}: ${e.event_type === 'compensation_completed' ? 'completed' : 'failed'}`;
        closeBar(r, at, cls);
        if (currentStep === r) currentStep = null;
        break;
      }
      case 'suspended': {
        susp = row('suspended', 'suspended', 'suspend');
        if (susp.open) closeBar(susp, at, 'susp');
        susp.open = {start: at, cls: 'susp', entries: [e], title: `suspended${e.message ? ': ' + e.message : ''}`};
        currentStep = null;
        break;
      }
      case 'resumed':
        if (susp?.open) {
          susp.open.entries.push(e);
          susp.open.title += ` → resumed (${d.reason || 'resumed'})`;
          closeBar(susp, at, 'susp');
        }
        break;
      case 'signal_received':
      case 'event_emitted':
        row('events', 'events', 'event').marks.push({at, cls: e.event_type === 'event_emitted' ? 'emit' : 'signal', entries: [e],
          title: e.event_type === 'event_emitted' ? `emitted ${d.event_type_id || ''}` : `event received ${d.event_id || ''}`});
        break;
      case 'http_call':
      case 'log': {
        const r = currentStep || inv || row('invocation', 'invocation', 'run');
        r.marks.push({at, cls: e.event_type === 'log' ? 'log' : 'http', entries: [e],
          title: e.event_type === 'log' ? `log: ${e.message || ''}` : `HTTP ${d.method || ''} ${d.host || ''} ${d.status || d.error || ''}`});
        break;
      }
      default: {
        inv = inv || row('invocation', 'invocation', 'run');
        const terminal = TERMINAL.has(e.event_type);
        const cls = e.event_type === 'succeeded' || e.event_type === 'compensated' ? 'ok'
          : terminal ? 'fail' : 'info';
        inv.marks.push({at, cls, entries: [e], title: e.event_type + (e.message ? `: ${e.message}` : '')});
        if (inv.open) {
          inv.open.entries.push(e);
          if (terminal) inv.open.cls = cls === 'ok' ? 'run-ok' : 'run-fail';
        }
      }
    }
  }
  // Bars still open run to the last entry (a running invocation, a step in flight).
  const ended = TERMINAL.has(items[items.length - 1]?.status);
  for (const r of rows.values()) {
    if (r.open) closeBar(r, t1, r.open.cls, !(ended && r.kind === 'run'));
  }
  if (!isFinite(t0)) { t0 = 0; t1 = 0; }
  return {rows: [...rows.values()], t0, t1};
}

/** compRow is the row of a step's compensation (name), or of the workflow's compensation handler (no name). */
function compRow(row, name) {
  return name ? row(`comp:${name}`, `compensate ${name}`, 'compensation') : row('comp:workflow', 'compensation handler', 'compensation');
}

/**
 * retryText describes a step_retried entry (a function's attempt or a workflow step that failed
 * and runs again): "retrying at <time> after <delay> (attempt 1 failed: <error>)". The time is the
 * entry's available_at, else its time plus delay_ms.
 */
export function retryText(e) {
  const d = e.details || {};
  const delay = Number(d.delay_ms) || 0;
  const at = d.available_at ? Date.parse(d.available_at) : Date.parse(e.at) + delay;
  const attempt = d.attempt ?? (d.next_attempt ? d.next_attempt - 1 : null);
  const why = errText(d.error);
  return `retrying at ${isNaN(at) ? '—' : time(new Date(at).toISOString())} after ${dur(delay)}` +
    ` (${attempt ? `attempt ${attempt}` : 'the attempt'} failed${why ? `: ${why}` : ''})`;
}

function closeBar(r, end, cls, open = false) {
  const b = r.open;
  r.open = null;
  r.bars.push({start: b.start, end: Math.max(end, b.start), cls: cls || b.cls, entries: b.entries, title: b.title, open});
}

function errText(err) {
  if (!err) return '';
  if (typeof err === 'string') return err;
  return err.message || err.error_type_id || JSON.stringify(err);
}

const LABEL_W = 200, CHART_W = 780, ROW_H = 28, TOP = 30, PAD = 10;

/** gantt renders the chart of items; onSelect(entries, title) is called when a bar or mark is chosen. */
export function gantt(items, onSelect) {
  const m = model(items);
  const span = Math.max(m.t1 - m.t0, 1);
  const x = at => LABEL_W + PAD + ((at - m.t0) / span) * (CHART_W - 2 * PAD);
  const height = TOP + m.rows.length * ROW_H + 10;
  const width = LABEL_W + CHART_W;
  const svg = s('svg', {class: 'gantt', viewBox: `0 0 ${width} ${height}`, width: '100%', role: 'group',
    'aria-label': `Timeline chart: ${m.rows.length} rows over ${dur(m.t1 - m.t0)}`});
  // Time axis.
  for (let i = 0; i <= 5; i++) {
    const at = m.t0 + (span * i) / 5;
    const xx = x(at);
    svg.append(s('line', {class: 'tick', x1: xx, x2: xx, y1: TOP - 6, y2: height - 6}),
      s('text', {class: 'tick-label', x: xx, y: TOP - 12, 'text-anchor': i === 0 ? 'start' : i === 5 ? 'end' : 'middle'},
        `+${dur(at - m.t0)}`));
  }
  const activate = (el, entries, title) => {
    el.addEventListener('click', () => onSelect(entries, title, el));
    el.addEventListener('keydown', ev => {
      if (ev.key === 'Enter' || ev.key === ' ') { ev.preventDefault(); onSelect(entries, title, el); }
    });
  };
  m.rows.forEach((r, i) => {
    const y = TOP + i * ROW_H;
    const g = s('g', {class: `row row-${r.kind}`, 'data-row': r.key, 'data-kind': r.kind});
    g.append(s('rect', {class: 'row-bg', x: 0, y, width, height: ROW_H}),
      s('text', {class: 'row-label', x: 8, y: y + ROW_H / 2 + 4}, truncate(r.label, 28)));
    for (const b of r.bars) {
      const x1 = x(b.start), w = Math.max(x(b.end) - x1, 4);
      const bar = s('g', {class: `bar bar-${b.cls}${b.open ? ' bar-open' : ''}`, tabindex: 0, role: 'button',
        'aria-label': `${b.title}, ${dur(b.end - b.start)}`},
        s('rect', {x: x1, y: y + 6, width: w, height: ROW_H - 12, rx: 3}),
        s('title', {}, `${b.title} (${dur(b.end - b.start)})`));
      activate(bar, b.entries, b.title);
      g.append(bar);
    }
    for (const mk of r.marks) {
      const cx = x(mk.at), cy = y + ROW_H / 2;
      const mark = s('g', {class: `mark mark-${mk.cls}`, tabindex: 0, role: 'button', 'aria-label': mk.title},
        s('path', {d: `M${cx} ${cy - 6}L${cx + 6} ${cy}L${cx} ${cy + 6}L${cx - 6} ${cy}Z`}),
        s('title', {}, mk.title));
      activate(mark, mk.entries, mk.title);
      g.append(mark);
    }
    svg.append(g);
  });
  const legend = h('ul', {class: 'legend', 'aria-label': 'Legend'},
    [['ok', 'completed'], ['fail', 'failed'], ['retry', 'retried attempt'], ['comp', 'compensation'], ['susp', 'suspended'],
      ['signal', 'event'], ['http', 'HTTP call / log']].map(([c, l]) => h('li', {}, h('span', {class: `swatch sw-${c}`, 'aria-hidden': 'true'}), l)));
  return {el: h('div', {class: 'gantt-wrap'}, svg, legend), model: m};
}

function truncate(t, n) {
  t = String(t);
  return t.length > n ? t.slice(0, n - 1) + '…' : t;
}
