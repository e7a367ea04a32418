// Entrypoints: the list (filters) and one entrypoint (its versions, lifecycle actions, source with
// Starlark highlighting, and the validation report).

import {api, and, quote, enc} from './api.js';
import {h, fill, time, badge, shortGTS, table, dl, pre, field, select} from './dom.js';
import {highlight} from './highlight.js';
import {pager} from './invocations.js';
import {invokeSection} from './invoke.js';

const STATUSES = ['draft', 'active', 'deprecated', 'disabled', 'archived'];

export async function entrypointsPage(ctx) {
  const q = ctx.query;
  const form = h('form', {class: 'filters', 'aria-label': 'Filter entrypoints'},
    field('Status', select('status', [['', 'any'], ...STATUSES.map(x => [x, x])], q.get('status') || '')),
    field('Kind', select('kind', [['', 'any'], ['function', 'function'], ['workflow', 'workflow']], q.get('kind') || '')),
    field('Title contains', h('input', {name: 'title', value: q.get('title') || ''})),
    field('Tag', h('input', {name: 'tag', value: q.get('tag') || ''})),
    h('button', {type: 'submit'}, 'Apply'));
  form.addEventListener('submit', ev => {
    ev.preventDefault();
    const p = new URLSearchParams();
    for (const [k, v] of new FormData(form)) if (v) p.set(k, v);
    ctx.navigate('/entrypoints' + (p.size ? '?' + p : ''));
  });
  const filter = and(
    q.get('status') ? `status eq ${quote(q.get('status'))}` : '',
    q.get('kind') ? `kind eq ${quote(q.get('kind'))}` : '',
    q.get('title') ? `contains(title, ${quote(q.get('title'))})` : '',
    q.get('tag') ? `tags eq ${quote(q.get('tag'))}` : '');
  const page = await api('GET', '/entrypoints', {signal: ctx.signal, query: {$filter: filter, limit: 50, cursor: q.get('cursor'), $orderby: 'created_at desc'}});
  fill(ctx.main, h('h1', {tabindex: -1}, 'Entrypoints'), form,
    table('Entrypoints', [
      {label: 'Title', cell: r => h('a', {href: `/console/entrypoints/${enc(r.id)}`}, r.title || r.id)},
      {label: 'Entrypoint id', cell: r => h('span', {class: 'mono', title: r.entrypoint_id}, shortGTS(r.entrypoint_id))},
      {label: 'Kind', cell: r => r.kind},
      {label: 'Version', cell: r => r.version},
      {label: 'Status', cell: r => badge(r.status)},
      {label: 'Owner', cell: r => `${r.owner?.owner_type || ''}${r.owner?.id ? ' ' + r.owner.id : ''}`},
      {label: 'Updated', cell: r => time(r.updated_at)},
    ], page.items, 'No entrypoints match.'),
    pager(ctx, page.page_info, '/entrypoints'));
}

// The lifecycle actions (docs/api.md, POST /entrypoints/{id}:status) and the statuses they leave from.
const ACTIONS = [
  ['activate', ['draft'], 'Activate'],
  ['deprecate', ['active'], 'Deprecate'],
  ['disable', ['active', 'deprecated'], 'Disable'],
  ['enable', ['disabled'], 'Enable'],
  ['archive', ['deprecated', 'disabled'], 'Archive'],
];

