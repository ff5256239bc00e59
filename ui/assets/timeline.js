// The wave timeline of a turn: one row per call in call order, on a time
// axis from turn_received to settlement (or now, while the turn runs or
// waits). Built from the turn (its results), its calls and its ledger
// lines; drawn as SVG, every text a text node. A retried call's attempts
// (its call_answered line's attempt_times) are segments of their own,
// each coloured by how it ended, with the backoff between them left
// empty. A streamed turn (turn_received says streamed) has its stream's
// end marked: reads that started early begin left of it. A call whose tool
// declares resources or a max_concurrency has its wait drawn, from its
// admission to its start, titled with what it waited for: the earlier
// call holding one of its resources, or a max_concurrency place; a bar's
// title names the calls that ran at once with it. A call the approval
// policy held has its wait drawn (call_pending with reason approval, to
// its call_decided line, or to now while it waits) and the decision
// marked where it was taken; an approved call's tool run follows it.

import { h, s, fmtDur, fmtBytes } from './dom.js';

const ROW = 26;     // px per call row
const AXIS = 26;    // px of the time axis above the rows
const BAR = 14;     // bar height

const ms = (iso) => (iso ? Date.parse(iso) : NaN);

// outcome is the colour class of a call's result.
function outcome(res, turnStatus) {
  if (!res) return turnStatus === 'running' ? 'running' : 'none';
  if (res.replayed_from) return 'replayed';
  if (res.error && res.error.code === 'interrupted') return 'interrupted';
  return res.status;
}

// tryClass is the colour class of an attempt's outcome: ok, timed_out,
// cancelled, pending, or else an error code.
function tryClass(outcome) {
  return ['ok', 'timed_out', 'cancelled', 'pending'].includes(outcome) ? outcome : 'error';
}

