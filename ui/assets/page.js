// What the pages share: the page's content, links to the UI's routes,
// tables and pagers. Every text goes in through dom.js (text nodes).

import { h, fmtDur } from './dom.js';

const main = document.getElementById('main');

// show replaces the page's content (null parts left out: replaceChildren
// would write them as the text "null").
export function show(...parts) { main.replaceChildren(...parts.filter((p) => p != null)); }

export function link(href, label, props) { return h('a', { href, ...props }, label); }
export const sessionHref = (sid) => '#/session/' + encodeURIComponent(sid);
export const turnHref = (sid, tid) => '#/turn/' + encodeURIComponent(sid) + '/' + encodeURIComponent(tid);

export function ago(iso, now = Date.now()) { return iso ? fmtDur(now - Date.parse(iso)) + ' ago' : '—'; }

export function table(head, rows, props) {
  return h('table', props, h('thead', null, h('tr', null, head.map((x) => h('th', null, x)))),
    h('tbody', null, rows));
}

export function pager(prevHref, nextHref) {
  return h('p', { class: 'pager' },
    prevHref ? link(prevHref, '⇤ First page', { id: 'first' }) : null, ' ',
    nextHref ? link(nextHref, 'Next page →', { id: 'next' }) : h('span', { class: 'muted', id: 'last' }, 'last page'));
}
