// One event trigger: its definition, enable/disable, and its dead letters (the invocations it
// started that failed for good, and the events it could not start one for), each redriven alone
// or all at once (the oldest 100 per call), or purged.

import {api, enc} from './api.js';
import {h, fill, time, badge, shortGTS, table, dl, pre} from './dom.js';
import {pager, errorBox} from './invocations.js';

export async function triggerPage(ctx) {
  const id = ctx.params[0];
  const out = h('div', {id: 'trigger'});
  fill(ctx.main, out);
  const act = async (what, method, path, confirmText) => {
    if (confirmText && !confirm(confirmText)) return;
    try {
      const res = await api(method, path, {body: method === 'POST' ? {} : undefined});
      const n = res?.redriven?.length;
      ctx.flash(what === 'redrive' ? `Redriven: ${n} dead letter${n === 1 ? '' : 's'}${n === 1 ? ` as ${res.redriven[0].redriven_as}` : ''}.`
        : what === 'purge' ? `Purged ${res?.purged ?? 0} dead letters.` : `${what}: done.`);
      await load();
    } catch (e) {
      ctx.flash(`${what} failed: ${e.message}`, 'error');
    }
  };
  const base = `/triggers/${enc(id)}`;
  const load = async () => {
    const [t, dls] = await Promise.all([
      api('GET', base, {signal: ctx.signal}),
      api('GET', `${base}/dead-letters`, {signal: ctx.signal, query: {limit: 50, cursor: ctx.query.get('cursor')}}),
    ]);
    if (!ctx.live()) return;
    const toggle = t.status === 'disabled' ? 'enable' : 'disable';
    fill(out,
      h('h1', {tabindex: -1}, 'Trigger ', h('span', {class: 'mono'}, t.trigger_id), ' ', badge(t.status)),
      h('div', {class: 'actions', role: 'group', 'aria-label': 'Trigger actions'},
        h('button', {type: 'button', 'data-action': toggle, onclick: () => act(toggle, 'POST', `${base}:${toggle}`)}, toggle === 'enable' ? 'Enable' : 'Disable')),
      dl([
        ['Event type', h('a', {href: `/console/event-types/${enc(t.event_type_id)}`, class: 'mono', title: t.event_type_id}, shortGTS(t.event_type_id))],
        ['Entrypoint', h('a', {href: `/console/entrypoints/${enc(t.entrypoint_id)}`, class: 'mono', title: t.entrypoint_id}, shortGTS(t.entrypoint_id))],
        ['Filter (CEL)', t.event_filter_query ? h('code', {}, t.event_filter_query) : 'none: every event of the type'], ['Runs as', t.execution_context],
        ['Batch', t.batch?.enabled ? `up to ${t.batch.max_size} events or ${t.batch.max_wait_ms} ms` : 'no batching'],
        ['Created', time(t.created_at)], ['Updated', time(t.updated_at)],
      ]),
      h('details', {}, h('summary', {}, 'Definition'), pre(t, 'Trigger')),
      h('h2', {id: 'dl-h'}, 'Dead letters'),
      h('div', {class: 'actions', role: 'group', 'aria-labelledby': 'dl-h'},
        h('button', {type: 'button', id: 'redrive-all', disabled: !dls.items.length,
          onclick: () => act('redrive', 'POST', `${base}/dead-letters:redrive`, 'Redrive the oldest 100 dead letters (one new invocation each)?')}, 'Redrive all'),
        h('button', {type: 'button', id: 'purge', disabled: !dls.items.length,
          onclick: () => act('purge', 'DELETE', `${base}/dead-letters`, 'Delete every dead letter of this trigger?')}, 'Purge all')),
      h('div', {id: 'dead-letters'}, table('Dead letters, oldest first', [
        {label: 'Dead letter', cell: d => h('span', {class: 'mono'}, d.dead_letter_id)},
        {label: 'Created', cell: d => time(d.created_at)},
        {label: 'Events', cell: d => (d.event_ids || []).map((e, i) => [i ? ', ' : '', h('a', {href: `/console/events/${enc(e)}`, class: 'mono'}, e)])},
        {label: 'Invocation', cell: d => d.invocation_id ? h('a', {href: `/console/invocations/${enc(d.invocation_id)}`, class: 'mono'}, d.invocation_id) : 'not started'},
        {label: 'Error', class: 'cell-error', cell: d => d.error ? errorBox(d.error, true) : '—'},
        {label: '', cell: d => h('button', {type: 'button', class: 'small', 'data-redrive': d.dead_letter_id,
          onclick: () => act('redrive', 'POST', `${base}/dead-letters/${enc(d.dead_letter_id)}:redrive`)}, 'Redrive')},
      ], dls.items, 'No dead letters.')),
      pager(ctx, dls.page_info, `/triggers/${enc(id)}`));
  };
  await load();
}
