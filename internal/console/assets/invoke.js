// The Invoke form of an entrypoint: one field per property of simple type (string, integer,
// number, boolean, enum) of its params JSON Schema, a JSON textarea for the rest, and the modes
// its traits support. A sync run that ends shows its result here; otherwise the new invocation
// opens.

import {api, enc, TERMINAL} from './api.js';
import {h, fill, badge, pre, field, select} from './dom.js';
import {errorBox} from './invocations.js';

const SIMPLE = new Set(['string', 'integer', 'number', 'boolean']);

/** typeOf answers a property schema's simple type (string, integer, number, boolean), or null. */
function typeOf(p) {
  if (!p || typeof p !== 'object') return null;
  let t = p.type;
  if (Array.isArray(t)) t = t.filter(x => x !== 'null').length === 1 ? t.find(x => x !== 'null') : null;
  if (!t && Array.isArray(p.enum) && p.enum.length && p.enum.every(v => typeof v === 'string')) t = 'string';
  return SIMPLE.has(t) ? t : null;
}

/**
 * plan reads a params schema: fields [{name, type, required, enum, default, description}] for the
 * properties of simple type, and whether a JSON textarea is needed for the rest (other
 * properties, additional properties, or a schema that is not an object with properties).
 */
export function plan(schema) {
  const props = schema && typeof schema === 'object' && schema.properties && typeof schema.properties === 'object' ? schema.properties : null;
  if (!props) return {fields: [], json: true};
  const required = new Set(Array.isArray(schema.required) ? schema.required : []);
  const fields = [];
  let rest = schema.additionalProperties !== false;
  for (const [name, p] of Object.entries(props)) {
    const type = typeOf(p);
    if (!type) { rest = true; continue; }
    fields.push({name, type, required: required.has(name), enum: Array.isArray(p.enum) ? p.enum : null,
      default: p.default, description: p.description || p.title || ''});
  }
  // Required fields first, then in the schema's order.
  fields.sort((a, b) => Number(b.required) - Number(a.required));
  return {fields, json: rest || !fields.length};
}

/**
 * collect builds the params from the fields' raw values ({name: string}) and the JSON text: the
 * JSON object first, the filled fields over it. It throws an Error naming what is wrong.
 */
export function collect(fields, values, text) {
  let params = {};
  if (text && text.trim()) {
    try { params = JSON.parse(text); } catch (e) { throw new Error(`Params (JSON) is not valid JSON: ${e.message}`); }
    if (!params || typeof params !== 'object' || Array.isArray(params)) throw new Error('Params (JSON) must be a JSON object');
  }
  for (const f of fields) {
    const raw = (values[f.name] ?? '').trim();
    if (raw === '') {
      if (f.required && !(f.name in params)) throw new Error(`${f.name} is required`);
      continue;
    }
    if (f.type === 'string') params[f.name] = values[f.name];
    else if (f.type === 'boolean') params[f.name] = raw === 'true';
    else {
      const n = Number(raw);
      if (!isFinite(n) || (f.type === 'integer' && !Number.isInteger(n))) throw new Error(`${f.name} must be ${f.type === 'integer' ? 'an integer' : 'a number'}`);
      params[f.name] = n;
    }
  }
  return params;
}

/** control builds the input of one field. */
function control(f) {
  const name = `p.${f.name}`;
  const def = f.default === undefined ? '' : String(f.default);
  if (f.type === 'boolean') return select(name, [['', f.required ? 'choose' : '(not set)'], ['true', 'true'], ['false', 'false']], def);
  if (f.enum) return select(name, [['', f.required ? 'choose' : '(not set)'], ...f.enum.map(v => [String(v), String(v)])], def);
  return h('input', {name, type: f.type === 'string' ? 'text' : 'number', step: f.type === 'number' ? 'any' : null,
    value: def, required: f.required, size: 30});
}

/** invokeSection answers the Invoke button and its form for entrypoint ep (null if it cannot be invoked). */
export function invokeSection(ctx, ep) {
  if (!['active', 'deprecated'].includes(ep.status) || ep.traits?.entrypoint === false) return null;
  const inv = ep.traits?.invocation || {};
  const modes = (inv.supported?.length ? inv.supported : ['sync', 'async']);
  const p = plan(ep.schema?.params);
  const out = h('div', {id: 'invoke-result', 'aria-live': 'polite'});
  const err = h('p', {class: 'msg error', role: 'alert', hidden: true});
  const text = p.json ? h('textarea', {name: 'params', rows: 6, cols: 60, spellcheck: 'false', class: 'mono'}, p.fields.length ? '' : '{}') : null;
  const form = h('form', {id: 'invoke-form', class: 'panel invoke', hidden: true, novalidate: true, 'aria-label': 'Invoke'},
    h('h2', {}, 'Invoke'),
    p.fields.map(f => field(`${f.name}${f.required ? ' (required)' : ''}${f.description ? ` — ${f.description}` : ''}`, control(f))),
    text ? field(p.fields.length ? 'Other params (JSON object; the fields above take precedence)' : 'Params (JSON object)', text) : null,
    field('Mode', select('mode', modes.map(m => [m, m === 'sync' ? 'sync (wait for the result)' : 'async (queue it)']), inv.default || modes[0])),
    err,
    h('div', {class: 'actions'}, h('button', {type: 'submit', class: 'primary'}, 'Run')));
  const button = h('button', {type: 'button', id: 'invoke', class: 'primary', 'aria-expanded': 'false', onclick: () => {
    form.hidden = !form.hidden;
    button.setAttribute('aria-expanded', String(!form.hidden));
    if (!form.hidden) form.querySelector('input, select, textarea')?.focus();
  }}, 'Invoke');
  form.addEventListener('submit', ev => submit(ev, ctx, ep, p, form, err, out));
  return {button, form: h('div', {}, form, out)};
}

async function submit(ev, ctx, ep, p, form, err, out) {
  ev.preventDefault();
  err.hidden = true;
  const data = new FormData(form);
  const values = Object.fromEntries(p.fields.map(f => [f.name, String(data.get(`p.${f.name}`) ?? '')]));
  let params;
  try {
    params = collect(p.fields, values, data.get('params'));
  } catch (e) {
    err.hidden = false;
    err.textContent = e.message;
    return;
  }
  const mode = data.get('mode');
  const runBtn = form.querySelector('button[type="submit"]');
  runBtn.disabled = true;
  fill(out, mode === 'sync' ? h('p', {class: 'muted'}, 'Running…') : null);
  try {
    const res = await api('POST', '/invocations', {body: {entrypoint_id: ep.entrypoint_id, mode, params}});
    const r = res.record;
    if (mode === 'async' || !TERMINAL.has(r.status)) {
      ctx.navigate(`/invocations/${enc(r.invocation_id)}`);
      ctx.flash(`Started ${r.invocation_id} (${r.status}).`);
      return;
    }
    fill(out, h('section', {class: 'panel', id: 'invoke-outcome'},
      h('h2', {}, 'Result ', badge(r.status)),
      h('p', {}, 'Invocation ', h('a', {href: `/console/invocations/${enc(r.invocation_id)}`, class: 'mono'}, r.invocation_id)),
      r.error ? errorBox(r.error) : pre(r.result, 'Result')));
  } catch (e) {
    fill(out);
    err.hidden = false;
    const issues = (e.problem?.errors || []).map(x => `${x.path || ''} ${x.message || x.detail || ''}`.trim());
    err.textContent = `Invoke failed: ${e.message}${issues.length ? ` (${issues.join('; ')})` : ''}`;
  } finally {
    runBtn.disabled = false;
  }
}
