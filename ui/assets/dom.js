// DOM helpers. Every piece of text from the server (ids, tool names,
// arguments, outputs, errors) enters the page through these, as text
// nodes and attribute values: never as HTML.

const SVG = 'http://www.w3.org/2000/svg';

// safeHref keeps only the links the UI makes itself: routes of this page
// (#/...) and same-origin API paths (/v1/...). Anything else becomes "#".
export function safeHref(v) {
  const s = String(v);
  return s.startsWith('#/') || s.startsWith('/v1/') ? s : '#';
}

function setProps(el, props) {
  if (!props) return;
  for (const [k, v] of Object.entries(props)) {
    if (v == null || v === false) continue;
    if (k === 'class') el.setAttribute('class', v);
    else if (k === 'href') el.setAttribute('href', safeHref(v));
    else if (k === 'dataset') for (const [dk, dv] of Object.entries(v)) el.dataset[dk] = String(dv);
    else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, String(v));
  }
}

function appendAll(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c == null || c === false) continue;
    el.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// h creates an HTML element with props and children (nodes or text).
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  setProps(el, props);
  appendAll(el, children);
  return el;
}

// s creates an SVG element the same way.
export function s(tag, props, ...children) {
  const el = document.createElementNS(SVG, tag);
  setProps(el, props);
  appendAll(el, children);
  return el;
}

// json renders a JSON value as indented text.
export function json(v) {
  if (v === undefined) return '';
  try { return JSON.stringify(v, null, 2); } catch { return String(v); }
}

// clip shortens text for a table cell.
export function clip(text, n) {
  const t = String(text);
  return t.length > n ? t.slice(0, n) + '…' : t;
}

export function fmtTime(iso) {
  if (!iso) return '—';
  const d = new Date(iso);
  return isNaN(d) ? String(iso) : d.toISOString().replace('T', ' ').replace('Z', '');
}

// fmtDur writes a duration in ms for people: 12 ms, 3.4 s, 5 m 2 s, 3 h 4 m.
export function fmtDur(ms) {
  if (ms == null || isNaN(ms)) return '—';
  const neg = ms < 0; ms = Math.abs(ms);
  // Two units, the smaller one rounded first: 23 h 59.9 m is 24 h 0 m, not 23 h 60 m.
  const two = (big, small) => { const n = Math.round(ms / small); return [Math.floor(n / (big / small)), n % (big / small)]; };
  let t;
  if (ms < 1000) t = `${Math.round(ms)} ms`;
  else if (ms < 60e3) t = `${(ms / 1000).toFixed(ms < 10e3 ? 2 : 1)} s`;
  else if (ms < 3600e3) { const [m, sec] = two(60e3, 1e3); t = `${m} m ${sec} s`; }
  else if (ms < 86400e3) { const [hr, m] = two(3600e3, 60e3); t = `${hr} h ${m} m`; }
  else { const [d, hr] = two(86400e3, 3600e3); t = `${d} d ${hr} h`; }
  return neg ? '-' + t : t;
}

export function fmtBytes(n) {
  if (n == null) return '—';
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}
