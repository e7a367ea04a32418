// Invocations: the list (filters, paging, live updates) and one invocation (record, control
// actions, and the timeline as a Gantt chart with each step's input and output).

import {api, and, quote, enc, TERMINAL} from './api.js';
import {h, fill, time, dur, num, badge, shortGTS, table, dl, pre, field, select, json} from './dom.js';
import {gantt, retryText} from './gantt.js';
import {dagSection} from './dag.js';

export const STATUSES = ['queued', 'running', 'suspended', 'succeeded', 'failed', 'canceled', 'compensating', 'compensated', 'dead_lettered'];

/** invocationFilter builds the $filter of the list from the form's query parameters. */
export function invocationFilter(q) {
  const ep = (q.get('entrypoint') || '').trim();
  const local = v => v ? new Date(v).toISOString() : '';
  const from = local(q.get('from')), to = local(q.get('to'));
  return and(
    q.get('status') ? `status eq ${quote(q.get('status'))}` : '',
    q.get('correlation') ? `correlation_id eq ${quote(q.get('correlation').trim())}` : '',
    ep ? (ep.endsWith('~') || ep.includes('*') ? `entrypoint_id eq ${quote(ep)}` : `startswith(entrypoint_id, ${quote(ep)})`) : '',
    from ? `created_at ge ${from}` : '',
    to ? `created_at lt ${to}` : '');
}

export async function invocationsPage(ctx) {
  const q = ctx.query;
  const form = h('form', {class: 'filters', 'aria-label': 'Filter invocations'},
    field('Status', select('status', [['', 'any'], ...STATUSES.map(x => [x, x])], q.get('status') || '')),
    field('Entrypoint id (prefix or exact)', h('input', {name: 'entrypoint', value: q.get('entrypoint') || '', size: 40})),
    field('Created from', h('input', {type: 'datetime-local', name: 'from', value: q.get('from') || ''})),
    field('Created before', h('input', {type: 'datetime-local', name: 'to', value: q.get('to') || ''})),
    field('Correlation id', h('input', {name: 'correlation', value: q.get('correlation') || '', size: 20})),
    h('button', {type: 'submit'}, 'Apply'));
  form.addEventListener('submit', ev => {
    ev.preventDefault();
    const p = new URLSearchParams();
    for (const [k, v] of new FormData(form)) if (v) p.set(k, v);
    ctx.navigate('/invocations' + (p.size ? '?' + p : ''));
  });
  const live = h('input', {type: 'checkbox', id: 'live', checked: !q.get('cursor')});
  const out = h('div', {id: 'invocation-list', 'aria-live': 'polite', 'aria-busy': 'true'});
  fill(ctx.main, h('h1', {tabindex: -1}, 'Invocations'), form,
    h('p', {class: 'live'}, live, h('label', {for: 'live'}, ' Live (refresh every 3 s)')), out);
  const filter = invocationFilter(q);
  const load = async () => {
    const page = await api('GET', '/invocations', {signal: ctx.signal, query: {$filter: filter, limit: 25, cursor: q.get('cursor')}});
    if (!ctx.live()) return;
    fill(out, 
      table('Invocations, newest first', [
        {label: 'Invocation', cell: r => h('a', {href: `/console/invocations/${enc(r.invocation_id)}`, class: 'mono'}, r.invocation_id)},
        {label: 'Entrypoint', cell: r => h('span', {title: r.entrypoint_id, class: 'mono'}, shortGTS(r.entrypoint_id))},
        {label: 'Status', cell: r => badge(r.status)},
        {label: 'Mode', cell: r => r.mode},
        {label: 'Created', cell: r => time(r.timestamps?.created_at)},
        {label: 'Wall time', cell: r => h('span', {title: 'From the start of its first attempt to its end (or now), waits and retries included'}, dur(runtime(r)))},
        {label: 'Cost', cell: r => num(r.cost, 6)},
      ], page.items, 'No invocations match.'),
      pager(ctx, page.page_info, '/invocations'));
    out.setAttribute('aria-busy', 'false');
  };
  await load();
  ctx.every(3000, async () => { if (live.checked) await load(); });
}

/** runtime is an invocation's wall time so far (or in total), in ms. */
function runtime(r) {
  const t = r.timestamps || {};
  if (!t.started_at) return null;
  return (t.finished_at ? Date.parse(t.finished_at) : Date.now()) - Date.parse(t.started_at);
}