// buildModel works out rows and times; now is the clock for open spans.
export function buildModel(turn, calls, lines, now) {
  // The axis starts at turn_received, or at the first call's start when a
  // turn ran before it was recorded (a turn of reads recorded whole).
  let t0 = ms(turn.created_at);
  for (const res of turn.results || []) {
    const st = ms(res.started_at);
    if (st < t0) t0 = st;
  }
  const settled = turn.settled_at ? ms(turn.settled_at) : NaN;
  const rows = calls.map((c, i) => ({
    index: i, id: c.id, name: c.name, args: c.arguments, effect: '', result: null,
    attemptStarts: [], tries: null, pending: null, segments: [], span: null,
    resources: null, admittedAt: NaN, readyAt: NaN, gatedAt: NaN, waits: [], alongside: [],
    decision: null, late: [],
  }));
  const byId = new Map();
  for (const r of rows) if (!byId.has(r.id)) byId.set(r.id, r);
  for (const res of turn.results || []) {
    const r = byId.get(res.call_id);
    if (r) r.result = res;
  }
  let streamEnd = NaN;
  for (const l of lines) {
    const d = l.data || {};
    if (l.kind === 'turn_received' && d.streamed === true) streamEnd = ms(l.at);
    const r = l.call_id != null ? byId.get(l.call_id) : null;
    if (!r) continue;
    switch (l.kind) {
      case 'call_admitted':
        r.effect = d.effect || '';
        if (Array.isArray(d.resources)) r.resources = d.resources.map(String);
        break;
      case 'attempt_started': r.attemptStarts.push(ms(l.at)); break;
      case 'call_answered':
        r.admittedAt = ms(d.admitted_at);
        r.readyAt = ms(d.ready_at);
        r.gatedAt = ms(d.gated_at);
        if (Array.isArray(d.attempt_times) && d.attempt_times.length) {
          r.tries = d.attempt_times.map((a) => ({ from: ms(a.started_at), to: ms(a.finished_at), outcome: String(a.outcome) }));
        }
        break;
      case 'call_pending':
        r.pending = {
          at: ms(l.at), deadline: ms(d.deadline), heartbeat: ms(d.heartbeat_deadline), onTimeout: d.on_timeout || '',
          approval: d.reason === 'approval', rule: d.rule == null ? '' : String(d.rule),
        };
        break;
      case 'call_decided':
        r.decision = {
          at: ms(l.at), decision: String(d.decision), by: d.by == null ? '' : String(d.by),
          message: d.message == null ? '' : String(d.message), edited: d.edited === true,
          arguments: d.arguments, original: d.original_arguments,
        };
        break;
      case 'decision_late': {
        // data.decision is the Decision as posted ({decision, by, ...}).
        const p = d.decision && typeof d.decision === 'object' ? d.decision : {};
        r.late.push({ at: ms(l.at), decision: String(p.decision ?? '?'), by: p.by == null ? '' : String(p.by) });
        break;
      }
    }
  }

  let end = Number.isNaN(settled) ? now : settled;
  let serialAt = NaN;
  for (const r of rows) {
    const res = r.result;
    r.outcome = outcome(res, turn.status);
    if (!res) continue;
    const approval = r.pending && r.pending.approval;
    if (approval && !r.decision && res.status === 'pending') r.outcome = 'awaiting_approval';
    let start = ms(res.started_at);
    let finish = ms(res.finished_at);
    if (Number.isNaN(start) && approval) start = r.pending.at;
    if (Number.isNaN(start)) continue;
    if (Number.isNaN(finish)) finish = now;
    if (approval) {
      // Held before its tool ran: the wait from parking to the decision
      // (or to now), then, once approved, the tool's run.
      const dec = r.decision;
      const open = !dec && res.status === 'pending';
      const parkedAt = r.pending.at;
      const until = dec ? dec.at : (open ? now : Math.max(parkedAt, finish));
      r.span = { from: parkedAt, to: until, open, approval: true, rule: r.pending.rule, deadline: r.pending.deadline, heartbeat: NaN };
      if (dec && dec.decision === 'approved') {
        const runFrom = Math.max(dec.at, ...r.attemptStarts.filter((t) => !Number.isNaN(t)));
        const running = res.status === 'pending';
        if (running) r.outcome = 'running';
        r.segments.push({ from: runFrom, to: running ? now : Math.max(runFrom, finish), cls: 'final' });
        finish = running ? now : Math.max(runFrom, finish);
      }
      end = Math.max(end, until);
      if (start > parkedAt || Number.isNaN(start)) start = parkedAt;
    } else if (r.pending) {
      // The attempt ran until the tool parked the call; the wait runs
      // from parking to the delivery (or to now while it is open).
      const open = res.status === 'pending';
      const parkedAt = Math.max(start, r.pending.at);
      r.segments.push({ from: start, to: Math.min(finish, parkedAt), cls: 'attempt' });
      const until = open ? now : Math.max(parkedAt, finish);
      r.span = { from: parkedAt, to: until, open, deadline: r.pending.deadline, heartbeat: r.pending.heartbeat };
      end = Math.max(end, until);
    } else if (r.tries) {
      for (const t of r.tries) {
        if (Number.isNaN(t.from) || Number.isNaN(t.to)) continue;
        r.segments.push({ from: t.from, to: t.to, cls: 'try', outcome: t.outcome });
        if (t.from < t0) t0 = t.from;
      }
    } else if (r.attemptStarts.length > 1) {
      // A retried write recorded before attempt_times: each attempt from
      // its start; the earlier ones end where the next begins.
      const starts = r.attemptStarts;
      for (let i = 0; i < starts.length; i++) {
        const to = i + 1 < starts.length ? starts[i + 1] : finish;
        r.segments.push({ from: starts[i], to, cls: i + 1 < starts.length ? 'retry' : 'final' });
      }
    } else {
      r.segments.push({ from: start, to: finish, cls: 'final' });
    }
    end = Math.max(end, finish);
    r.from = start;
    r.to = finish;
    // Serial from the first write without resources; a write with them
    // runs beside the calls it does not conflict with.
    if (r.effect && r.effect !== 'read' && !r.resources && Number.isNaN(serialAt)) serialAt = start;
  }
  rows.forEach((r) => waitsOf(r, rows));
  if (!(end > t0)) end = t0 + 1;
  end += (end - t0) * 0.015; // room for the last bar's end
  return { t0, end, now, rows, serialAt, streamEnd, status: turn.status };
}

