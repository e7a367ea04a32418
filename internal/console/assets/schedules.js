// Schedules (list, one schedule with its next runs and history, pause/resume/trigger) and
// backfills (list, one backfill with its progress and partitions, pause/resume/cancel/retry).

import {api, and, quote, enc} from './api.js';
import {h, fill, time, dur, badge, shortGTS, table, dl, pre, field, select} from './dom.js';
import {pager} from './invocations.js';

export async function schedulesPage(ctx) {
  const q = ctx.query;
  const form = h('form', {class: 'filters', 'aria-label': 'Filter schedules'},
    field('Status', select('status', [['', 'any'], ['active', 'active'], ['paused', 'paused'], ['disabled', 'disabled']], q.get('status') || '')),
    h('button', {type: 'submit'}, 'Apply'));
  form.addEventListener('submit', ev => {
    ev.preventDefault();
    const st = new FormData(form).get('status');
    ctx.navigate('/schedules' + (st ? `?status=${enc(st)}` : ''));
  });
  const page = await api('GET', '/schedules', {signal: ctx.signal, query: {
    $filter: q.get('status') ? `status eq ${quote(q.get('status'))}` : '', $orderby: 'next_run_at asc', limit: 50, cursor: q.get('cursor')}});
  fill(ctx.main, h('h1', {tabindex: -1}, 'Schedules'), form,
    table('Schedules by next run', [
      {label: 'Schedule', cell: r => h('a', {href: `/console/schedules/${enc(r.schedule_id)}`}, r.name || r.schedule_id)},
      {label: 'Entrypoint', cell: r => h('span', {class: 'mono', title: r.entrypoint_id}, shortGTS(r.entrypoint_id))},
      {label: 'Expression', cell: r => `${r.expression?.kind} ${r.expression?.value} (${r.timezone})`},
      {label: 'Status', cell: r => badge(r.status)},
      {label: 'Next run', cell: r => time(r.next_run_at)},
      {label: 'Last run', cell: r => time(r.last_run_at)},
    ], page.items, 'No schedules.'),
    pager(ctx, page.page_info, '/schedules'));
}

export async function schedulePage(ctx) {
  const id = ctx.params[0];
  const sched = h('div', {id: 'schedule'});
  const hist = h('div', {id: 'history'});
  fill(ctx.main, sched, hist);
  const act = async (action, body) => {
    try {
      const r = await api('POST', `/schedules/${enc(id)}:${action}`, {body});
      ctx.flash(action === 'trigger' ? `Triggered: invocation ${r.invocation?.invocation_id || r.run_id}.` : `${action}: done.`);
      await load();
      sched.querySelector(`[data-action]`)?.focus();
    } catch (e) {
      ctx.flash(`${action} failed: ${e.message}`, 'error');
    }
  };
  const load = async () => {
    const [s, runs] = await Promise.all([
      api('GET', `/schedules/${enc(id)}`, {signal: ctx.signal}),
      api('GET', `/schedules/${enc(id)}/history`, {signal: ctx.signal, query: {limit: 25, next_runs: 5, cursor: ctx.query.get('cursor')}}),
    ]);
    if (!ctx.live()) return;
    fill(sched, 
      h('h1', {tabindex: -1}, s.name || s.schedule_id, ' ', h('span', {id: 'schedule-status'}, badge(s.status))),
      h('div', {class: 'actions', role: 'group', 'aria-label': 'Schedule actions'},
        s.status === 'active'
          ? h('button', {type: 'button', 'data-action': 'pause', onclick: () => act('pause')}, 'Pause')
          : h('button', {type: 'button', 'data-action': 'resume', onclick: () => act('resume', {})}, 'Resume'),
        h('button', {type: 'button', 'data-action': 'trigger', onclick: () => act('trigger', {})}, 'Trigger now'),
        h('a', {class: 'button', href: `/console/backfills?schedule=${enc(s.schedule_id)}`}, 'Backfills')),
      dl([
        ['Entrypoint', h('a', {href: `/console/entrypoints/${enc(s.entrypoint_id)}`, class: 'mono'}, shortGTS(s.entrypoint_id))],
        ['Expression', `${s.expression?.kind} ${s.expression?.value}`], ['Time zone', s.timezone],
        ['Missed instants', `${s.missed_policy} (up to ${s.max_catch_up_runs})`], ['Overlap', s.concurrency_policy],
        ['Runs as', s.execution_context], ['Next run', time(s.next_run_at)], ['Last run', time(s.last_run_at)],
        s.paused_at ? ['Paused at', time(s.paused_at)] : null, ['Created by', s.created_by],
      ]),
      h('details', {}, h('summary', {}, 'Input overrides'), pre(s.input_overrides, 'Input overrides')));
    fill(hist, 
      h('h2', {}, 'Next runs'),
      (runs.next_runs || []).length
        ? h('ol', {class: 'next-runs'}, runs.next_runs.map(n => h('li', {}, time(n.scheduled_at))))
        : h('p', {class: 'muted'}, s.status === 'active' ? 'No instant to come.' : 'None while the schedule is not active.'),
      h('h2', {}, 'History'),
      table('Runs, newest first', [
        {label: 'Instant', cell: r => time(r.scheduled_at)},
        {label: 'Kind', cell: r => r.kind},
        {label: 'Status', cell: r => badge(r.status)},
        {label: 'Invocation', cell: r => r.invocation_id ? h('a', {href: `/console/invocations/${enc(r.invocation_id)}`, class: 'mono'}, r.invocation_id) : (r.skip_reason || '')},
        {label: 'Duration', cell: r => dur(r.duration_ms)},
      ], runs.items, 'No runs yet.'),
      pager(ctx, runs.page_info, `/schedules/${enc(id)}`));
  };
  await load();
}

