package main

// The approvals page and the timeline of calls held for approval, in
// headless Chromium against a real `turnd serve`: all three decisions
// (approve, edit then approve, reject) driven through the page, the
// problems a decision can meet shown on it, and the arguments (model
// output) shown as text only.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// approvalTools serves `save`, a write whose every call waits for
// approval; ran receives the arguments of each call it runs, by call id.
type approvalTools struct {
	url string
	ran chan savedCall
}

type savedCall struct {
	CallID    string          `json:"call_id"`
	Arguments json.RawMessage `json:"arguments"`
}

func newApprovalTools(t *testing.T) *approvalTools {
	t.Helper()
	at := &approvalTools{ran: make(chan savedCall, 16)}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /save", func(w http.ResponseWriter, r *http.Request) {
		var c savedCall
		_ = json.NewDecoder(r.Body).Decode(&c)
		at.ran <- c
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"output": {"saved": true}}`)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	at.url = srv.URL
	return at
}

func (at *approvalTools) config(t *testing.T) string {
	return writeFile(t, t.TempDir(), "tools.yaml", `builtin: [echo]
tools:
  - name: save
    effect: write
    approval: always
    input_schema: {type: object, required: [path], properties: {path: {type: string}, note: {type: string}}}
    http: {url: "`+at.url+`/save", timeout: 5s}
