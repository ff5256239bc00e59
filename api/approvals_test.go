package api_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/turnd/turnd/internal/teststores"
	"github.com/turnd/turnd/turn"
)

// approvalTools are the stack's extra tools: rm needs approval (and has a
// schema), peek is a read that needs approval too.
const approvalTools = `
  - name: rm
    effect: write
    approval: always
    input_schema: {type: object, properties: {path: {type: string}}, required: [path]}
    http: {url: "{{TOOLS}}/search", timeout: 5s}
  - name: peek
    effect: read
    approval: {when: [{pointer: /q, matches: "^secret"}]}
    http: {url: "{{TOOLS}}/search", timeout: 5s}
`

type approvalRow struct {
	SessionID string          `json:"session_id"`
	TurnID    string          `json:"turn_id"`
	CallID    string          `json:"call_id"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	Rule      string          `json:"rule"`
}

func TestApprovalsOverHTTP(t *testing.T) {
	t.Parallel()
	teststores.Each(t, func(t *testing.T, open func(testing.TB) turn.Store) {
		s := newStack(t, open, stackOptions{yaml: approvalTools})
		r := s.do("POST", "/v1/sessions/s/turns", `{"id":"t","calls":[{"id":"a","name":"peek","arguments":{"q":"docs"}},{"id":"b","name":"peek","arguments":{"q":"secret plans"}},{"id":"c","name":"rm","arguments":{"path":"/tmp/x"}},{"id":"d","name":"search","arguments":{"q":"after"}}]}`)
		var tr wireTurn
		r.json(t, &tr)
		if r.status != 202 || tr.Status != "waiting" || summary(tr) != "a=ok b=pending c=pending d=ok" {
			t.Fatalf("post: %d %s %s", r.status, tr.Status, summary(tr))
		}
		searches := s.tools.searches.Load()
		var page struct {
			Approvals []approvalRow `json:"approvals"`
			NextAfter string        `json:"next_after"`
		}
		l := s.do("GET", "/v1/approvals?limit=1", nil)
		l.json(t, &page)
		if l.status != 200 || len(page.Approvals) != 1 || page.NextAfter == "" {
			t.Fatalf("approvals page 1: %d %s", l.status, l.body)
		}
		l = s.do("GET", "/v1/approvals?limit=1&after="+page.NextAfter, nil)
		first := page.Approvals[0]
		page.Approvals = nil
		l.json(t, &page)
		if l.status != 200 || len(page.Approvals) != 1 || page.NextAfter != "" || page.Approvals[0].CallID == first.CallID {
			t.Fatalf("approvals page 2: %d %s", l.status, l.body)
		}
		if bad := s.do("GET", "/v1/approvals?after=nonsense", nil); bad.status != 400 {
			t.Fatalf("bad cursor: %d %s", bad.status, bad.body)
		}
		path := "/v1/sessions/s/turns/t/calls/"
		for _, tc := range []struct {
			name, call, body string
			status           int
			code             string
		}{
			{"malformed", "c", `{"decision":`, 400, "malformed_json"},
			{"unknown field", "c", `{"decision":"approve","mesage":"x"}`, 400, "invalid_request"},
			{"unknown decision", "c", `{"decision":"maybe"}`, 422, "invalid_request"},
			{"no decision", "c", `{}`, 422, "invalid_request"},
			{"arguments with reject", "c", `{"decision":"reject","arguments":{}}`, 422, "invalid_request"},
			{"arguments not an object", "c", `{"decision":"approve","arguments":[1]}`, 422, "invalid_request"},
			{"edited arguments invalid", "c", `{"decision":"approve","arguments":{"path":1}}`, 422, "invalid_arguments"},
			{"edited arguments missing a field", "c", `{"decision":"approve","arguments":{}}`, 422, "invalid_arguments"},
			{"message too long", "c", `{"decision":"reject","message":"` + strings.Repeat("m", 5000) + `"}`, 422, "invalid_request"},
			{"a call that needs none", "a", `{"decision":"approve"}`, 409, "not_awaiting_approval"},
			{"no such call", "zz", `{"decision":"approve"}`, 404, "not_found"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := s.do("POST", path+tc.call+"/decision", tc.body)
				if r.status != tc.status || r.code(t) != tc.code {
					t.Fatalf("%d %s, want %d %s", r.status, r.body, tc.status, tc.code)
				}
			})
		}
		if n := s.tools.searches.Load(); n != searches {
			t.Fatalf("refused decisions ran %d tool calls", n-searches)
		}
		if r := s.do("POST", "/v1/sessions/nope/turns/t/calls/c/decision", `{"decision":"approve"}`); r.status != 404 {
			t.Fatalf("unknown session: %d %s", r.status, r.body)
		}
		// Reject b, approve c with edited arguments.
		var res struct {
			Decision, Status string
			Edited           bool
		}
		r = s.do("POST", path+"b/decision", `{"decision":"reject","message":"not the secrets","by":"ana"}`)
		r.json(t, &res)
		if r.status != 200 || res.Decision != "rejected" || res.Status != "accepted" {
			t.Fatalf("reject: %d %s", r.status, r.body)
		}
		r = s.do("POST", path+"c/decision", `{"decision":"approve","arguments":{"path":"/tmp/y"}}`)
		r.json(t, &res)
		if r.status != 200 || res.Decision != "approved" || !res.Edited {
			t.Fatalf("approve: %d %s", r.status, r.body)
		}
		g := s.do("GET", "/v1/sessions/s/turns/t", nil, "Prefer", "wait=10")
		g.json(t, &tr)
		if tr.Status != "completed" || summary(tr) != "a=ok b=rejected c=ok d=ok" {
			t.Fatalf("after decisions: %s %s (%s)", tr.Status, summary(tr), g.body)
		}
		if !strings.Contains(string(g.body), `"rejected":true`) || !strings.Contains(string(g.body), `not the secrets`) {
			t.Fatalf("b's output is not the rejection: %s", g.body)
		}
		if r := s.do("POST", path+"c/decision", `{"decision":"reject"}`); r.status != 409 || r.code(t) != "already_decided" {
			t.Fatalf("second decision: %d %s", r.status, r.body)
		}
		if r := s.do("POST", path+"c/decision", `{"decision":"approve","arguments":{"path":"/tmp/y"},"by":"bo"}`); r.status != 200 {
			t.Fatalf("repeat: %d %s", r.status, r.body)
		}
		led := s.do("GET", "/v1/sessions/s/ledger", nil)
		for _, want := range []string{`"call_decided"`, `"original_arguments":{"path":"/tmp/x"}`, `"reason":"approval"`} {
			if !strings.Contains(string(led.body), want) {
				t.Errorf("ledger lacks %s", want)
			}
		}
	})
}

func TestSessionApprovalOverHTTP(t *testing.T) {
	t.Parallel()
	s := stackOn(t, teststores.SQLite(t), stackOptions{yaml: approvalTools})
	r := s.do("POST", "/v1/sessions", `{"id":"strict","approval":{"tools":["search"]}}`)
	if r.status != 201 || !strings.Contains(string(r.body), `"approval":{"tools":["search"]}`) {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	for _, bad := range []string{`{"approval":"sometimes"}`, `{"approval":{"tools":["nope"]}}`, `{"approval":{"when":[{"pointer":"q","equals":1}]}}`} {
		if r := s.do("POST", "/v1/sessions", bad); r.status != 422 || r.code(t) != "invalid_request" {
			t.Errorf("%s: %d %s", bad, r.status, r.body)
		}
	}
	r = s.do("POST", "/v1/sessions/strict/turns", `{"id":"t","calls":[{"id":"a","name":"search","arguments":{"q":"x"}}]}`)
	var tr wireTurn
	r.json(t, &tr)
	if summary(tr) != "a=pending" {
		t.Fatalf("the session's policy did not apply: %s", r.body)
	}
	tools := s.do("GET", "/v1/tools", nil)
	if !strings.Contains(string(tools.body), `"approval":"always"`) || !strings.Contains(string(tools.body), `"approval":{"when":[{"pointer":"/q","matches":"^secret"}]}`) {
		t.Fatalf("GET /v1/tools does not show the policies: %s", tools.body)
	}
}
