// The approvals page: the calls the approval policy holds before their
// tool runs, across sessions, newest first, each with its arguments and
// three decisions: Approve, Edit (the JSON arguments, then approve) and
// Reject (with a message the model reads). The arguments are the model's
// output: they are shown as text and edited in a textarea, never parsed
// as markup; edited ones are sent as the text typed, once it parses as a
// JSON object.

import { h, json, fmtTime, fmtDur } from './dom.js';
import { AuthError, get, post, paths } from './api.js';
import { show, link, sessionHref, turnHref, ago, pager } from './page.js';

const BY = 'turnd.by'; // who decides, kept for the tab like the token

// decisionBody is a Decision's JSON text; args is JSON text, sent as it is.
function decisionBody(decision, { args, message, by }) {
  let b = '{"decision":' + JSON.stringify(decision);
  if (args !== undefined) b += ',"arguments":' + args;
  if (message) b += ',"message":' + JSON.stringify(message);
  if (by) b += ',"by":' + JSON.stringify(by);
  return b + '}';
}

// HINTS say what the problems of a decision mean for the person deciding.
const HINTS = {
  not_awaiting_approval: 'The call no longer waits for approval (it was answered or cancelled).',
  already_decided: 'Someone decided this call first.',
  approval_expired: 'Too late: the wait ended without a decision.',
  invalid_arguments: 'The edited arguments do not fit the tool. Nothing ran; fix them and approve again.',
  not_found: 'No such call any more.',
};

// card is one approval with its decisions; byInput names who decides.
function card(a, i, byInput, signal, showError) {
  const now = Date.now();
  const status = h('p', { class: 'decision-status', role: 'status' });
  const actions = h('div', { class: 'actions' });
  const el = h('section', { class: 'approval', dataset: { index: i, session: a.session_id, turn: a.turn_id, call: a.call_id } },
    h('h2', null, h('code', { class: 'tool' }, a.tool), ' · call ', h('code', { class: 'cid' }, a.call_id)),
    h('dl', { class: 'facts' },
      h('dt', null, 'session'), h('dd', null, link(sessionHref(a.session_id), a.session_id)),
      h('dt', null, 'turn'), h('dd', null, link(turnHref(a.session_id, a.turn_id), a.turn_id), ` · call ${a.call_index}`),
      h('dt', null, 'why'), h('dd', { class: 'rule' }, a.rule || '—'),
      h('dt', null, 'waiting'), h('dd', { title: fmtTime(a.requested_at) }, 'since ' + ago(a.requested_at, now)),
      h('dt', null, 'deadline'), h('dd', { title: fmtTime(a.deadline) },
        a.deadline ? `in ${fmtDur(Date.parse(a.deadline) - now)}, then ${a.on_timeout || '—'}` : 'none')),
    h('h3', null, 'Arguments'), h('pre', { class: 'args' }, json(a.arguments)),
    actions, status);

  const say = (text, cls) => { status.className = 'decision-status' + (cls ? ' ' + cls : ''); status.replaceChildren(...[text].flat()); };
  const buttons = (...bs) => actions.replaceChildren(...bs);
  const button = (cls, label, onClick) => h('button', { type: 'button', class: cls, onclick: onClick }, label);

  const send = async (decision, opts, retry) => {
    for (const b of actions.querySelectorAll('button, textarea')) b.disabled = true;
    say('Sending…');
    try {
      const res = await post(paths.decision(a.session_id, a.turn_id, a.call_id),
        decisionBody(decision, { ...opts, by: byInput.value.trim() }), signal);
      el.classList.add('decided');
      el.dataset.decision = res.decision;
      buttons();
      say([`${res.decision}${res.edited ? ' with edited arguments' : ''} (${res.status}) · `,
        link(turnHref(a.session_id, a.turn_id), 'follow the turn')], 'ok ' + res.decision);
    } catch (e) {
      if (e instanceof AuthError || (e && e.name === 'AbortError')) { showError(e); return; }
      const code = e && e.code ? e.code : '';
      el.dataset.problem = code || 'error';
      say([String(e && e.message ? e.message : e), HINTS[code] ? h('br') : null, HINTS[code] || null].filter((x) => x != null), 'error');
      if (code === 'invalid_arguments' || !e.status || e.status >= 500) retry();
      else { el.classList.add('closed'); buttons(); }
    }
  };

  const choose = () => {
    buttons(
      button('approve', 'Approve', () => send('approve', {}, choose)),
      button('edit', 'Edit…', edit),
      button('reject', 'Reject…', reject));
  };
  const edit = () => {
    const area = h('textarea', { class: 'args-editor', rows: 10, cols: 80, spellcheck: 'false', 'aria-label': 'arguments (JSON)' });
    area.value = json(a.arguments === undefined ? {} : a.arguments);
    const retry = () => { for (const b of actions.querySelectorAll('button, textarea')) b.disabled = false; };
    buttons(area, h('div', null,
      button('confirm-edit', 'Approve with these arguments', () => {
        let v;
        try { v = JSON.parse(area.value); } catch (err) { say('The arguments are not JSON: ' + err.message, 'error'); return; }
        if (v === null || typeof v !== 'object' || Array.isArray(v)) { say('The arguments must be a JSON object.', 'error'); return; }
        send('approve', { args: area.value.trim() }, retry);
      }),
      button('cancel', 'Cancel', () => { say(''); choose(); })));
    area.focus();
  };
  const reject = () => {
    const msg = h('textarea', { class: 'reject-message', rows: 3, cols: 80, maxlength: 4096, 'aria-label': 'message for the model',
      placeholder: 'What the model reads instead of the tool\'s output' });
    const retry = () => { for (const b of actions.querySelectorAll('button, textarea')) b.disabled = false; };
    buttons(msg, h('div', null,
      button('confirm-reject', 'Reject', () => {
        const m = msg.value.trim();
        if (!m) { say('Say why: the model reads the message instead of the tool\'s output.', 'error'); return; }
        send('reject', { message: m }, retry);
      }),
      button('cancel', 'Cancel', () => { say(''); choose(); })));
    msg.focus();
  };
  choose();
  return el;
}

export async function approvalsPage(params, signal, showError) {
  const after = params.get('after') || '';
  const data = await get(paths.approvals(after), signal);
  const by = h('input', { id: 'decide-by', size: 24, autocomplete: 'off', spellcheck: 'false', placeholder: 'your name' });
  by.value = sessionStorage.getItem(BY) || '';
  by.addEventListener('change', () => sessionStorage.setItem(BY, by.value.trim()));
  const refresh = h('button', { type: 'button', id: 'refresh' }, 'Refresh');
  refresh.addEventListener('click', () => approvalsPage(params, signal, showError).catch(showError));
  show(
    h('h1', null, 'Approvals'),
    h('p', { class: 'muted' }, 'Calls the approval policy holds before their tool runs, across sessions, newest first. ',
      'Their arguments are the model\'s output: read them before approving.'),
    h('p', { class: 'decider' }, h('label', { for: 'decide-by' }, 'Deciding as '), by, ' ', refresh),
    h('div', { id: 'approvals' }, data.approvals.map((a, i) => card(a, i, by, signal, showError))),
    data.approvals.length ? null : h('p', { class: 'muted', id: 'no-approvals' }, 'Nothing waits for approval.'),
    pager(after ? '#/approvals' : null, data.next_after ? '#/approvals?after=' + encodeURIComponent(data.next_after) : null));
}