`)
}

// next is the next call the tool ran.
func (at *approvalTools) next(t *testing.T) savedCall {
	t.Helper()
	select {
	case c := <-at.ran:
		return c
	case <-time.After(settleTimeout):
		t.Fatal("the approved call's tool never ran")
		return savedCall{}
	}
}

// noRun checks that the tool ran no call (of those it was sent so far).
func (at *approvalTools) noRun(t *testing.T, why string) {
	t.Helper()
	select {
	case c := <-at.ran:
		t.Errorf("%s, yet the tool ran call %s with %s", why, c.CallID, c.Arguments)
	default:
	}
}

// waitApprovals polls GET /v1/approvals until it lists n calls.
func waitApprovals(t *testing.T, p *proc, n int) {
	t.Helper()
	poll(t, settleTimeout, func() error {
		resp, body := p.do("GET", "/v1/approvals", nil)
		if resp.StatusCode != 200 {
			return fmt.Errorf("GET /v1/approvals: %d %s", resp.StatusCode, body)
		}
		var page struct{ Approvals []json.RawMessage }
		if err := json.Unmarshal(body, &page); err != nil || len(page.Approvals) != n {
			return fmt.Errorf("GET /v1/approvals lists %d calls, want %d (%v): %s", len(page.Approvals), n, err, body)
		}
		return nil
	})
}

// card is the selector of the approval card of a call.
func card(callID string) string { return fmt.Sprintf(`.approval[data-call=%q]`, callID) }

// setValue sets a form field's value as typing would (input and change).
func (tb *tab) setValue(sel, v string) {
	tb.t.Helper()
	tb.eval(fmt.Sprintf(`(() => { const e = document.querySelector(%q); e.value = %q;
		e.dispatchEvent(new Event('input')); e.dispatchEvent(new Event('change')); return true; })()`, sel, v), nil)
}

func (tb *tab) click(sel string) {
	tb.t.Helper()
	tb.eval(fmt.Sprintf(`document.querySelector(%q).click(), true`, sel), nil)
}

func (tb *tab) text(sel string) string {
	tb.t.Helper()
	var s string
	tb.eval(fmt.Sprintf(`(document.querySelector(%q) || {}).textContent || ''`, sel), &s)
	return s
}

// TestUIApprovals: four calls held for approval. On the approvals page
// one is approved as posted, one approved with edited arguments (after
// the page refused text that is not JSON and the server arguments that
// fail the tool's schema), one rejected with a message, and the fourth,
// decided elsewhere meanwhile, shows the server's already_decided. The
// tool runs exactly the approved calls, with the edited arguments where
// edited; the timelines show the wait and the decision. On both stores.
func TestUIApprovals(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			br := newBrowser(t)
			at := newApprovalTools(t)
			p := startTurnd(t, procOptions{args: append([]string{"--config", at.config(t)}, b.args(t)...)})
			for _, id := range []string{"approve", "edit", "reject", "race"} {
				p.must(202, "POST", "/v1/sessions/appr/turns", fmt.Sprintf(`{"id":"t-%s","calls":[
					{"id":"c-%s","name":"save","arguments":{"path":"%s.txt","note":%q}}]}`, id, id, id, xssPayloads[1]), "Prefer", "respond-async")
				// One after the other: the listing's newest first is then t-race first.
				poll(t, settleTimeout, func() error {
					var tj turnJSON
					if err := json.Unmarshal(p.must(200, "GET", "/v1/sessions/appr/turns/t-"+id, nil), &tj); err != nil || tj.Status != "waiting" {
						return fmt.Errorf("turn t-%s: %s (%v), want waiting", id, tj.Status, err)
					}
					return nil
				})
			}
			waitApprovals(t, p, 4)
			at.noRun(t, "no call was approved")

			// A waiting call's timeline: the open wait for approval.
			tb := br.tab(t)
			tb.open(p.base + "/ui/#/turn/appr/t-approve")
			tb.waitFor("the open wait for approval", `!!document.querySelector('rect[data-kind="approval"][data-call="0"][data-open="true"]')`, 20*time.Second)
			if got := tb.text(`.label[data-index="0"] .out`); !strings.Contains(got, "awaiting_approval") {
				t.Errorf("the waiting call's outcome reads %q, want awaiting_approval", got)
			}
			tb.screenshot("timeline-awaiting-approval-" + b.name)

			tb.route("#/approvals")
			tb.waitFor("four approval cards", `document.querySelectorAll('.approval').length === 4`, 10*time.Second)
			var order []string
			tb.eval(`[...document.querySelectorAll('.approval')].map((e) => e.dataset.call)`, &order)
			if want := []string{"c-race", "c-reject", "c-edit", "c-approve"}; strings.Join(order, ",") != strings.Join(want, ",") {
				t.Errorf("cards in order %v, want newest first %v", order, want)
			}
			if rule := tb.text(card("c-edit") + " .rule"); rule == "" || rule == "—" {
				t.Errorf("the card does not say why the call waits (rule %q)", rule)
			}
			if args := tb.text(card("c-edit") + " pre.args"); !strings.Contains(args, `"path": "edit.txt"`) || !strings.Contains(args, "onerror") {
				t.Errorf("the card's arguments read %q", args)
			}
			tb.setValue("#decide-by", "alice")
			markupCheck(t, tb, "the approvals page")
			tb.screenshot("approvals-" + b.name)

			// Approve, as posted.
			tb.click(card("c-approve") + " button.approve")
			tb.waitFor("the approval taken", `!!document.querySelector('.approval.decided[data-call="c-approve"][data-decision="approved"]')`, 10*time.Second)
			if got := at.next(t); got.CallID != "c-approve" || !strings.Contains(string(got.Arguments), `"path":"approve.txt"`) {
				t.Errorf("the approved call ran as %s with %s", got.CallID, got.Arguments)
			}

			// Edit: text that is not JSON, then arguments the tool's
			// schema refuses, then good ones.
			tb.click(card("c-edit") + " button.edit")
			tb.waitFor("the editor", `!!document.querySelector('.approval[data-call="c-edit"] textarea.args-editor')`, 5*time.Second)
			var posted string
			tb.eval(`document.querySelector('.approval[data-call="c-edit"] textarea.args-editor').value`, &posted)
			if !strings.Contains(posted, `"path": "edit.txt"`) {
				t.Errorf("the editor starts with %q, want the posted arguments", posted)
			}
			tb.setValue(card("c-edit")+" textarea.args-editor", `{"path": "oops"`)
			tb.click(card("c-edit") + " button.confirm-edit")
			tb.waitFor("the page's JSON error", `document.querySelector('.approval[data-call="c-edit"] .decision-status').textContent.includes('not JSON')`, 5*time.Second)
			tb.setValue(card("c-edit")+" textarea.args-editor", `{"path": 7}`)
			tb.click(card("c-edit") + " button.confirm-edit")
			tb.waitFor("the server's invalid_arguments", `document.querySelector('.approval[data-call="c-edit"]').dataset.problem === 'invalid_arguments' && !document.querySelector('.approval[data-call="c-edit"] button.confirm-edit').disabled`, 10*time.Second)
			tb.screenshot("approvals-invalid-arguments-" + b.name)
			at.noRun(t, "the edited arguments were refused")
			tb.setValue(card("c-edit")+" textarea.args-editor", `{"path": "edited.txt", "note": "checked"}`)
			tb.click(card("c-edit") + " button.confirm-edit")
			tb.waitFor("the edited approval taken", `!!document.querySelector('.approval.decided[data-call="c-edit"][data-decision="approved"]')`, 10*time.Second)
			if got := tb.text(card("c-edit") + " .decision-status"); !strings.Contains(got, "edited") {
				t.Errorf("the edited approval reads %q", got)
			}
			if got := at.next(t); got.CallID != "c-edit" || !strings.Contains(string(got.Arguments), `"path":"edited.txt"`) {
				t.Errorf("the edited call ran as %s with %s, want path edited.txt", got.CallID, got.Arguments)
			}

			// Reject: the page wants a message.
			const message = `Not today: <b>use the staging copy</b>`
			tb.click(card("c-reject") + " button.reject")
			tb.waitFor("the message field", `!!document.querySelector('.approval[data-call="c-reject"] textarea.reject-message')`, 5*time.Second)
			tb.click(card("c-reject") + " button.confirm-reject")
			tb.waitFor("the page asking for a message", `document.querySelector('.approval[data-call="c-reject"] .decision-status').textContent.includes('Say why')`, 5*time.Second)
			tb.setValue(card("c-reject")+" textarea.reject-message", message)
			tb.click(card("c-reject") + " button.confirm-reject")
			tb.waitFor("the rejection taken", `!!document.querySelector('.approval.decided[data-call="c-reject"][data-decision="rejected"]')`, 10*time.Second)

			// Decided elsewhere while the page showed it: the server's
			// already_decided, shown, and the card closed.
			p.must(200, "POST", "/v1/sessions/appr/turns/t-race/calls/c-race/decision", `{"decision":"reject","message":"no","by":"bob"}`)
			tb.click(card("c-race") + " button.approve")
			tb.waitFor("already_decided on the card", `document.querySelector('.approval[data-call="c-race"]').dataset.problem === 'already_decided' && document.querySelector('.approval.closed[data-call="c-race"]') && !document.querySelector('.approval[data-call="c-race"] button')`, 10*time.Second)
			if got := tb.text(card("c-race") + " .decision-status"); !strings.Contains(got, "409") || !strings.Contains(got, "already_decided") {
				t.Errorf("the race's card reads %q, want the 409 already_decided", got)
			}
			tb.screenshot("approvals-decided-" + b.name)
			at.noRun(t, "the other calls were rejected")

			// Nothing waits any more.
			tb.click("#refresh")
			tb.waitFor("the empty list", `!!document.getElementById('no-approvals') && !document.querySelector('.approval')`, 10*time.Second)

			// The turns: the rejected call's result carries the message;
			// the ledger has who decided.
			var rejected turnJSON
			poll(t, settleTimeout, func() error {
				rejected = decode[turnJSON](t, p.must(200, "GET", "/v1/sessions/appr/turns/t-reject", nil))
				if rejected.SettledAt == nil {
					return fmt.Errorf("t-reject is %s, not settled", rejected.Status)
				}
				return nil
			})
			var out struct {
				Rejected bool   `json:"rejected"`
				Message  string `json:"message"`
			}
			if r := rejected.Results[0]; r.Status != "rejected" || json.Unmarshal(r.Output, &out) != nil || !out.Rejected || out.Message != message {
				t.Errorf("the rejected call's result: %s %s", r.Status, r.Output)
			}
			var ledger struct {
				Lines []struct {
					Kind   string          `json:"kind"`
					CallID *string         `json:"call_id"`
					Data   json.RawMessage `json:"data"`
				} `json:"lines"`
			}
			if err := json.Unmarshal(p.must(200, "GET", "/v1/sessions/appr/ledger?limit=500", nil), &ledger); err != nil {
				t.Fatal(err)
			}
			decided := map[string]string{}
			for _, l := range ledger.Lines {
				if l.Kind == "call_decided" && l.CallID != nil {
					decided[*l.CallID] = string(l.Data)
				}
			}
			for call, want := range map[string][]string{
				"c-approve": {`"approved"`, `"alice"`},
				"c-edit":    {`"approved"`, `"edited":true`, `edited.txt`},
				"c-reject":  {`"rejected"`, `"alice"`, `staging copy`},
				"c-race":    {`"rejected"`, `"bob"`},
			} {
				for _, w := range want {
					if !strings.Contains(decided[call], w) {
						t.Errorf("call_decided of %s: %q lacks %s", call, decided[call], w)
					}
				}
			}

			// The timelines: the closed wait, the decision's marker, and
			// the approved tool's run after it.
			tb.route("#/turn/appr/t-edit")
			tb.waitFor("the decided timeline", `!!document.querySelector('rect[data-kind="approval"][data-call="0"][data-open="false"]') && !!document.querySelector('line[data-kind="decision"][data-decision="approved"]') && !document.getElementById('live')`, 20*time.Second)
			var geo struct{ Wait, Decision, Run struct{ L, R float64 } }
			tb.eval(`(() => {
				const box = (sel) => { const r = document.querySelector(sel).getBoundingClientRect(); return {L: r.left, R: r.right}; };
				return {
					Wait: box('rect[data-kind="approval"][data-call="0"]'),
					Decision: box('line[data-kind="decision"][data-call="0"]'),
					Run: box('rect[data-kind="attempt"][data-call="0"]'),
				};
			})()`, &geo)
			if geo.Run.L < geo.Decision.L-2 || geo.Wait.R > geo.Decision.R+2 {
				t.Errorf("the wait (%.1f–%.1f), the decision (%.1f) and the run (%.1f–%.1f) are not in that order", geo.Wait.L, geo.Wait.R, geo.Decision.L, geo.Run.L, geo.Run.R)
			}
			if got := tb.text(`.label[data-index="0"] .badge.decision`); got != "approved (edited)" {
				t.Errorf("the decision badge reads %q", got)
			}
			tb.click(`.label[data-index="0"]`)
			tb.waitFor("the call's details", `!!document.getElementById('detail-edited-args') && document.getElementById('detail-approval').textContent.includes('alice')`, 5*time.Second)
			if got := tb.text("#detail-edited-args"); !strings.Contains(got, "edited.txt") {
				t.Errorf("the edited arguments read %q", got)
			}
			tb.screenshot("timeline-approved-edited-" + b.name)

			tb.route("#/turn/appr/t-reject")
			tb.waitFor("the rejected timeline", `!!document.querySelector('line[data-kind="decision"][data-decision="rejected"]') && document.getElementById('turn-status') && !document.getElementById('live')`, 20*time.Second)
			if got := tb.text(`.label[data-index="0"] .out`); !strings.Contains(got, "rejected") {
				t.Errorf("the rejected call's outcome reads %q", got)
			}
			tb.click(`.label[data-index="0"]`)
			tb.waitFor("the rejection's details", `document.getElementById('detail-output').textContent.includes('staging copy')`, 5*time.Second)
			tb.screenshot("timeline-rejected-" + b.name)

			markupCheck(t, tb, "the rejected call's timeline")
			if d := tb.dialogsSeen(); len(d) > 0 {
				t.Errorf("the pages opened dialogs: %q", d)
			}
		})
	}
}

// markupCheck fails the test if model output on the page (arguments
// with an <img onerror>, a message with <b>) became markup or ran.
func markupCheck(t *testing.T, tb *tab, where string) {
	t.Helper()
	var got struct {
		XSS     any
		Images  int
		Bold    int
		Scripts int
	}
	tb.eval(`({XSS: window.__xss === undefined ? null : window.__xss, Images: document.querySelectorAll('img').length,
		Bold: document.querySelectorAll('b').length, Scripts: document.scripts.length})`, &got)
	if got.XSS != nil || got.Images != 0 || got.Bold != 0 || got.Scripts != 1 {
		t.Errorf("%s: model output took effect as markup: %+v", where, got)
	}
}

// TestUIApprovalExpired: a call whose wait for approval ended while the
// page showed it: approving it shows the server's 410 approval_expired on
// its card, which closes, and the late decision is in the ledger. (The
// tool is deferred only because a tool's pending: options, the approval's
// deadline among them, are for deferred tools.)
func TestUIApprovalExpired(t *testing.T) {
	t.Parallel()
	br := newBrowser(t)
	at := newApprovalTools(t)
	config := writeFile(t, t.TempDir(), "tools.yaml", `tools:
  - name: save_soon
    effect: write
    approval: always
    deferred: true
    pending: {deadline: 5s}
    http: {url: "`+at.url+`/save", timeout: 5s}
`)
	p := startTurnd(t, procOptions{args: []string{"--config", config, "--data", filepath.Join(t.TempDir(), "t.db")}})
	p.must(202, "POST", "/v1/sessions/late/turns", `{"id":"t-late","calls":[{"id":"c-late","name":"save_soon","arguments":{}}]}`, "Prefer", "respond-async")
	waitApprovals(t, p, 1)
	tb := br.tab(t)
	tb.open(p.base + "/ui/#/approvals")
	tb.waitFor("the card (within the call's 5 s deadline)", `!!document.querySelector('.approval[data-call="c-late"] button.approve')`, 10*time.Second)
	poll(t, settleTimeout, func() error {
		if tj := decode[turnJSON](t, p.must(200, "GET", "/v1/sessions/late/turns/t-late", nil)); tj.SettledAt == nil {
			return fmt.Errorf("t-late is %s: its wait has not ended", tj.Status)
		}
		return nil
	})
	tb.click(card("c-late") + " button.approve")
	tb.waitFor("approval_expired on the card", `document.querySelector('.approval[data-call="c-late"]').dataset.problem === 'approval_expired' && !!document.querySelector('.approval.closed[data-call="c-late"]')`, 10*time.Second)
	if got := tb.text(card("c-late") + " .decision-status"); !strings.Contains(got, "410 approval_expired") || !strings.Contains(got, "decision_late") {
		t.Errorf("the expired card reads %q", got)
	}
	tb.screenshot("approvals-expired")
	at.noRun(t, "the approval came too late")
	if ledger := string(p.must(200, "GET", "/v1/sessions/late/ledger?limit=500", nil)); !strings.Contains(ledger, `"decision_late"`) {
		t.Errorf("no decision_late line in the ledger:\n%s", ledger)
	}
	if got := decode[turnJSON](t, p.must(200, "GET", "/v1/sessions/late/turns/t-late", nil)); got.Results[0].Status != "timed_out" {
		t.Errorf("the expired call's result is %s, want timed_out", got.Results[0].Status)
	}
}
