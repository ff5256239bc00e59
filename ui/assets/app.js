// turnd's web UI: a hash router over five pages. Every fetch goes through
// api.js (the token in a header); every text through dom.js (text nodes).

import { h, json, clip, fmtTime, fmtDur } from './dom.js';
import { AuthError, get, text, events, paths, token, setToken } from './api.js';
import { buildModel, render, progressText, decisionText, LEGEND } from './timeline.js';
import { show, link, sessionHref, turnHref, ago, table, pager } from './page.js';
import { approvalsPage } from './approvals.js';

const main = document.getElementById('main');
const forget = document.getElementById('forget');
let page = null; // the current page's AbortController

// fmtAt writes a time in ms since the epoch as fmtTime does.
const fmtAt = (t) => (Number.isNaN(t) ? '—' : fmtTime(new Date(t).toISOString()));
// lasted is a turn's duration: to its settlement, or to now ("so far").
function lasted(turn) {
  const settled = turn.settled_at;
  return fmtDur((settled ? Date.parse(settled) : Date.now()) - Date.parse(turn.created_at)) + (settled ? '' : ' so far');
}

function showError(err) {
  if (err && err.name === 'AbortError') return;
  if (err instanceof AuthError) { login(); return; }
  show(h('p', { class: 'error', role: 'alert' }, String(err && err.message ? err.message : err)));
}

// login asks for the API token and keeps it for this browser tab only.
function login() {
  const input = h('input', { type: 'password', id: 'token', autocomplete: 'off', spellcheck: 'false', size: 48, 'aria-label': 'API token' });
  const form = h('form', { id: 'login', class: 'login' },
    h('h1', null, 'API token'),
    h('p', null, 'This turnd requires a bearer token. It is kept in this tab (sessionStorage) and sent only in the Authorization header.'),
    input, ' ', h('button', { type: 'submit' }, 'Continue'));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    setToken(input.value.trim());
    route();
  });
  show(form);
  input.focus();
}

async function sessionsPage(params, signal) {
  const after = params.get('after') || '';
  const data = await get(paths.sessions(after), signal);
  const now = Date.now();
  show(
    h('h1', null, 'Sessions'),
    table(['session', 'turns', 'pending now', 'last activity', 'created'],
      data.sessions.map((x) => h('tr', { dataset: { session: x.id } },
        h('td', null, link(sessionHref(x.id), x.id)),
        h('td', { class: 'num' }, String(x.turns)),
        h('td', { class: 'num' + (x.pending ? ' warn' : '') }, String(x.pending)),
        h('td', { title: fmtTime(x.last_activity) }, ago(x.last_activity, now)),
        h('td', null, fmtTime(x.created_at)))),
      { id: 'sessions' }),
    data.sessions.length ? null : h('p', { class: 'muted' }, 'No sessions yet.'),
    pager(after ? '#/sessions' : null, data.next_after ? '#/sessions?after=' + encodeURIComponent(data.next_after) : null));
}