// conflict is the resource two calls both touch where either writes ('*'
// when either declares none), or null when they may run at once.
function conflict(a, b) {
  const writes = (r) => r.effect !== 'read';
  if (!writes(a) && !writes(b)) {
    return null;
  }
  if (!a.resources || !b.resources) return '*';
  return a.resources.find((x) => b.resources.includes(x)) || null;
}

// waitsOf fills in r's waits (a resource's, then a cap's) and the calls
// that ran at once with it.
function waitsOf(r, rows) {
  if (Number.isNaN(r.from ?? NaN)) return;
  for (const o of rows) {
    if (o !== r && !Number.isNaN(o.from ?? NaN) && o.from < r.to && r.from < o.to) r.alongside.push(o.id);
  }
  if (Number.isNaN(r.admittedAt)) return;
  const ready = Number.isNaN(r.readyAt) ? r.from : Math.min(r.readyAt, r.from);
  // The earlier conflicting call that answered last before r was ready
  // held it up (none: r waited for nothing but its own admission).
  let by = null, on = null;
  for (const o of rows.slice(0, r.index)) {
    const res = conflict(o, r);
    if (res === null || Number.isNaN(o.to ?? NaN) || o.to > ready + 1 || o.to <= r.admittedAt) continue;
    if (!by || o.to > by.to) { by = o; on = res; }
  }
  if (by && ready > r.admittedAt) {
    let why = `${by.id} on ${on}`;
    if (on === '*') {
      why = r.resources ? `${by.id} (it declares no resources: it conflicts with every call)`
        : `${by.id} (${r.id} declares no resources: it waits for every earlier call)`;
    }
    r.waits.push({ from: r.admittedAt, to: ready, cls: 'resource', title: `waited ${fmtDur(ready - r.admittedAt)} for ${why}` });
  }
  if (!Number.isNaN(r.readyAt) && r.gatedAt > r.readyAt) {
    r.waits.push({ from: r.readyAt, to: r.gatedAt, cls: 'cap', title: `waited ${fmtDur(r.gatedAt - r.readyAt)} for a max_concurrency place of ${r.name}` });
  }
}

function ticks(t0, end, width) {
  const span = end - t0;
  const steps = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 10e3, 30e3, 60e3, 120e3, 300e3, 600e3, 1800e3, 3600e3, 7200e3, 21600e3, 86400e3];
  const step = steps.find((x) => span / x <= Math.max(2, Math.floor(width / 90))) || steps[steps.length - 1];
  const out = [];
  for (let t = 0; t <= span; t += step) out.push(t);
  return out;
}

