// Event types (the tenant's and the platform's, with their payload schemas) and published events
// (filtered by type and time, each with its payload).

import {api, and, quote, enc} from './api.js';
import {h, fill, time, badge, shortGTS, table, dl, pre, field} from './dom.js';
import {pager} from './invocations.js';

export async function eventTypesPage(ctx) {
  const page = await api('GET', '/event-types', {signal: ctx.signal, query: {limit: 50, cursor: ctx.query.get('cursor')}});
  fill(ctx.main, h('h1', {tabindex: -1}, 'Event types'),
    h('p', {class: 'muted'}, 'Registered event types: a published event of one of them must match its schema. ', h('a', {href: '/console/events'}, 'Published events')),
    table('Event types', [
      {label: 'Event type', cell: r => h('a', {href: `/console/event-types/${enc(r.event_type_id)}`, class: 'mono', title: r.event_type_id}, shortGTS(r.event_type_id))},
      {label: 'Scope', cell: r => badge(r.scope)},
      {label: 'Description', cell: r => r.description || ''},
      {label: 'Created', cell: r => time(r.created_at)},
      {label: '', cell: r => h('a', {href: `/console/events?type=${enc(r.event_type_id)}`}, 'Its events')},
    ], page.items, 'No registered event types (events of any type are accepted unless the tenant policy requires registered types).'),
    pager(ctx, page.page_info, '/event-types'));
}

export async function eventTypePage(ctx) {
  const t = await api('GET', `/event-types/${enc(ctx.params[0])}`, {signal: ctx.signal});
  fill(ctx.main, h('h1', {tabindex: -1}, 'Event type ', h('span', {class: 'mono'}, shortGTS(t.event_type_id)), ' ', badge(t.scope)),
    h('p', {class: 'mono wrap'}, t.event_type_id),
    h('div', {class: 'actions'}, h('a', {class: 'button', href: `/console/events?type=${enc(t.event_type_id)}`}, 'Its events')),
    dl([['Description', t.description || '—'], ['Created', time(t.created_at)], ['Created by', t.created_by]]),
    h('h2', {}, 'Payload schema'), pre(t.schema, 'Payload schema'));
}

/** eventFilter builds the events' $filter from the form's query parameters. */
export function eventFilter(q) {
  const local = v => v ? new Date(v).toISOString() : '';
  const from = local(q.get('from')), to = local(q.get('to'));
  return and(
    q.get('type') ? `event_type_id eq ${quote(q.get('type').trim())}` : '',
    q.get('source') ? `source eq ${quote(q.get('source').trim())}` : '',
    from ? `received_at ge ${from}` : '',
    to ? `received_at lt ${to}` : '');
}

export async function eventsPage(ctx) {
  const q = ctx.query;
  const form = h('form', {class: 'filters', 'aria-label': 'Filter events'},
    field('Event type id', h('input', {name: 'type', value: q.get('type') || '', size: 50})),
    field('Source', h('input', {name: 'source', value: q.get('source') || ''})),
    field('Received from', h('input', {type: 'datetime-local', name: 'from', value: q.get('from') || ''})),
    field('Received before', h('input', {type: 'datetime-local', name: 'to', value: q.get('to') || ''})),
    h('button', {type: 'submit'}, 'Apply'));
  form.addEventListener('submit', ev => {
    ev.preventDefault();
    const p = new URLSearchParams();
    for (const [k, v] of new FormData(form)) if (v) p.set(k, v);
    ctx.navigate('/events' + (p.size ? '?' + p : ''));
  });
  const page = await api('GET', '/events', {signal: ctx.signal,
    query: {$filter: eventFilter(q), $orderby: 'received_at desc', limit: 25, cursor: q.get('cursor')}});
  fill(ctx.main, h('h1', {tabindex: -1}, 'Events'), form,
    h('div', {id: 'event-list'}, table('Published events, newest first', [
      {label: 'Event', cell: r => h('a', {href: `/console/events/${enc(r.event_id)}`, class: 'mono'}, r.event_id)},
      {label: 'Type', cell: r => h('span', {class: 'mono', title: r.event_type_id}, shortGTS(r.event_type_id))},
      {label: 'Source', cell: r => r.source || ''},
      {label: 'Subject', cell: r => r.subject || ''},
      {label: 'Received', cell: r => time(r.received_at)},
      {label: 'Published by', cell: r => r.published_by || ''},
    ], page.items, 'No events match.')),
    pager(ctx, page.page_info, '/events'));
}

export async function eventPage(ctx) {
  const e = await api('GET', `/events/${enc(ctx.params[0])}`, {signal: ctx.signal});
  fill(ctx.main, h('h1', {tabindex: -1}, 'Event ', h('span', {class: 'mono'}, e.event_id)),
    dl([
      ['Type', h('a', {href: `/console/events?type=${enc(e.event_type_id)}`, class: 'mono wrap'}, e.event_type_id)],
      ['Source', e.source], ['Subject', e.subject], ['Time', e.time ? time(e.time) : null], ['Received', time(e.received_at)],
      ['Published by', e.published_by], ['Correlation id', e.correlation_id],
    ]),
    h('h2', {}, 'Payload'), pre(e.payload, 'Payload'));
}
