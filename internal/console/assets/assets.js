// Assets (docs/dag.md "Assets"): the tenant's assets with their health, one asset's
// materializations (filtered by state and partition), their data, and the approve / reject
// decision on a quarantined one, with a reason.
//
// The page is /console/assets, and /console/assets?asset=<key> for one asset: a path below
// /console/assets/ is where the console's own files are served.

import {api, enc} from './api.js';
import {h, fill, time, num, badge, table, dl, pre, field, select} from './dom.js';
import {pager} from './invocations.js';
import {checksText} from './dag.js';

const STATES = ['staged', 'committed', 'promoted', 'quarantined', 'rejected'];

/** assetPath is the API path of an asset (its key, with its dots, is one path segment). */
const assetPath = key => `/assets/${enc(key)}`;

/** assetLink links to an asset's page, with extra query parameters. */
export function assetLink(key, extra = {}, label = key) {
  const p = new URLSearchParams({asset: key, ...extra});
  return h('a', {href: `/console/assets?${p}`, 'data-asset': key}, label);
}

export async function assetsPage(ctx) {
  if (ctx.query.get('asset')) return assetPage(ctx, ctx.query.get('asset'));
  const page = await api('GET', '/assets', {signal: ctx.signal, query: {limit: 50, cursor: ctx.query.get('cursor')}});
  if (!ctx.live()) return;
  fill(ctx.main, h('h1', {tabindex: -1}, 'Assets'),
    h('p', {class: 'muted'}, 'What the tasks of DAG runs materialize, with each asset\'s health. A quarantined output waits for approval on its asset\'s page.'),
    h('div', {id: 'asset-list'}, table('Assets by key', [
      {label: 'Asset', cell: a => assetLink(a.asset_key)},
      {label: 'Latest', cell: a => a.latest_materialization_id
        ? [h('span', {class: 'mono'}, a.latest_materialization_id), h('br', {}), `${a.latest_partition_key || '(unpartitioned)'} · ${time(a.latest_at)}`]
        : h('span', {class: 'muted'}, 'none promoted yet')},
      {label: 'Consecutive failures', cell: a => h('span', {class: a.consecutive_failures ? 'bad' : ''}, num(a.consecutive_failures, 0))},
      {label: 'Last success', cell: a => time(a.last_success_at)},
      {label: 'Last failure', cell: a => time(a.last_failure_at)},
      {label: 'Last checks', cell: a => a.last_check_passed === undefined || a.last_check_passed === null ? '—' : a.last_check_passed ? 'passed' : h('span', {class: 'bad'}, 'failed')},
      {label: 'Last gating', cell: a => gating(a.last_gating_decision)},
      {label: '', cell: a => assetLink(a.asset_key, {state: 'quarantined'}, 'Quarantined')},
    ], page.items, 'No assets yet: a DAG task with an asset_key makes one when it first runs.')),
    pager(ctx, page.page_info, '/assets'));
}

/** gating shows a gating decision, flagged unless it is allow. */
function gating(d) {
  if (!d) return '—';
  return d === 'allow' ? d : h('span', {class: `gate gate-${d.replace(/[^a-z_]/g, '')}`}, d);
}

