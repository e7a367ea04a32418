// Search by id: an id typed in the header's search box opens its page. Ids with a known prefix
// (inv_, ep_, evt_, corr_, a GTS entrypoint or event type id) are read directly; other ids are
// looked up, without a 404, among the resources whose ids users choose (schedules, triggers,
// webhook triggers, secrets) with an eq filter. One match opens; several are listed.

import {api, quote, enc} from './api.js';
import {h, fill, shortGTS} from './dom.js';

const ENTRYPOINT = 'gts.x.core.serverless.entrypoint.v1~';

/**
 * direct answers the console path of an id whose form says what it is ({kind, path, read}: read
 * is the API path that confirms it exists), or null.
 */
export function direct(id) {
  const e = enc(id);
  if (/^inv_/.test(id) || /^dryrun_/.test(id)) return {kind: 'invocation', path: `/invocations/${e}`, read: `/invocations/${e}`};
  if (/^ep_/.test(id) || id.startsWith(ENTRYPOINT)) return {kind: 'entrypoint', path: `/entrypoints/${e}`, read: `/entrypoints/${e}`};
  if (/^gts\..*~$/.test(id)) return {kind: 'event type', path: `/event-types/${e}`, read: `/event-types/${e}`};
  if (/^evt_/.test(id)) return {kind: 'event', path: `/events/${e}`, read: `/events/${e}`};
  if (/^corr_/.test(id)) return {kind: 'correlation id', path: `/invocations?correlation=${e}`, read: null};
  return null;
}

// The resources with ids users choose: [kind, list path, id field, console path].
const LOOKUPS = [
  ['schedule', '/schedules', 'schedule_id', id => `/schedules/${enc(id)}`],
  ['trigger', '/triggers', 'trigger_id', id => `/triggers/${enc(id)}`],
  ['webhook trigger', '/webhook-triggers', 'webhook_trigger_id', id => `/webhooks/${enc(id)}`],
  ['secret', '/secrets', 'name', () => '/secrets'],
];

/** find answers the pages [{kind, path}] an id may be. */
async function find(id, signal) {
  const d = direct(id);
  if (d) {
    if (d.read) await api('GET', d.read, {signal});
    return [d];
  }
  const found = await Promise.all(LOOKUPS.map(async ([kind, list, key, page]) => {
    // A lookup the token may not make (secrets need a developer) is no match.
    const res = await api('GET', list, {signal, query: {$filter: `${key} eq ${quote(id)}`, limit: 1}}).catch(() => null);
    return res?.items?.length ? {kind, path: page(id)} : null;
  }));
  return found.filter(Boolean);
}

export async function searchPage(ctx) {
  const id = (ctx.query.get('q') || '').trim();
  if (!id) {
    fill(ctx.main, h('h1', {tabindex: -1}, 'Search'), h('p', {}, 'Type an id in the search box: an invocation, an entrypoint (ep_… or its GTS id), an event or event type, a schedule, a trigger, a webhook trigger or a secret.'));
    return;
  }
  let found;
  try {
    found = await find(id, ctx.signal);
  } catch (e) {
    if (e?.status !== 404) throw e;
    found = [];
  }
  if (!ctx.live()) return;
  if (found.length === 1) {
    ctx.navigate(found[0].path, true);
    return;
  }
  fill(ctx.main, h('h1', {tabindex: -1}, 'Search: ', h('span', {class: 'mono'}, shortGTS(id))),
    found.length
      ? h('ul', {id: 'search-results'}, found.map(f => h('li', {}, h('a', {href: `/console${f.path}`}, `${f.kind} ${id}`))))
      : h('p', {class: 'msg', id: 'search-none'}, `Nothing has the id ${id}. Search takes a whole id (inv_…, ep_…, evt_…, a GTS id, a schedule's, trigger's or webhook trigger's id, or a secret's name).`));
}
