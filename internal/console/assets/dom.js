// Small DOM helpers: elements are built with h()/s() and text is always set as text, never as
// HTML, so nothing from the API can inject markup.

const SVGNS = 'http://www.w3.org/2000/svg';

function build(el, attrs, children) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'text') el.textContent = v;
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

/** append adds children (nodes, strings, numbers, nested arrays; null skipped) to el. */
export function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
  return el;
}

/** h builds an HTML element: h('a', {href: '/x', class: 'y'}, 'text', child). */
export function h(tag, attrs, ...children) {
  return build(document.createElement(tag), attrs, children);
}

/** s builds an SVG element. */
export function s(tag, attrs, ...children) {
  return build(document.createElementNS(SVGNS, tag), attrs, children);
}

/** clear empties el and returns it. */
export function clear(el) {
  el.replaceChildren();
  return el;
}

/** time formats an RFC 3339 time in the browser's locale (empty for null). */
export function time(v) {
  if (!v) return '—';
  const d = new Date(v);
  return isNaN(d) ? String(v) : d.toLocaleString(undefined, {dateStyle: 'medium', timeStyle: 'medium'});
}

/** dur formats milliseconds. */
export function dur(ms) {
  if (ms === null || ms === undefined) return '—';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)} s`;
  if (ms < 3600000) return `${Math.floor(ms / 60000)} min ${Math.round((ms % 60000) / 1000)} s`;
  return `${(ms / 3600000).toFixed(1)} h`;
}

/** num formats a number compactly. */
export function num(v, digits = 2) {
  if (v === null || v === undefined) return '—';
  return Number(v).toLocaleString(undefined, {maximumFractionDigits: digits});
}

/** json pretty-prints a value for a <pre>. */
export function json(v) {
  return JSON.stringify(v, null, 2);
}

/** badge shows a status. */
export function badge(status) {
  return h('span', {class: `badge st-${String(status).replace(/[^a-z_]/g, '')}`}, status);
}

/** shortID shortens a long GTS id for display: its last segment. */
export function shortGTS(id) {
  if (!id) return '';
  const parts = String(id).split('~').filter(Boolean);
  return parts.length > 1 ? parts[parts.length - 1] + '~' : String(id);
}

/**
 * table renders rows under columns [{label, cell(row) → node|string, class?}], with a caption for
 * screen readers.
 */
export function table(caption, columns, rows, empty = 'Nothing here yet.') {
  if (!rows.length) return h('p', {class: 'muted empty'}, empty);
  return h('div', {class: 'table-wrap'},
    h('table', {},
      h('caption', {class: 'sr-only'}, caption),
      h('thead', {}, h('tr', {}, columns.map(c => h('th', {scope: 'col'}, c.label)))),
      h('tbody', {}, rows.map(r => h('tr', {}, columns.map(c => h('td', {class: c.class}, c.cell(r))))))));
}

/** dl renders [term, value] pairs as a description list. */
export function dl(pairs) {
  return h('dl', {class: 'props'}, pairs.filter(Boolean).map(([k, v]) => [h('dt', {}, k), h('dd', {}, v ?? '—')]));
}

/** pre shows a JSON value in a scrollable block. */
export function pre(v, label) {
  return h('pre', {class: 'json', tabindex: 0, 'aria-label': label || 'JSON'}, json(v));
}

/** field wraps a labelled form control. */
export function field(label, control) {
  const id = control.id || `f-${Math.random().toString(36).slice(2, 9)}`;
  control.id = id;
  return h('div', {class: 'field'}, h('label', {for: id}, label), control);
}

/** select builds a <select> from [value, label] options. */
export function select(name, options, value) {
  return h('select', {name}, options.map(([v, l]) => h('option', {value: v, selected: v === value}, l)));
}

/** fill replaces el's children with children (flattened like h's). */
export function fill(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}
