// Small SVG charts: stacked bars over time buckets, and horizontal gauges. Each chart has a title
// and a text alternative (the data is also given as a table by the page).

import {s, h, num} from './dom.js';

/**
 * bars draws stacked columns: buckets [{label, values: {series: n}}], series [{key, label, cls}].
 */
export function bars(title, buckets, series, fmt = v => num(v), integer = false) {
  const W = 760, H = 220, L = 56, B = 28, T = 12;
  const totals = buckets.map(b => series.reduce((a, x) => a + (b.values[x.key] || 0), 0));
  const step = niceStep((Math.max(...totals, 0) || 1) / 4, integer);
  const max = Math.ceil((Math.max(...totals, 0) || 1) / step) * step;
  const bw = (W - L - 8) / Math.max(buckets.length, 1);
  const y = v => T + (H - T - B) * (1 - v / max);
  const svg = s('svg', {class: 'chart', viewBox: `0 0 ${W} ${H}`, width: '100%', role: 'img', 'aria-label': title});
  svg.append(s('title', {}, title));
  for (let v = 0; v <= max + step / 2; v += step) {
    svg.append(s('line', {class: 'grid', x1: L, x2: W, y1: y(v), y2: y(v)}),
      s('text', {class: 'axis', x: L - 6, y: y(v) + 4, 'text-anchor': 'end'}, fmt(v)));
  }
  const every = Math.ceil(buckets.length / 8);
  buckets.forEach((b, i) => {
    let base = 0;
    const x = L + 4 + i * bw;
    for (const ser of series) {
      const v = b.values[ser.key] || 0;
      if (v > 0) {
        svg.append(s('rect', {class: `series ${ser.cls}`, x, y: y(base + v), width: Math.max(bw - 2, 1), height: y(base) - y(base + v)},
          s('title', {}, `${b.label}: ${ser.label} ${fmt(v)}`)));
      }
      base += v;
    }
    if (i % every === 0) svg.append(s('text', {class: 'axis', x: x + bw / 2, y: H - 8, 'text-anchor': 'middle'}, b.label));
  });
  const legend = series.length > 1
    ? h('ul', {class: 'legend'}, series.map(x => h('li', {}, h('span', {class: `swatch ${x.cls}`, 'aria-hidden': 'true'}), x.label)))
    : null;
  return h('figure', {class: 'chart-fig'}, h('figcaption', {}, title), svg, legend);
}

/** niceStep rounds a raw axis step up to 1, 2 or 5 times a power of ten (at least 1 for counts). */
export function niceStep(raw, integer) {
  const pow = 10 ** Math.floor(Math.log10(raw));
  const f = raw / pow;
  const step = (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * pow;
  return integer ? Math.max(1, Math.round(step)) : step;
}

/** gauge draws one horizontal utilisation bar (0–100 %). */
export function gauge(label, percent, detail) {
  const p = Math.max(0, Math.min(100, percent || 0));
  const svg = s('svg', {class: 'gauge', viewBox: '0 0 300 16', width: 300, height: 16, role: 'img', 'aria-label': `${label}: ${num(percent)} %`},
    s('rect', {class: 'gauge-bg', x: 0, y: 0, width: 300, height: 16, rx: 3}),
    s('rect', {class: `gauge-fg${p >= 90 ? ' hot' : p >= 70 ? ' warm' : ''}`, x: 0, y: 0, width: 3 * p, height: 16, rx: 3}));
  return h('div', {class: 'gauge-row'}, h('span', {class: 'gauge-label'}, label), svg, h('span', {}, ` ${num(percent)} % · ${detail}`));
}