async function assetPage(ctx, key) {
  const q = ctx.query;
  const form = h('form', {class: 'filters', 'aria-label': 'Filter materializations'},
    field('State', select('state', [['', 'any'], ...STATES.map(x => [x, x])], q.get('state') || '')),
    field('Partition', h('input', {name: 'partition_key', value: q.get('partition_key') || '', placeholder: '2026-03-01'})),
    h('button', {type: 'submit'}, 'Apply'));
  form.addEventListener('submit', ev => {
    ev.preventDefault();
    const p = {};
    for (const [k, v] of new FormData(form)) if (v) p[k] = v;
    ctx.navigate(`/assets?${new URLSearchParams({asset: key, ...p})}`);
  });
  const health = h('div', {id: 'asset-health'});
  const list = h('div', {id: 'materializations', 'aria-live': 'polite'});
  const panel = h('section', {id: 'mat-panel', class: 'panel', tabindex: -1, hidden: true, 'aria-live': 'polite'});
  fill(ctx.main, h('h1', {tabindex: -1}, 'Asset ', h('span', {class: 'mono'}, key)),
    h('p', {}, h('a', {href: '/console/assets'}, '← All assets')), health,
    h('h2', {}, 'Materializations'), form, panel, list);

  const load = async () => {
    const [a, mats] = await Promise.all([
      api('GET', assetPath(key), {signal: ctx.signal}),
      api('GET', `${assetPath(key)}/materializations`, {signal: ctx.signal,
        query: {state: q.get('state'), partition_key: q.get('partition_key'), limit: 50, cursor: q.get('cursor')}}),
    ]);
    if (!ctx.live()) return;
    fill(health, dl([
      ['Latest', a.latest_materialization_id ? h('span', {class: 'mono'}, a.latest_materialization_id) : 'none promoted yet'],
      ['Latest partition', a.latest_partition_key], ['Latest at', time(a.latest_at)],
      ['Consecutive failures', num(a.consecutive_failures, 0)],
      ['Last success', time(a.last_success_at)], ['Last failure', time(a.last_failure_at)],
      ['Last checks', a.last_check_passed === undefined || a.last_check_passed === null ? '—' : a.last_check_passed ? 'passed' : 'failed'],
      ['Last gating decision', gating(a.last_gating_decision)], ['Updated', time(a.updated_at)],
    ]));
    fill(list, matTable(mats.items, {decide, data}), pager(ctx, mats.page_info, `/assets`));
  };

  // decide opens the form that asks for the reason of an approval or a rejection, then posts it.
  const decide = (m, action, opener) => {
    const reason = h('input', {name: 'reason', size: 60, maxlength: 1024, id: 'decision-reason'});
    const [verb, done] = action === 'approve' ? ['Approve', 'Approved'] : ['Reject', 'Rejected'];
    const out = h('div', {id: 'decision-result'});
    const f = h('form', {id: 'decision-form', 'data-action': action},
      h('h3', {}, `${verb} ${m.materialization_id}`),
      h('p', {class: 'muted'}, action === 'approve'
        ? `It becomes the latest of partition ${m.partition_key || '(unpartitioned)'}; runs from now on read it downstream.`
        : 'It is discarded for good, with its data.'),
      field('Reason (recorded in the audit log)', reason),
      h('div', {class: 'actions'},
        h('button', {type: 'submit', class: 'primary'}, verb),
        h('button', {type: 'button', onclick: () => { panel.hidden = true; if (opener?.isConnected) opener.focus(); }}, 'Cancel')),
      out);
    f.addEventListener('submit', async ev => {
      ev.preventDefault();
      try {
        const r = await api('POST', `${assetPath(key)}/materializations/${enc(m.materialization_id)}:${action}`, {body: {reason: reason.value}});
        fill(out, h('p', {class: 'msg', role: 'status'}, `${r.materialization_id} is now `, badge(r.state),
          ` (decided by ${r.decided_by || '?'} at ${time(r.decided_at)}${r.reason ? `: ${r.reason}` : ''}).`));
        f.querySelector('button[type="submit"]').disabled = true;
        ctx.flash(`${done} ${r.materialization_id}: it is ${r.state}.`);
        await load();
      } catch (e) {
        fill(out, h('p', {class: 'msg error', role: 'alert'}, `${verb} failed: ${e.message}`));
      }
    });
    panel.hidden = false;
    fill(panel, f);
    reason.focus();
  };
  // data shows a materialization's output.
  const data = async (m, opener) => {
    panel.hidden = false;
    try {
      const d = await api('GET', `${assetPath(key)}/materializations/${enc(m.materialization_id)}/data`, {signal: ctx.signal});
      fill(panel, h('h3', {}, `Data of ${m.materialization_id}`), pre(d, 'Materialization data'));
    } catch (e) {
      fill(panel, h('h3', {}, `Data of ${m.materialization_id}`), h('p', {class: 'msg error'}, e.message));
    }
    panel.append(h('button', {type: 'button', onclick: () => { panel.hidden = true; if (opener?.isConnected) opener.focus(); }}, 'Close'));
    panel.focus();
  };
  await load();
}

/** matTable lists materializations, with Approve and Reject on the quarantined ones. */
function matTable(items, {decide, data}) {
  return table('Materializations, newest first', [
    {label: 'Materialization', cell: m => h('span', {class: 'mono', 'data-mat': m.materialization_id}, m.materialization_id)},
    {label: 'Partition', cell: m => m.partition_key || '(unpartitioned)'},
    {label: 'State', cell: m => h('span', {class: 'mat-state'}, badge(m.state))},
    {label: 'Gating', cell: m => gating(m.gating_decision)},
    {label: 'Checks', cell: m => h('span', {title: (m.checks || []).map(c => `${c.name}: ${c.passed ? 'passed' : c.skipped ? 'skipped' : c.message || 'failed'}`).join('\n')}, checksText(m.checks))},
    {label: 'Rows', cell: m => num(m.row_count, 0)},
    {label: 'Run', cell: m => [h('a', {href: `/console/invocations/${enc(m.run_id)}`, class: 'mono'}, m.run_id), ` · ${m.task_id}`]},
    {label: 'Created', cell: m => time(m.created_at)},
    {label: 'Decision', cell: m => m.decided_by ? `${m.decided_by}, ${time(m.decided_at)}${m.reason ? `: ${m.reason}` : ''}` : '—'},
    {label: 'Actions', cell: m => h('div', {class: 'actions tight', role: 'group', 'aria-label': `Actions on ${m.materialization_id}`},
      m.state === 'quarantined' ? [
        h('button', {type: 'button', class: 'small', 'data-action': 'approve', 'data-mat': m.materialization_id, onclick: ev => decide(m, 'approve', ev.currentTarget)}, 'Approve'),
        h('button', {type: 'button', class: 'small', 'data-action': 'reject', 'data-mat': m.materialization_id, onclick: ev => decide(m, 'reject', ev.currentTarget)}, 'Reject'),
      ] : null,
      m.state !== 'rejected' ? h('button', {type: 'button', class: 'small', 'data-action': 'data', 'data-mat': m.materialization_id, onclick: ev => data(m, ev.currentTarget)}, 'Data') : null)},
  ], items, 'No materializations match.');
}