async function sessionPage(sid, params, signal) {
  const turnsAfter = params.get('turns_after') || '';
  const ledgerAfter = Number(params.get('ledger_after')) || 0;
  const base = sessionHref(sid);
  const [sess, turns, ledger] = await Promise.all([
    get(paths.session(sid), signal), get(paths.turns(sid, turnsAfter), signal), get(paths.ledger(sid, ledgerAfter), signal)]);
  const q = (k, v) => { const p = new URLSearchParams(params); if (v) p.set(k, v); else p.delete(k); const t = p.toString(); return base + (t ? '?' + t : ''); };
  show(
    h('h1', null, 'Session ', h('code', null, sess.id)),
    h('dl', { class: 'facts' },
      h('dt', null, 'created'), h('dd', null, fmtTime(sess.created_at)),
      h('dt', null, 'grants'), h('dd', null, sess.tools == null ? 'every registered tool' : (sess.tools.length ? sess.tools.join(', ') : 'no tool')),
      h('dt', null, 'budget'), h('dd', null, h('code', null, JSON.stringify(sess.budget))),
      h('dt', null, 'metadata'), h('dd', null, h('code', null, clip(JSON.stringify(sess.metadata), 400)))),
    h('h2', null, 'Turns'),
    table(['turn', 'status', 'calls', 'pending', 'duration', 'received'],
      turns.turns.map((t) => h('tr', { dataset: { turn: t.id } },
        h('td', null, link(turnHref(sid, t.id), t.id)),
        h('td', null, h('span', { class: 'dot st-' + t.status }), t.status),
        h('td', { class: 'num' }, String(t.calls)),
        h('td', { class: 'num' + (t.pending ? ' warn' : '') }, String(t.pending)),
        h('td', { class: 'num' }, lasted(t)),
        h('td', null, fmtTime(t.created_at)))),
      { id: 'turns' }),
    pager(turnsAfter ? q('turns_after', '') : null, turns.next_after ? q('turns_after', turns.next_after) : null),
    h('h2', null, 'Ledger'),
    table(['seq', 'kind', 'turn', 'call', 'at', 'data'],
      ledger.lines.map((l) => h('tr', null,
        h('td', { class: 'num' }, String(l.seq)),
        h('td', null, l.kind),
        h('td', null, l.turn_id ? link(turnHref(sid, l.turn_id), l.turn_id) : ''),
        h('td', null, l.call_id == null ? '' : l.call_id),
        h('td', null, fmtTime(l.at)),
        h('td', null, h('code', { class: 'data' }, clip(JSON.stringify(l.data), 300))))),
      { id: 'ledger' }),
    pager(ledgerAfter ? q('ledger_after', '') : null, ledger.lines.length ? q('ledger_after', String(ledger.next_after)) : null));
}

async function pendingPage(params, signal) {
  const after = params.get('after') || '';
  const data = await get(paths.pending(after), signal);
  const now = Date.now();
  const heartbeat = (p) => {
    if (!p.heartbeat_deadline) return 'no heartbeat clock';
    const left = Date.parse(p.heartbeat_deadline) - now;
    return left >= 0 ? `ok, due in ${fmtDur(left)} (every ${p.heartbeat_timeout})` : `overdue by ${fmtDur(-left)}`;
  };
  show(
    h('h1', null, 'Pending calls'),
    h('p', { class: 'muted' }, 'Calls parked on a completion key, across sessions. Keys are never shown: only the system the tool handed one to holds it.'),
    table(['session', 'turn', 'call', 'tool', 'age', 'deadline', 'heartbeat', 'on timeout'],
      data.pending.map((p) => h('tr', null,
        h('td', null, link(sessionHref(p.session_id), p.session_id)),
        h('td', null, link(turnHref(p.session_id, p.turn_id), p.turn_id)),
        h('td', null, p.call_id),
        h('td', null, p.tool),
        h('td', null, fmtDur(now - Date.parse(p.parked_at))),
        h('td', { title: fmtTime(p.deadline) }, p.deadline ? 'in ' + fmtDur(Date.parse(p.deadline) - now) : '—'),
        h('td', null, heartbeat(p)),
        h('td', null, p.on_timeout))),
      { id: 'pending' }),
    data.pending.length ? null : h('p', { class: 'muted' }, 'Nothing is pending.'),
    pager(after ? '#/pending' : null, data.next_after ? '#/pending?after=' + encodeURIComponent(data.next_after) : null));
}