export async function entrypointPage(ctx) {
  const id = ctx.params[0];
  const [ep, versions] = await Promise.all([
    api('GET', `/entrypoints/${enc(id)}`, {signal: ctx.signal, query: {include_source: 'true'}}),
    api('GET', `/entrypoints/${enc(id)}/versions`, {signal: ctx.signal}),
  ]);
  const report = h('div', {id: 'validation', 'aria-live': 'polite'});
  const validate = async () => {
    fill(report, h('p', {class: 'muted'}, 'Validating…'));
    try {
      const r = await api('POST', `/entrypoints/${enc(ep.id)}:validate`);
      fill(report, validationReport(r));
    } catch (e) {
      fill(report, h('p', {class: 'msg error'}, `Validation failed: ${e.message}`));
    }
  };
  const act = async action => {
    const body = {action};
    if (action === 'deprecate') {
      const reason = prompt('Reason for deprecating (optional):');
      if (reason === null) return;
      if (reason) body.reason = reason;
    }
    if (action === 'activate') {
      const notes = prompt('Release notes (optional):');
      if (notes === null) return;
      if (notes) body.release_notes = notes;
    }
    try {
      await api('POST', `/entrypoints/${enc(ep.id)}:status`, {body});
      ctx.navigate(`/entrypoints/${enc(ep.id)}`, true);
      ctx.flash(`${action}: done.`);
    } catch (e) {
      ctx.flash(`${action} failed: ${e.message}`, 'error');
    }
  };
  const src = ep.implementation?.code?.source;
  const invoke = invokeSection(ctx, ep);
  fill(ctx.main, 
    h('h1', {tabindex: -1}, ep.title || ep.id, ' ', badge(ep.status)),
    h('p', {class: 'mono wrap'}, ep.entrypoint_id),
    h('div', {class: 'actions', role: 'group', 'aria-label': 'Lifecycle actions'},
      invoke?.button,
      ACTIONS.filter(([, from]) => from.includes(ep.status)).map(([a, , label]) =>
        h('button', {type: 'button', 'data-action': a, onclick: () => act(a)}, label)),
      h('button', {type: 'button', id: 'validate', onclick: validate}, 'Validate'),
      h('a', {class: 'button', href: `/console/invocations?entrypoint=${enc(ep.entrypoint_id)}`}, 'Its invocations')),
    invoke?.form,
    report,
    dl([
      ['Kind', ep.kind], ['Version', ep.version], ['Owner', `${ep.owner?.owner_type} ${ep.owner?.id || ''}`],
      ['Description', ep.description], ['Tags', (ep.tags || []).join(', ') || '—'],
      ['Created', time(ep.created_at)], ['Activated', time(ep.activated_at)], ['Updated', time(ep.updated_at)],
      ep.deprecation ? ['Deprecation', `${ep.deprecation.reason || ''} ${ep.deprecation.successor_id || ''}`] : null,
      ep.release_notes ? ['Release notes', ep.release_notes] : null,
    ]),
    h('h2', {}, 'Versions'),
    table('Versions of this entrypoint', [
      {label: 'Version', cell: v => h('a', {href: `/console/entrypoints/${enc(v.id)}`, 'aria-current': v.id === ep.id ? 'page' : null}, v.version)},
      {label: 'Entrypoint id', cell: v => h('span', {class: 'mono'}, shortGTS(v.entrypoint_id))},
      {label: 'Status', cell: v => badge(v.status)},
      {label: 'Created', cell: v => time(v.created_at)},
      {label: 'Activated', cell: v => time(v.activated_at)},
    ], versions.items || []),
    h('h2', {}, 'Source'),
    src ? highlight(src, 'Starlark source') : h('p', {class: 'muted'}, 'No source.'),
    h('details', {}, h('summary', {}, 'Schema and traits'),
      h('h3', {}, 'Schema'), pre(ep.schema, 'Schema'), h('h3', {}, 'Traits'), pre(ep.traits, 'Traits')));
}

/** validationReport renders 001's validation report. */
export function validationReport(r) {
  const finding = (f, kind) => h('li', {class: kind},
    h('strong', {}, f.code), ' ', f.message, ' ',
    h('span', {class: 'mono muted'}, `${f.location?.path || ''}${f.location?.line ? `:${f.location.line}:${f.location.column || 0}` : ''}`),
    f.source_snippet ? h('pre', {class: 'snippet'}, f.source_snippet) : null);
  return h('div', {class: `report ${r.valid ? 'valid' : 'invalid'}`},
    h('h2', {}, r.valid ? 'Valid' : `Invalid: ${r.errors.length} error${r.errors.length === 1 ? '' : 's'}`),
    r.errors.length ? h('ul', {'aria-label': 'Errors'}, r.errors.map(f => finding(f, 'error'))) : null,
    r.warnings.length ? h('ul', {'aria-label': 'Warnings'}, r.warnings.map(f => finding(f, 'warning'))) : null,
    r.info ? h('p', {class: 'muted'}, `Features: ${(r.info.detected_features || []).join(', ') || 'none'}`) : null);
}
