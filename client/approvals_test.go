package client_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/turnd/turnd/client"
)

// guardedTool serves `guarded`, a write whose calls wait for approval;
// ran receives each call it runs as its call id and arguments.
func guardedTool(t *testing.T) (config string, ran chan [2]string) {
	t.Helper()
	ran = make(chan [2]string, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			CallID    string          `json:"call_id"`
			Arguments json.RawMessage `json:"arguments"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		ran <- [2]string{req.CallID, string(req.Arguments)}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"output": {"done": true}}`)
	}))
	t.Cleanup(srv.Close)
	config = filepath.Join(t.TempDir(), "tools.yaml")
	err := os.WriteFile(config, []byte(`builtin: [echo]
tools:
  - name: guarded
    effect: write
    approval: always
    input_schema: {type: object, required: [path], properties: {path: {type: string}}}
    http: {url: "`+srv.URL+`", timeout: 5s}
`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	return config, ran
}

func ranCall(t *testing.T, ran chan [2]string) (id, arguments string) {
	t.Helper()
	select {
	case c := <-ran:
		return c[0], c[1]
	case <-time.After(30 * time.Second):
		t.Fatal("the approved call's tool never ran")
		return "", ""
	}
}

func problemCode(err error) string {
	var e *client.Error
	if errors.As(err, &e) {
		return fmt.Sprintf("%d %s", e.Status, e.Code)
	}
	return fmt.Sprint(err)
}

// TestApprovals: Approvals lists the calls waiting, newest first, page by
// page; Decide approves one as posted, one with edited arguments (after
// the server refused ones the tool's schema does not take), rejects one,
// and reports the refusals as *Error values with their codes.
func TestApprovals(t *testing.T) {
	t.Parallel()
	for _, st := range stores() {
		t.Run(string(st), func(t *testing.T) {
			t.Parallel()
			config, ran := guardedTool(t)
			srv := startServerConfig(t, st, config)
			c := newClient(t, srv.URL)
			ctx := ctxFor(t)
			for _, id := range []string{"ap", "ed", "rj"} {
				turn, err := c.PostTurn(ctx, "appr", client.TurnRequest{ID: id, Calls: []client.Call{
					{ID: "g-" + id, Name: "guarded", Arguments: args(t, map[string]string{"path": id + ".txt"})}}}, &client.PostOptions{Async: true})
				if err != nil {
					t.Fatal(err)
				}
				if turn.Settled() {
					t.Fatalf("turn %s settled at once: %+v", id, turn)
				}
			}
			var waiting []client.Approval
			for deadline := time.Now().Add(30 * time.Second); len(waiting) < 3; {
				waiting = waiting[:0]
				for a, err := range c.Approvals(ctx, client.ListOptions{Limit: 2}) {
					if err != nil {
						t.Fatal(err)
					}
					waiting = append(waiting, a)
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d calls wait for approval, want 3", len(waiting))
				}
				time.Sleep(20 * time.Millisecond) // the server is another process: bounded polling
			}
			var ids []string
			for _, a := range waiting {
				ids = append(ids, a.CallID)
			}
			if strings.Join(ids, ",") != "g-rj,g-ed,g-ap" {
				t.Errorf("approvals in order %v, want newest first", ids)
			}
			if a := waiting[2]; a.SessionID != "appr" || a.TurnID != "ap" || a.Tool != "guarded" || a.Rule == "" || string(a.Arguments) != `{"path":"ap.txt"}` || a.RequestedAt.IsZero() {
				t.Errorf("approval: %+v (arguments %s)", a, a.Arguments)
			}
			if _, err := c.ApprovalsPage(ctx, client.ListOptions{After: "nonsense"}); problemCode(err) != "400 invalid_query" {
				t.Errorf("a bad cursor: %v", err)
			}

			res, err := c.Decide(ctx, "appr", "ap", "g-ap", client.Decision{Decision: client.Approve, By: "go"})
			if err != nil || *res != (client.DecisionResult{Decision: client.Approved, Status: client.DecisionAccepted, SessionID: "appr", TurnID: "ap", CallID: "g-ap"}) {
				t.Fatalf("approve: %+v, %v", res, err)
			}
			if id, a := ranCall(t, ran); id != "g-ap" || a != `{"path":"ap.txt"}` {
				t.Errorf("the tool ran %s with %s", id, a)
			}
			if res, err := c.Decide(ctx, "appr", "ap", "g-ap", client.Decision{Decision: client.Approve}); err != nil || res.Status != client.AlreadyDecided {
				t.Errorf("approve again: %+v, %v", res, err)
			}
			if _, err := c.Decide(ctx, "appr", "ap", "g-ap", client.Decision{Decision: client.Reject, Message: "no"}); !strings.HasPrefix(problemCode(err), "409 ") {
				t.Errorf("reject after approve: %v, want a 409", err)
			}
			if turn, err := c.Await(ctx, "appr", "ap"); err != nil || turn.Results[0].Status != client.ResultOK {
				t.Errorf("the approved turn: %+v, %v", turn, err)
			}

			_, err = c.Decide(ctx, "appr", "ed", "g-ed", client.Decision{Decision: client.Approve, Arguments: json.RawMessage(`{"path": 7}`)})
			var apiErr *client.Error
			if !errors.As(err, &apiErr) || apiErr.Status != 422 || apiErr.Code != client.CodeInvalidArguments || apiErr.Detail == "" {
				t.Errorf("edited arguments the schema refuses: %v", err)
			}
			if res, err := c.Decide(ctx, "appr", "ed", "g-ed", client.Decision{Decision: client.Approve, Arguments: json.RawMessage(`{"path":"edited.txt"}`)}); err != nil || !res.Edited {
				t.Errorf("approve edited: %+v, %v", res, err)
			}
			if id, a := ranCall(t, ran); id != "g-ed" || a != `{"path":"edited.txt"}` {
				t.Errorf("the tool ran %s with %s, want the edited arguments", id, a)
			}

			if _, err := c.Decide(ctx, "appr", "rj", "g-rj", client.Decision{Decision: client.Reject, Arguments: json.RawMessage(`{}`)}); problemCode(err) != "422 invalid_request" {
				t.Errorf("reject with arguments: %v", err)
			}
			if _, err := c.Decide(ctx, "appr", "rj", "g-rj", client.Decision{Decision: "maybe"}); problemCode(err) != "422 invalid_request" {
				t.Errorf("an unknown decision: %v", err)
			}
			if res, err := c.Decide(ctx, "appr", "rj", "g-rj", client.Decision{Decision: client.Reject, Message: "use the staging copy"}); err != nil || res.Decision != client.Rejected {
				t.Errorf("reject: %+v, %v", res, err)
			}
			turn, err := c.Await(ctx, "appr", "rj")
			if err != nil {
				t.Fatal(err)
			}
			var out struct {
				Rejected bool   `json:"rejected"`
				Message  string `json:"message"`
			}
			if r := turn.Results[0]; r.Status != client.ResultRejected || json.Unmarshal(r.Output, &out) != nil || !out.Rejected || out.Message != "use the staging copy" {
				t.Errorf("the rejected call's result: %s %s", r.Status, r.Output)
			}
			select {
			case x := <-ran:
				t.Errorf("the tool ran %v, a rejected call", x)
			default:
			}

			if _, err := c.Decide(ctx, "appr", "rj", "nobody", client.Decision{Decision: client.Approve}); !client.IsNotFound(err) {
				t.Errorf("an unknown call: %v", err)
			}
			if _, err := c.PostTurn(ctx, "appr", client.TurnRequest{ID: "plain", Calls: []client.Call{{ID: "e", Name: "echo", Arguments: args(t, map[string]string{"text": "hi"})}}}, nil); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Decide(ctx, "appr", "plain", "e", client.Decision{Decision: client.Approve}); problemCode(err) != "409 "+client.CodeNotAwaitingApproval {
				t.Errorf("a call that never waited: %v", err)
			}
			if p, err := c.ApprovalsPage(ctx, client.ListOptions{}); err != nil || len(p.Approvals) != 0 || p.NextAfter != "" {
				t.Errorf("approvals after every decision: %+v, %v", p, err)
			}
		})
	}
}

// TestDecideKey: the approval.requested webhook hands the session's
// callback each parked call's complete_url; DecideKey decides with it,
// without the API token.
func TestDecideKey(t *testing.T) {
	t.Parallel()
	config, ran := guardedTool(t)
	hooks := make(chan []byte, 8)
	cb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b strings.Builder
		_, _ = io.Copy(&b, r.Body)
		if strings.Contains(b.String(), `"approval.requested"`) {
			hooks <- []byte(b.String())
		}
	}))
	t.Cleanup(cb.Close)
	srv := startServerConfig(t, sqlite, config, "TURND_CALLBACK_ALLOW_NETS=127.0.0.0/8")
	c := newClient(t, srv.URL)
	ctx := ctxFor(t)
	if _, err := c.CreateSession(ctx, client.SessionRequest{ID: "hooked", CallbackURL: cb.URL}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PostTurn(ctx, "hooked", client.TurnRequest{ID: "k1", Calls: []client.Call{
		{ID: "g1", Name: "guarded", Arguments: args(t, map[string]string{"path": "k.txt"})}}}, &client.PostOptions{Async: true}); err != nil {
		t.Fatal(err)
	}
	var hook struct {
		Type string `json:"type"`
		Data struct {
			SessionID string `json:"session_id"`
			TurnID    string `json:"turn_id"`
			Approvals []struct {
				CallID      string `json:"call_id"`
				Tool        string `json:"tool"`
				Rule        string `json:"rule"`
				CompleteURL string `json:"complete_url"`
			} `json:"approvals"`
		} `json:"data"`
	}
	select {
	case b := <-hooks:
		if err := json.Unmarshal(b, &hook); err != nil {
			t.Fatalf("the webhook's body: %v: %s", err, b)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no approval.requested webhook within 30s")
	}
	if d := hook.Data; d.SessionID != "hooked" || d.TurnID != "k1" || len(d.Approvals) != 1 || d.Approvals[0].CallID != "g1" || d.Approvals[0].Tool != "guarded" || !strings.Contains(d.Approvals[0].CompleteURL, "/v1/complete/") {
		t.Fatalf("the webhook: %+v", hook)
	}
	key := hook.Data.Approvals[0].CompleteURL
	if _, err := c.Complete(ctx, key, map[string]bool{"approved": true}); problemCode(err) != "409 awaiting_approval" {
		t.Errorf("a result posted to a call waiting for approval: %v", err)
	}
	res, err := c.DecideKey(ctx, key, client.Decision{Decision: client.Approve, Arguments: json.RawMessage(`{"path":"by-key.txt"}`), By: "hook"})
	if err != nil || res.Decision != client.Approved || !res.Edited || res.CallID != "g1" || res.TurnID != "k1" {
		t.Fatalf("DecideKey: %+v, %v", res, err)
	}
	if id, a := ranCall(t, ran); id != "g1" || a != `{"path":"by-key.txt"}` {
		t.Errorf("the tool ran %s with %s", id, a)
	}
	if res, err := c.DecideKey(ctx, key, client.Decision{Decision: client.Approve, Arguments: json.RawMessage(`{"path":"by-key.txt"}`), By: "hook"}); err != nil || res.Status != client.AlreadyDecided {
		t.Errorf("DecideKey again: %+v, %v", res, err)
	}
	if turn, err := c.Await(ctx, "hooked", "k1"); err != nil || turn.Results[0].Status != client.ResultOK {
		t.Errorf("the turn: %+v, %v", turn, err)
	}
}