/** pager renders previous/next links for a list page. */
export function pager(ctx, info, path) {
  const link = (cursor, label, rel) => {
    const p = new URLSearchParams(ctx.query);
    p.set('cursor', cursor);
    return h('a', {href: `/console${path}?${p}`, rel, class: 'button'}, label);
  };
  return h('nav', {class: 'pager', 'aria-label': 'Pages'},
    info?.prev_cursor ? link(info.prev_cursor, '← Previous', 'prev') : null,
    info?.next_cursor ? link(info.next_cursor, 'Next →', 'next') : null);
}

/** invLink links to an invocation's page. */
function invLink(id) {
  return h('a', {href: `/console/invocations/${enc(id)}`, class: 'mono'}, id);
}

/** message is what an entry says: its message, or for a retry when and why it runs again. */
function message(e) {
  return e.message || (e.event_type === 'step_retried' ? retryText(e) : '');
}

/** cap capitalizes a sentence. */
function cap(t) {
  return t.charAt(0).toUpperCase() + t.slice(1);
}

/**
 * pendingRetry answers the step_retried entry an invocation still waits on (nothing has started
 * since), or null.
 */
export function pendingRetry(r, items) {
  if (TERMINAL.has(r.status)) return null;
  for (let i = items.length - 1; i >= 0; i--) {
    const t = items[i].event_type;
    if (t === 'step_retried') return items[i];
    if (t === 'started' || t === 'step_started' || t === 'resumed' || TERMINAL.has(t)) return null;
  }
  return null;
}

/**
 * errorBox shows an error whole: its message wrapped in full, its backtrace, then the whole
 * document, scrollable. compact (in a table) folds the backtrace and document under the message.
 */
export function errorBox(err, compact = false) {
  const msg = typeof err === 'string' ? err : err?.message;
  const trace = err?.details?.backtrace;
  const more = [
    typeof trace === 'string' ? h('pre', {class: 'json error', tabindex: 0, 'aria-label': 'Backtrace'}, trace) : null,
    h('pre', {class: 'json error', tabindex: 0, 'aria-label': 'Error'}, json(err))];
  return h('div', {class: 'error-box'},
    msg ? h('p', {class: 'msg error'}, msg) : null,
    compact && msg ? h('details', {class: 'error-doc'}, h('summary', {}, 'Error document'), more) : more);
}

const ACTIONS = [
  ['cancel', s => ['queued', 'running', 'suspended'].includes(s), 'Cancel'],
  ['retry', s => ['failed', 'dead_lettered'].includes(s), 'Retry'],
  ['replay', s => ['succeeded', 'failed', 'dead_lettered'].includes(s), 'Replay'],
  ['suspend', (s, wf) => wf && s === 'running', 'Suspend'],
  ['resume', (s, wf) => wf && s === 'suspended', 'Resume'],
];

/** Timeline keeps a growing timeline: pages fetched once, the last one fetched again to follow a live invocation. */
class Timeline {
  constructor(id, signal) { this.id = id; this.signal = signal; this.pages = []; }
  async refresh() {
    let cursor = this.pages.length ? this.pages[this.pages.length - 1].cursor : null;
    if (this.pages.length) this.pages.pop();
    while (this.pages.length < MAX_PAGES) {
      const page = await api('GET', `/invocations/${enc(this.id)}/timeline`, {signal: this.signal, query: {limit: 200, cursor}});
      this.pages.push({cursor, items: page.items});
      this.status = page.status;
      this.more = !!(page.page_info?.has_more && page.page_info.next_cursor);
      if (!this.more) break;
      cursor = page.page_info.next_cursor;
    }
    this.truncated = this.pages.length >= MAX_PAGES && this.more;
    return this.pages.flatMap(p => p.items);
  }
}

// The chart shows at most MAX_PAGES pages of 200 entries (keeping a page light); the entries past
// them stay readable through the API.
const MAX_PAGES = 10;

