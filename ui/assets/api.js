// The /v1 API from the same origin. The bearer token, when one is needed,
// lives in sessionStorage and travels only in the Authorization header:
// never in a URL, never in the page.

const TOKEN = 'turnd.token';

export class AuthError extends Error {
  constructor() { super('a valid bearer token is required'); }
}

export function token() { return sessionStorage.getItem(TOKEN) || ''; }
export function setToken(t) {
  if (t) sessionStorage.setItem(TOKEN, t); else sessionStorage.removeItem(TOKEN);
}

const enc = encodeURIComponent;
// listed is a listing's page: limit items after the cursor (none: the first).
const listed = (path, after, limit) => `${path}?limit=${limit}${after ? '&after=' + enc(after) : ''}`;
export const paths = {
  sessions: (after, limit = 50) => listed('/v1/sessions', after, limit),
  session: (sid) => `/v1/sessions/${enc(sid)}`,
  turns: (sid, after, limit = 20) => listed(`/v1/sessions/${enc(sid)}/turns`, after, limit),
  turn: (sid, tid) => `/v1/sessions/${enc(sid)}/turns/${enc(tid)}`,
  calls: (sid, tid) => `/v1/sessions/${enc(sid)}/turns/${enc(tid)}/calls`,
  // progress=true: call_progress events too (the latest progress of running calls).
  events: (sid, tid) => `/v1/sessions/${enc(sid)}/turns/${enc(tid)}/events?progress=true`,
  ledger: (sid, after, limit = 50) => `/v1/sessions/${enc(sid)}/ledger?limit=${limit}&after=${Number(after) || 0}`,
  pending: (after, limit = 100) => listed('/v1/pending', after, limit),
  approvals: (after, limit = 50) => listed('/v1/approvals', after, limit),
  decision: (sid, tid, cid) => `/v1/sessions/${enc(sid)}/turns/${enc(tid)}/calls/${enc(cid)}/decision`,
  output: (id) => `/v1/outputs/${enc(id)}`,
};

function headers(accept) {
  const hd = { Accept: accept };
  const t = token();
  if (t) hd.Authorization = 'Bearer ' + t;
  return hd;
}

// ProblemError is an answer that is not ok: its status, and the problem's
// stable code and detail when the body is one.
export class ProblemError extends Error {
  constructor(status, code, detail) {
    super(`${status}${code ? ' ' + code : ''}: ${detail}`);
    this.status = status;
    this.code = code;
    this.detail = detail;
  }
}

async function failure(r) {
  if (r.status === 401) return new AuthError();
  let detail = r.statusText, code = '';
  try {
    const p = await r.json();
    if (p && p.detail) detail = String(p.detail);
    if (p && p.code) code = String(p.code);
  } catch { /* not JSON */ }
  return new ProblemError(r.status, code, detail);
}

// request fetches path (never cached, never with cookies) and answers the
// response, or throws the failure of one that is not ok.
async function request(path, hd, signal) {
  const r = await fetch(path, { headers: hd, cache: 'no-store', credentials: 'omit', signal });
  if (!r.ok) throw await failure(r);
  return r;
}

// get reads a JSON answer.
export async function get(path, signal) {
  return (await request(path, headers('application/json'), signal)).json();
}

// post sends body (JSON text, sent as it is) and reads the JSON answer.
export async function post(path, body, signal) {
  const hd = headers('application/json');
  hd['Content-Type'] = 'application/json';
  const r = await fetch(path, { method: 'POST', headers: hd, body, cache: 'no-store', credentials: 'omit', signal });
  if (!r.ok) throw await failure(r);
  return r.json();
}

// text reads an answer as text, at most max characters of it.
export async function text(path, max, signal) {
  const t = await (await request(path, headers('*/*'), signal)).text();
  return t.length > max ? t.slice(0, max) + `\n… (${t.length - max} more characters)` : t;
}

// events reads a Server-Sent Events stream with fetch (so that it carries
// the Authorization header, which EventSource cannot send) and calls
// onEvent with {id, event, data} for each event, data parsed as JSON. It
// resolves when the stream ends.
export async function events(path, lastId, onEvent, signal) {
  const hd = headers('text/event-stream');
  if (lastId) hd['Last-Event-ID'] = String(lastId);
  const r = await request(path, hd, signal);
  const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += value;
    let cut;
    while ((cut = buf.indexOf('\n\n')) >= 0) {
      const block = buf.slice(0, cut);
      buf = buf.slice(cut + 2);
      const ev = { id: '', event: 'message', data: '' };
      for (const line of block.split('\n')) {
        if (line.startsWith(':')) continue;
        const i = line.indexOf(':');
        const field = i < 0 ? line : line.slice(0, i);
        const val = i < 0 ? '' : line.slice(i + 1).replace(/^ /, '');
        if (field === 'id') ev.id = val;
        else if (field === 'event') ev.event = val;
        else if (field === 'data') ev.data += (ev.data ? '\n' : '') + val;
      }
      if (!ev.data) continue;
      try { ev.data = JSON.parse(ev.data); } catch { continue; }
      onEvent(ev);
    }
  }
}