// render draws the model; selected is the row index whose details are
// open, onSelect is told of a click on a row.
export function render(model, width, selected, onSelect) {
  const { t0, end, rows } = model;
  const W = Math.max(200, width);
  const x = (t) => Math.max(0, Math.min(W, ((t - t0) / (end - t0)) * W));
  // bar is a bar's left edge and width: at least 2 px, kept inside the axis.
  const bar = (from, to) => { const x1 = Math.min(x(from), W - 2); return [x1, Math.max(x(to), x1 + 2) - x1]; };
  const H = AXIS + rows.length * ROW;

  const svg = s('svg', { class: 'lanes', width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': 'wave timeline' });
  const axis = s('g', { class: 'axis' });
  for (const t of ticks(t0, end, W)) {
    const px = x(t0 + t);
    axis.append(s('line', { x1: px, x2: px, y1: AXIS - 6, y2: H, class: 'tick' }));
    axis.append(s('text', { x: Math.min(px + 2, W - 40), y: AXIS - 10, class: 'ticklabel' }, fmtDur(t)));
  }
  svg.append(axis);

  rows.forEach((r, i) => {
    const y = AXIS + i * ROW;
    const g = s('g', { class: 'lane' + (i === selected ? ' selected' : ''), dataset: { index: i } });
    g.append(s('rect', { x: 0, y, width: W, height: ROW, class: 'lanebg' }));
    const by = y + (ROW - BAR) / 2;
    r.segments.forEach((seg, k) => {
      const [x1, bw] = bar(seg.from, seg.to);
      let colour = r.outcome, outcomeOf = r.outcome, title = r.outcome;
      if (seg.cls === 'try') {
        colour = tryClass(seg.outcome);
        outcomeOf = seg.outcome;
        title = `attempt ${k + 1} of ${r.segments.length}: ${seg.outcome}`;
      } else if (seg.cls === 'retry') {
        colour = outcomeOf = 'retry';
        title = `attempt ${k + 1} (retried)`;
      } else if (seg.cls === 'attempt') {
        colour = 'attempt';
      }
      g.append(s('rect', {
        x: x1, y: by, width: bw, height: BAR, rx: 2, class: `bar st-${colour}`,
        dataset: { kind: 'attempt', call: r.index, attempt: k + 1, outcome: outcomeOf },
      }, s('title', null, `${r.id}: ${title} ${fmtDur(seg.to - seg.from)}` +
        (r.alongside.length ? ` · ran at once with ${r.alongside.join(', ')}` : ''))));
    });
    for (const w of r.waits) {
      const [x1, bw] = bar(w.from, w.to);
      g.append(s('rect', {
        x: x1, y: by + BAR / 2 - 1.5, width: bw, height: 3, class: 'wait wait-' + w.cls,
        dataset: { kind: 'wait', call: r.index, on: w.cls },
      }, s('title', null, `${r.id}: ${w.title}`)));
    }
    if (r.span) {
      const sp = r.span;
      const [x1, bw] = bar(sp.from, sp.to);
      const why = sp.approval ? ' for approval' + (sp.rule ? ` (${sp.rule})` : '') : '';
      g.append(s('rect', {
        x: x1, y: by + 3, width: bw, height: BAR - 6, class: 'span' + (sp.approval ? ' approval' : '') + (sp.open ? ' open' : ''),
        dataset: { kind: sp.approval ? 'approval' : 'pending', call: r.index, open: sp.open },
      }, s('title', null, sp.open ? `waiting${why} ${fmtDur(model.now - sp.from)}` : `waited${why} ${fmtDur(sp.to - sp.from)}`)));
      if (sp.open) {
        // The clocks ahead of the span: drawn where they fall on the axis,
        // or pinned to its end (and said in words) when they fall beyond.
        const words = [];
        for (const [what, at, inset] of [['deadline', sp.deadline, 1], ['heartbeat', sp.heartbeat, 5]]) {
          if (Number.isNaN(at)) continue;
          const px = at > end ? W - inset : x(at);
          g.append(s('line', { x1: px, x2: px, y1: y + 2, y2: y + ROW - 2, class: 'deadline ' + what, dataset: { kind: what, call: r.index } }));
          words.push(`${what} in ${fmtDur(at - model.now)}`);
        }
        if (words.length) {
          g.append(s('text', { x: W - 8, y: y + ROW - 7, class: 'deadlinelabel', 'text-anchor': 'end' }, words.join(' · ')));
        }
      }
    }
    if (r.decision && !Number.isNaN(r.decision.at)) {
      const dec = r.decision;
      const px = Math.min(x(dec.at), W - 1);
      g.append(s('line', { x1: px, x2: px, y1: y + 1, y2: y + ROW - 1, class: 'decision ' + dec.decision, dataset: { kind: 'decision', call: r.index, decision: dec.decision } },
        s('title', null, `${r.id}: ${decisionText(dec)}`)));
    }
    g.addEventListener('click', () => onSelect(i));
    svg.append(g);
  });

  if (!Number.isNaN(model.streamEnd)) {
    // Labelled to the left of the line, the serial marker's to its right.
    const px = x(model.streamEnd);
    svg.append(s('line', { x1: px, x2: px, y1: AXIS - 4, y2: H, class: 'streamend', dataset: { kind: 'stream-end' } },
      s('title', null, 'the stream ended: the turn was received whole')));
    svg.append(s('text', { x: Math.max(px - 3, 60), y: AXIS - 1, class: 'streamendlabel', 'text-anchor': 'end' }, 'stream end'));
  }
  if (!Number.isNaN(model.serialAt)) {
    const px = x(model.serialAt);
    svg.append(s('line', { x1: px, x2: px, y1: AXIS - 4, y2: H, class: 'serial', dataset: { kind: 'serial' } }));
    svg.append(s('text', { x: px + 3, y: AXIS - 1, class: 'seriallabel' }, 'serial from here'));
  }

  const labels = h('div', { class: 'labels', style: null },
    h('div', { class: 'labelhead' }, h('span', null, '#'), h('span', null, 'call'), h('span', null, 'tool'), h('span', null, 'outcome')),
    rows.map((r, i) => {
      const res = r.result;
      const badges = [];
      if (res && res.truncated) {
        badges.push(h('span', { class: 'badge trunc', title: 'the output was projected to the budget' },
          `truncated ${fmtBytes(res.original_bytes)} / ${res.original_lines} lines`));
      }
      if (res && res.attempts > 1) badges.push(h('span', { class: 'badge' }, `×${res.attempts}`));
      if (r.resources && r.resources.length) {
        const more = r.resources.length > 1 ? ` +${r.resources.length - 1}` : '';
        badges.push(h('span', { class: 'badge res', title: 'resources: ' + r.resources.join(', ') }, r.resources[0] + more));
      }
      if (r.decision) {
        // A rejected call's outcome says rejected already: its badge says who.
        const dec = r.decision;
        const text = dec.decision === 'rejected' ? (dec.by ? 'by ' + dec.by : '') : dec.decision + (dec.edited ? ' (edited)' : '');
        if (text) badges.push(h('span', { class: 'badge decision ' + dec.decision, title: decisionText(dec), dataset: { kind: 'decision' } }, text));
      }
      if (r.progress) {
        badges.push(h('span', { class: 'badge progress', title: r.progress.message || 'progress', dataset: { kind: 'progress' } }, progressText(r.progress)));
      }
      const row = h('div', { class: 'label' + (i === selected ? ' selected' : ''), dataset: { index: i, callId: r.id }, tabindex: 0 },
        h('span', { class: 'idx' }, String(i)),
        h('span', { class: 'cid', title: r.id }, r.id),
        h('span', { class: 'tool' }, r.name, r.effect ? h('small', null, ' ' + r.effect) : null),
        h('span', { class: 'out' }, h('span', { class: 'dot st-' + r.outcome }), r.outcome, badges));
      row.addEventListener('click', () => onSelect(i));
      row.addEventListener('keydown', (e) => { if (e.key === 'Enter') onSelect(i); });
      return row;
    }));
  return h('div', { class: 'timeline' }, labels, h('div', { class: 'lanewrap' }, svg));
}

// decisionText says a call_decided line in words: "rejected by alice:
// not on Fridays", "approved with edited arguments".
export function decisionText(dec) {
  return dec.decision + (dec.by ? ' by ' + dec.by : '') + (dec.edited ? ' with edited arguments' : '') + (dec.message ? ': ' + dec.message : '');
}

// progressText is a call_progress event's numbers as the timeline shows
// them: "2/5 (40%)", or the bare count when the total is unknown.
export function progressText(p) {
  if (p.total > 0) return `${p.progress}/${p.total} (${Math.round((100 * p.progress) / p.total)}%)`;
  return String(p.progress);
}

export const LEGEND = ['ok', 'error', 'refused', 'rejected', 'replayed', 'cancelled', 'timed_out', 'interrupted', 'pending', 'awaiting_approval', 'retry'];