export async function backfillsPage(ctx) {
  const q = ctx.query;
  const filter = and(q.get('schedule') ? `schedule_id eq ${quote(q.get('schedule'))}` : '',
    q.get('state') ? `state eq ${quote(q.get('state'))}` : '');
  const form = h('form', {class: 'filters', 'aria-label': 'Filter backfills'},
    field('State', select('state', [['', 'any'], ...['running', 'paused', 'succeeded', 'failed', 'canceled'].map(x => [x, x])], q.get('state') || '')),
    field('Schedule id', h('input', {name: 'schedule', value: q.get('schedule') || ''})),
    h('button', {type: 'submit'}, 'Apply'));
  form.addEventListener('submit', ev => {
    ev.preventDefault();
    const p = new URLSearchParams();
    for (const [k, v] of new FormData(form)) if (v) p.set(k, v);
    ctx.navigate('/backfills' + (p.size ? '?' + p : ''));
  });
  const out = h('div', {id: 'backfill-list'});
  fill(ctx.main, h('h1', {tabindex: -1}, 'Backfills'), form, out);
  const load = async () => {
    const page = await api('GET', '/backfills', {signal: ctx.signal, query: {$filter: filter, $orderby: 'created_at desc', limit: 50, cursor: q.get('cursor')}});
    if (!ctx.live()) return;
    fill(out, table('Backfills, newest first', [
      {label: 'Backfill', cell: b => h('a', {href: `/console/backfills/${enc(b.backfill_id)}`}, b.backfill_id)},
      {label: 'Of', cell: b => b.schedule_id || shortGTS(b.entrypoint_id)},
      {label: 'State', cell: b => badge(b.state)},
      {label: 'Progress', cell: b => progress(b.progress)},
      {label: 'Created', cell: b => time(b.created_at)},
    ], page.items, 'No backfills.'), pager(ctx, page.page_info, '/backfills'));
  };
  await load();
  ctx.every(3000, load);
}

/** progress renders a backfill's progress as a <progress> with its counts. */
function progress(p) {
  if (!p) return '—';
  const done = p.completed + p.failed + p.skipped;
  return h('span', {class: 'progress'},
    h('progress', {max: p.total || 1, value: done, 'aria-label': `${done} of ${p.total} partitions done`}),
    ` ${done}/${p.total}`, p.failed ? h('span', {class: 'bad'}, ` · ${p.failed} failed`) : null,
    p.running ? ` · ${p.running} running` : null);
}

const BF_ACTIONS = [
  ['pause', ['running'], 'Pause'], ['resume', ['paused'], 'Resume'],
  ['cancel', ['running', 'paused'], 'Cancel'], ['retry', ['failed'], 'Retry failed partitions'],
];

export async function backfillPage(ctx) {
  const id = ctx.params[0];
  const out = h('div', {id: 'backfill'});
  fill(ctx.main, out);
  let shown = '';
  const act = async action => {
    try {
      await api('POST', `/backfills/${enc(id)}:${action}`, {body: {}});
      ctx.flash(`${action}: done.`);
      shown = '';
      await load();
    } catch (e) {
      ctx.flash(`${action} failed: ${e.message}`, 'error');
    }
  };
  const load = async () => {
    const [b, parts] = await Promise.all([
      api('GET', `/backfills/${enc(id)}`, {signal: ctx.signal}),
      api('GET', `/backfills/${enc(id)}/partitions`, {signal: ctx.signal, query: {limit: 100, cursor: ctx.query.get('cursor')}}),
    ]);
    if (!ctx.live()) return;
    const key = JSON.stringify([b.state, b.progress, parts.items.map(p => p.status)]);
    if (key === shown) return;
    shown = key;
    fill(out, 
      h('h1', {tabindex: -1}, 'Backfill ', b.backfill_id, ' ', badge(b.state)),
      h('div', {class: 'actions', role: 'group', 'aria-label': 'Backfill actions'},
        BF_ACTIONS.filter(([, from]) => from.includes(b.state)).map(([a, , l]) => h('button', {type: 'button', 'data-action': a, onclick: () => act(a)}, l))),
      h('p', {}, progress(b.progress)),
      dl([
        ['Of', b.schedule_id ? h('a', {href: `/console/schedules/${enc(b.schedule_id)}`}, b.schedule_id) : h('span', {class: 'mono'}, shortGTS(b.entrypoint_id))],
        ['Chunks', b.chunks ? `${b.chunks.completed}/${b.chunks.total} done, ${b.chunks.in_flight} in flight` : null],
        ['Failure', b.failure_reason], ['Created', time(b.created_at)], ['Started', time(b.started_at)], ['Completed', time(b.completed_at)],
      ]),
      h('details', {}, h('summary', {}, 'Configuration'), pre(b.config, 'Configuration')),
      h('h2', {}, 'Partitions'),
      table('Partitions in instant order', [
        {label: '#', cell: p => p.seq}, {label: 'Instant', cell: p => time(p.scheduled_at)}, {label: 'Chunk', cell: p => p.chunk},
        {label: 'Status', cell: p => badge(p.status)}, {label: 'Attempts', cell: p => p.attempts},
        {label: 'Invocation', cell: p => p.invocation_id ? h('a', {href: `/console/invocations/${enc(p.invocation_id)}`, class: 'mono'}, p.invocation_id) : '—'},
      ], parts.items), pager(ctx, parts.page_info, `/backfills/${enc(id)}`));
  };
  await load();
  ctx.every(3000, load);
}
