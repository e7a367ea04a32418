// A small Starlark highlighter: one pass of a tokenizer over the source, producing <span>s with
// classes (never HTML strings), plus line numbers. Good enough for reading code; it is not a parser.

import {h} from './dom.js';

const KEYWORDS = new Set(['and', 'break', 'continue', 'def', 'elif', 'else', 'for', 'if', 'in', 'lambda',
  'load', 'not', 'or', 'pass', 'return', 'while']);
const CONSTANTS = new Set(['True', 'False', 'None']);
const BUILTINS = new Set(['len', 'range', 'str', 'int', 'float', 'bool', 'list', 'dict', 'tuple', 'struct',
  'print', 'fail', 'type', 'sorted', 'reversed', 'enumerate', 'zip', 'min', 'max', 'any', 'all', 'hasattr',
  'getattr', 'dir', 'abs', 'hash', 'repr', 'json']);

// Token patterns, tried in order at each position (sticky regexps).
const RULES = [
  ['comment', /#[^\n]*/y],
  ['string', /[rRbB]?("""[\s\S]*?(?:"""|$)|'''[\s\S]*?(?:'''|$)|"(?:[^"\\\n]|\\.)*"?|'(?:[^'\\\n]|\\.)*'?)/y],
  ['number', /(?:0[xX][0-9a-fA-F]+|0[oO][0-7]+|\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)/y],
  ['name', /[A-Za-z_][A-Za-z0-9_]*/y],
  ['op', /[-+*/%=<>!&|^~]+|[()[\]{},:.;]/y],
  ['space', /\s+/y],
];

/** tokens splits src into [kind, text] pairs; kinds: comment, string, number, keyword, constant,
 * builtin, helper (r_… runtime helpers), def (a function's name after def), name, op, space, other. */
export function tokens(src) {
  const out = [];
  let i = 0, prev = '';
  while (i < src.length) {
    let matched = false;
    for (const [kind, re] of RULES) {
      re.lastIndex = i;
      const m = re.exec(src);
      if (!m || m[0].length === 0) continue;
      let k = kind;
      const t = m[0];
      if (kind === 'name') {
        if (KEYWORDS.has(t)) k = 'keyword';
        else if (CONSTANTS.has(t)) k = 'constant';
        else if (prev === 'def') k = 'def';
        else if (/^r_[a-z0-9_]+$/.test(t)) k = 'helper';
        else if (BUILTINS.has(t)) k = 'builtin';
      }
      out.push([k, t]);
      if (kind !== 'space') prev = t;
      i += t.length;
      matched = true;
      break;
    }
    if (!matched) { out.push(['other', src[i]]); i++; }
  }
  return out;
}

/** highlight renders src as a numbered, highlighted code block. */
export function highlight(src, label = 'Source') {
  const code = h('code', {class: 'lang-starlark'});
  for (const [k, t] of tokens(src || '')) {
    code.append(k === 'space' || k === 'other' || k === 'name' || k === 'op' ? t : h('span', {class: `tok-${k}`}, t));
  }
  const lines = (src || '').replace(/\n$/, '').split('\n').length;
  const gutter = h('span', {class: 'gutter', 'aria-hidden': 'true'}, Array.from({length: lines}, (_, i) => `${i + 1}\n`).join(''));
  return h('pre', {class: 'code', tabindex: 0, 'aria-label': label}, gutter, code);
}