// turnPage draws the timeline and, while the turn runs or waits, follows
// its event stream: every line redraws it, without a reload.
async function turnPage(sid, tid, signal) {
  const st = { turn: null, calls: [], lines: [], selected: -1, lastId: '', refetch: null, full: new Map(), progress: new Map() };
  const [turn, calls] = await Promise.all([get(paths.turn(sid, tid), signal), get(paths.calls(sid, tid), signal)]);
  st.turn = turn; st.calls = calls.calls;

  const head = h('div', { class: 'turnhead' });
  const body = h('div', { id: 'timeline' });
  const detail = h('div', { id: 'detail', class: 'detail' });
  const legend = h('p', { class: 'legend' }, LEGEND.map((k) => h('span', null, h('span', { class: 'dot st-' + k }), k)),
    h('span', null, h('span', { class: 'swatch span' }), 'waiting on a completion'),
    h('span', null, h('span', { class: 'swatch approval' }), 'waiting for approval'),
    h('span', null, h('span', { class: 'swatch decision' }), 'decision'),
    h('span', null, h('span', { class: 'swatch serial' }), 'wave turned serial'),
    h('span', null, h('span', { class: 'swatch waitres' }), 'waiting for a resource'),
    h('span', null, h('span', { class: 'swatch waitcap' }), 'waiting for a max_concurrency place'),
    h('span', null, h('span', { class: 'swatch streamend' }), 'stream end'));
  show(
    h('p', { class: 'crumbs' }, link('#/sessions', 'Sessions'), ' / ', link(sessionHref(sid), sid), ' / ', tid),
    head, legend, body, detail);

  const draw = () => {
    const t0 = performance.now();
    const model = buildModel(st.turn, st.calls, st.lines, Date.now());
    // A call's latest progress shows until it has its result.
    for (const r of model.rows) r.progress = (!r.result || r.result.status === 'pending') ? st.progress.get(r.id) : null;
    head.replaceChildren(
      h('h1', null, 'Turn ', h('code', null, tid)),
      h('p', null, h('span', { class: 'dot st-' + st.turn.status }), h('strong', { id: 'turn-status' }, st.turn.status), ' · ',
        `${st.calls.length} calls · ${lasted(st.turn)} · mode ${st.turn.mode} · ${Number.isNaN(model.streamEnd) ? 'received' : 'streamed, ended'} ${fmtTime(st.turn.created_at)}`,
        live ? h('span', { class: 'live', id: 'live' }, ' ● live') : null));
    const width = Math.max(320, (body.clientWidth || main.clientWidth || 1000) - 464);
    body.replaceChildren(render(model, width, st.selected, (i) => { st.selected = i; draw(); }));
    drawDetail(model);
    body.getBoundingClientRect(); // layout included in the measure
    const took = performance.now() - t0;
    document.documentElement.dataset.renderMs = took.toFixed(1);
    document.documentElement.dataset.renders = String((Number(document.documentElement.dataset.renders) || 0) + 1);
  };

  const drawDetail = (model) => {
    const r = model.rows[st.selected];
    if (!r) { detail.replaceChildren(); return; }
    const res = r.result;
    const out = h('pre', { class: 'output', id: 'detail-output' }, res ? (typeof res.output === 'string' ? res.output : json(res.output)) : '(no result yet)');
    const parts = [
      h('h2', null, `Call ${r.index} `, h('code', null, r.id), ' ', r.name),
      h('dl', { class: 'facts' },
        h('dt', null, 'outcome'), h('dd', null, r.outcome),
        h('dt', null, 'effect'), h('dd', null, r.effect || '—'),
        h('dt', null, 'attempts'), h('dd', null, res ? String(res.attempts) : '—'),
        r.tries ? [h('dt', null, 'each attempt'), h('dd', { id: 'detail-tries' }, r.tries.map((t, k) =>
          (k ? ` · waited ${fmtDur(t.from - r.tries[k - 1].to)} · ` : '') + `${k + 1}: ${t.outcome} ${fmtDur(t.to - t.from)}`).join(''))] : null,
        h('dt', null, 'started'), h('dd', null, res ? fmtTime(res.started_at) : '—'),
        h('dt', null, 'finished'), h('dd', null, res ? fmtTime(res.finished_at) : '—'),
        r.pending ? [h('dt', null, 'on timeout'), h('dd', null, r.pending.onTimeout || '—')] : null,
        r.pending && r.pending.approval ? [h('dt', null, 'approval'), h('dd', { id: 'detail-approval' },
          r.decision ? decisionText(r.decision) + ' · ' + fmtAt(r.decision.at)
            : [`waiting since ${fmtAt(r.pending.at)} · `, link('#/approvals', 'decide on the approvals page')]),
        h('dt', null, 'why'), h('dd', null, r.pending.rule || '—')] : null,
        r.late.length ? [h('dt', null, 'late decisions'), h('dd', { id: 'detail-late' }, r.late.map((x) => x.decision + (x.by ? ' by ' + x.by : '')).join(' · '))] : null,
        r.progress ? [h('dt', null, 'progress'), h('dd', { id: 'detail-progress' }, progressText(r.progress) + (r.progress.message ? ' · ' + r.progress.message : ''))] : null),
      h('h3', null, r.decision && r.decision.edited ? 'Arguments (as posted)' : 'Arguments'), h('pre', { id: 'detail-args' }, json(r.args === undefined ? {} : r.args)),
      r.decision && r.decision.edited ? [h('h3', null, 'Arguments (edited, run)'), h('pre', { id: 'detail-edited-args' }, json(r.decision.arguments))] : null,
      h('h3', null, res && res.truncated ? 'Output (projected)' : 'Output'), out,
    ];
    if (res && res.error) parts.push(h('h3', null, 'Error'), h('pre', { id: 'detail-error' }, `${res.error.code}: ${res.error.message}`));
    if (res && res.truncated && res.output_id) {
      // A loaded full output stays shown across redraws.
      const full = st.full.get(res.output_id);
      if (full !== undefined) out.textContent = full;
      const btn = h('button', { type: 'button', id: 'full-output', disabled: full !== undefined ? 'disabled' : null },
        full !== undefined ? 'The full output is shown' : `Load the full output (${res.original_bytes} bytes, ${res.original_lines} lines)`);
      btn.addEventListener('click', async () => {
        btn.disabled = true;
        try { st.full.set(res.output_id, await text(paths.output(res.output_id), 1 << 20, signal)); draw(); } catch (e) { showError(e); }
      });
      parts.push(btn);
    }
    detail.replaceChildren(...parts.flat().filter((p) => p != null));
  };

  const refetch = () => {
    if (st.refetch) return;
    st.refetch = setTimeout(async () => {
      st.refetch = null;
      try { st.turn = await get(paths.turn(sid, tid), signal); draw(); } catch (e) { showError(e); }
    }, 50);
  };

  let live = true;
  draw();
  const tick = setInterval(() => { if (live) draw(); }, 1000);
  signal.addEventListener('abort', () => clearInterval(tick));
  // The stream sends every line of the turn, then new ones as they are
  // written, and ends after turn_settled. A dropped stream resumes from
  // the last line seen.
  for (let tries = 0; !signal.aborted && tries < 100; tries++) {
    try {
      await events(paths.events(sid, tid), st.lastId, (ev) => {
        if (ev.event === 'call_progress') {
          // Not a ledger line: no id, nothing to resume from.
          st.progress.set(ev.data.call_id, ev.data);
          draw();
          return;
        }
        st.lastId = ev.id;
        st.lines.push(ev.data);
        refetch();
      }, signal);
      if (st.lines.some((l) => l.kind === 'turn_settled')) break;
    } catch (e) {
      if (signal.aborted) return;
      if (e instanceof AuthError) { showError(e); return; }
    }
    await new Promise((res) => setTimeout(res, 1000));
  }
  live = false;
  clearInterval(tick);
  if (!signal.aborted) {
    try { st.turn = await get(paths.turn(sid, tid), signal); } catch (e) { showError(e); return; }
    draw();
  }
}

async function route() {
  if (page) page.abort();
  page = new AbortController();
  const signal = page.signal;
  forget.hidden = !token();
  const hash = location.hash || '#/sessions';
  const [path, query] = hash.slice(1).split('?');
  const params = new URLSearchParams(query || '');
  const parts = path.split('/').filter(Boolean).map((p) => { try { return decodeURIComponent(p); } catch { return p; } });
  try {
    if (parts[0] === 'session' && parts.length === 2) await sessionPage(parts[1], params, signal);
    else if (parts[0] === 'turn' && parts.length === 3) await turnPage(parts[1], parts[2], signal);
    else if (parts[0] === 'pending') await pendingPage(params, signal);
    else if (parts[0] === 'approvals') await approvalsPage(params, signal, showError);
    else await sessionsPage(params, signal);
  } catch (e) {
    if (!signal.aborted) showError(e);
  }
}

forget.addEventListener('click', () => { setToken(''); login(); forget.hidden = true; });
window.addEventListener('hashchange', route);
route();