export async function invocationPage(ctx) {
  const id = ctx.params[0];
  const head = h('div', {id: 'inv-head'});
  const controls = h('div', {class: 'actions', role: 'group', 'aria-label': 'Control actions'});
  const record = h('section', {'aria-labelledby': 'rec-h'});
  const dag = h('section', {id: 'dag', 'aria-labelledby': 'dag-h', hidden: true});
  const chart = h('div', {id: 'gantt'});
  const detail = h('section', {id: 'entry-detail', class: 'panel', 'aria-live': 'polite', tabindex: -1, hidden: true});
  const steps = h('div', {id: 'steps'});
  const entries = h('div', {id: 'entries'});
  fill(ctx.main, head, controls, record, dag,
    h('section', {'aria-labelledby': 'tl-h'}, h('h2', {id: 'tl-h'}, 'Timeline'), chart, detail),
    h('section', {'aria-labelledby': 'steps-h'}, h('h2', {id: 'steps-h'}, 'Steps'), steps),
    h('details', {}, h('summary', {}, 'All timeline entries'), entries));

  // showEntries opens the entries a chart element or button (opener) stands for; Close returns the focus to it.
  const showEntries = (list, title, opener) => {
    detail.hidden = false;
    fill(detail, h('h3', {}, title),
      list.map(e => {
        const d = e.details || {};
        const parts = [h('p', {class: 'entry-head'}, `#${e.seq} · ${e.event_type} · ${time(e.at)} · status ${e.status}`)];
        if (message(e)) parts.push(h('p', {}, message(e)));
        if (d.child_invocation_id) parts.push(h('p', {}, 'Child invocation ', invLink(d.child_invocation_id)));
        if (d.handler_invocation_id) parts.push(h('p', {}, 'Compensation handler invocation ', invLink(d.handler_invocation_id)));
        if (d.input !== undefined) parts.push(h('h4', {}, 'Input'), pre(d.input, 'Step input'));
        if (d.result !== undefined) parts.push(h('h4', {}, 'Output'), pre(d.result, 'Step output'));
        if (d.error !== undefined) parts.push(h('h4', {}, 'Error'), errorBox(d.error));
        const rest = Object.fromEntries(Object.entries(d).filter(([k]) => !['input', 'result', 'error'].includes(k)));
        if (Object.keys(rest).length) parts.push(h('h4', {}, 'Details'), pre(rest, 'Entry details'));
        return h('article', {class: 'entry', 'data-seq': e.seq}, parts);
      }),
      h('button', {type: 'button', onclick: () => { detail.hidden = true; if (opener?.isConnected) opener.focus(); }}, 'Close'));
    detail.focus();
  };

  const tl = new Timeline(id, ctx.signal);
  let rec = null, wf = false, settled = 0, shown = '', dagShown = '';
  const load = async () => {
    const [r, items] = await Promise.all([api('GET', `/invocations/${enc(id)}`, {signal: ctx.signal}), tl.refresh()]);
    // A DAG run (its record has a dag member) also shows its tasks, re-drawn when one changes.
    const tasks = r.dag ? (await api('GET', `/invocations/${enc(id)}/tasks`, {signal: ctx.signal})).items : null;
    if (!ctx.live()) return;
    rec = r;
    const dagKey = tasks ? JSON.stringify([r.dag, tasks.map(t => [t.state, t.attempts, t.invocation_id, t.gating_decision])]) : '';
    if (dagKey !== dagShown) {
      dagShown = dagKey;
      dag.hidden = !tasks;
      fill(dag, tasks ? dagSection(r, tasks) : null);
    }
    // Re-render only on a change, so that polling never takes the keyboard focus away.
    const key = `${r.status}:${r.attempt}:${items.length}:${items[items.length - 1]?.seq}`;
    if (key === shown) return;
    shown = key;
    wf = r.entrypoint_id.includes('~x.core.serverless.workflow.v1~');
    const focused = document.activeElement?.dataset?.action;
    fill(head, 
      h('h1', {tabindex: -1}, 'Invocation ', h('span', {class: 'mono'}, r.invocation_id), ' ', badge(r.status)),
      h('p', {}, r.dag ? 'DAG run of ' : wf ? 'Workflow ' : 'Function ',
        h('a', {href: `/console/entrypoints/${enc(r.entrypoint_id)}`, class: 'mono', title: r.entrypoint_id}, shortGTS(r.entrypoint_id)),
        ` v${r.entrypoint_version || '?'}`),
      pendingRetry(r, items) ? h('p', {id: 'retry-note', class: 'msg'}, cap(retryText(pendingRetry(r, items)))) : null);
    fill(controls, ACTIONS.map(([action, ok, label]) =>
      h('button', {type: 'button', 'data-action': action, disabled: !ok(r.status, wf), onclick: () => control(action)}, label)));
    if (focused) (controls.querySelector(`[data-action="${focused}"]:not([disabled])`) || controls.querySelector('button:not([disabled])'))?.focus();
    const t = r.timestamps || {};
    const m = r.observability?.metrics || {};
    fill(record, h('h2', {id: 'rec-h'}, 'Record'),
      dl([
        ['Mode', r.mode], ['Attempt', r.attempt], ['Created', time(t.created_at)], ['Started', time(t.started_at)],
        ['Suspended', t.suspended_at ? time(t.suspended_at) : null], ['Finished', time(t.finished_at)],
        ['Wall time (start to end)', dur(runtime(r))],
        ['Execution time (last attempt)', dur(m.duration_ms)], ['CPU time (last attempt)', dur(m.cpu_time_ms)],
        ['Interpreter steps (last attempt)', m.step_count ?? '—'],
        ['Cost', num(r.cost, 8)], ['Correlation id', r.observability?.correlation_id],
        r.parent_invocation_id ? ['Parent', h('a', {href: `/console/invocations/${enc(r.parent_invocation_id)}`}, r.parent_invocation_id)] : null,
        r.replay_of ? ['Replay of', h('a', {href: `/console/invocations/${enc(r.replay_of)}`}, r.replay_of)] : null,
      ]),
      h('div', {class: 'cols'},
        h('div', {}, h('h3', {}, 'Params'), pre(r.params, 'Params')),
        r.result !== null && r.result !== undefined ? h('div', {}, h('h3', {}, 'Result'), pre(r.result, 'Result')) : null,
        r.error ? h('div', {class: 'wide'}, h('h3', {}, 'Error'), errorBox(r.error)) : null));
    const g = gantt(items, showEntries);
    fill(chart, g.el, tl.truncated
      ? h('p', {class: 'msg'}, `Showing the first ${items.length} entries; the timeline has more (GET /invocations/${id}/timeline pages through all of them).`)
      : null);
    const stepRows = g.model.rows.filter(x => x.kind === 'step' || x.kind === 'compensation');
    fill(steps, stepRows.length ? h('ol', {class: 'steps'}, stepRows.map(x => {
      const all = x.bars.flatMap(b => b.entries);
      const last = x.bars[x.bars.length - 1];
      return h('li', {'data-step': x.key},
        h('span', {class: `swatch sw-${last?.cls || 'info'}`, 'aria-hidden': 'true'}), ' ',
        h('strong', {}, x.label), ` — ${x.bars.length} attempt${x.bars.length === 1 ? '' : 's'}, ${last?.title || ''} `,
        h('button', {type: 'button', class: 'small', onclick: ev => showEntries(all, x.label, ev.currentTarget)}, 'Input and output'));
    })) : h('p', {class: 'muted'}, 'No steps.'));
    fill(entries, table('Timeline entries', [
      {label: '#', cell: e => e.seq}, {label: 'At', cell: e => time(e.at)}, {label: 'Event', cell: e => e.event_type},
      {label: 'Step', cell: e => e.step_name || ''}, {label: 'Status', cell: e => e.status}, {label: 'Message', cell: e => message(e)},
      {label: '', cell: e => h('button', {type: 'button', class: 'small', onclick: ev => showEntries([e], `Entry #${e.seq}`, ev.currentTarget)}, 'View')},
    ], items));
  };
  const control = async action => {
    if (action === 'cancel' && !confirm(`Cancel invocation ${id}?`)) return;
    try {
      const res = await api('POST', `/invocations/${enc(id)}:control`, {body: {action}});
      if (action === 'replay' && res?.invocation_id) {
        ctx.navigate(`/invocations/${enc(res.invocation_id)}`);
        ctx.flash(`Replaying as ${res.invocation_id}.`);
        return;
      }
      ctx.flash(`${action}: done.`);
      settled = 0;
      await load();
    } catch (e) {
      ctx.flash(`${action} failed: ${e.message}`, 'error');
    }
  };
  await load();
  // Follow the invocation until it has settled (a failure may still compensate or dead-letter).
  ctx.every(2000, async () => {
    if (rec && TERMINAL.has(rec.status) && ++settled > 5) return;
    await load();
  });
}
