package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnd/turnd/completion"
	"github.com/turnd/turnd/dispatch"
)

// testKey is the completion key the test issuer hands out.
const testKey = "ck_test-key-0123456789"

// keyIssuer issues testKey (or fails with err) and counts the keys asked for.
type keyIssuer struct {
	err   error
	calls atomic.Int32
}

func (k *keyIssuer) IssueKey(context.Context, dispatch.Call) (string, error) {
	k.calls.Add(1)
	if k.err != nil {
		return "", k.err
	}
	return testKey, nil
}

// completeBase is the public base URL of the tests' CallContext.
const completeBase = "https://turnd.example/v1/complete/"

var deferredCall = CallContext{SessionID: "ses_1", TurnID: "turn_1",
	CompleteURL: func(key string) string { return completeBase + key }}

// runWave runs one call of s (call_1 with args) in a dispatch wave whose
// key issuer is keys (none if nil) and returns what was accounted.
func runWave(t *testing.T, s *Spec, args string, keys dispatch.KeyIssuer) dispatch.Accounted {
	t.Helper()
	h := &waveHost{spec: s}
	ctx := WithCallContext(t.Context(), deferredCall)
	wave := dispatch.Wave{Calls: []dispatch.Call{{ID: "call_1", Name: s.Name, Arguments: json.RawMessage(args)}}}
	if keys != nil {
		wave.Keys = keys
	}
	if _, err := wave.Run(ctx, h); err != nil {
		t.Fatalf("wave.Run: %v", err)
	}
	if len(h.got) != 1 {
		t.Fatalf("accounted %d calls", len(h.got))
	}
	return h.got[0]
}

// deferredConfig makes the tool of httpSpec deferred, with pending defaults.
const deferredConfig = "    deferred: true\n    pending: {deadline: 2h, on_cancel: ignore}\n"

func TestDeferredRequest(t *testing.T) {
	t.Parallel()
	got := make(chan map[string]any, 1)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			t.Errorf("request body: %v", err)
		}
		got <- body
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		io.WriteString(w, `{"pending": {}}`)
	})
	s := httpSpec(t, srv.URL, deferredConfig)
	a := runWave(t, s, `{"q": "go"}`, &keyIssuer{})
	if a.Outcome.Status != dispatch.StatusPending {
		t.Fatalf("outcome = %+v %+v", a.Outcome, a.Outcome.Err)
	}
	body := <-got
	want := map[string]any{
		"key":      testKey,
		"url":      completeBase + testKey,
		"deadline": "2025-06-01T14:00:00Z",
	}
	if fmt.Sprint(body["completion"]) != fmt.Sprint(want) {
		t.Errorf("completion = %v\nwant %v", body["completion"], want)
	}
	if body["call_id"] != "call_1" || body["attempt"] != float64(1) {
		t.Errorf("body = %v", body)
	}
}

func TestDeferredAnswers(t *testing.T) {
	t.Parallel()
	defaults := dispatch.Pending{Deadline: testNow.Add(2 * time.Hour), OnTimeout: dispatch.OnTimeoutErrorAsResult, OnCancel: dispatch.OnCancelIgnore, Key: testKey}
	tests := []struct {
		name    string
		status  int
		body    string
		pending *dispatch.Pending // the outcome is pending, with these options
		code    string            // or an error with this code
		msg     string            // whose message contains this
		output  string            // or OK with this output
	}{
		{name: "202 defaults", status: 202, body: `{"pending": {}}`, pending: &defaults},
		{name: "200 defaults", status: 200, body: `{"pending": {}}`, pending: &defaults},
		{name: "202 overrides", status: 202,
			body: `{"pending": {"deadline": "90s", "heartbeat_timeout": "30s", "on_timeout": "fail_turn", "on_cancel": "cancel_external_work"}}`,
			pending: &dispatch.Pending{Deadline: testNow.Add(90 * time.Second), HeartbeatTimeout: 30 * time.Second,
				OnTimeout: dispatch.OnTimeoutFailTurn, OnCancel: dispatch.OnCancelExternalWork, Key: testKey}},
		{name: "200 absolute deadline", status: 200, body: `{"pending": {"deadline": "2025-06-01T15:30:00+01:00"}}`,
			pending: &dispatch.Pending{Deadline: testNow.Add(150 * time.Minute), OnTimeout: dispatch.OnTimeoutErrorAsResult, OnCancel: dispatch.OnCancelIgnore, Key: testKey}},
		{name: "heartbeat only", status: 202, body: `{"pending": {"heartbeat_timeout": "1m"}}`,
			pending: &dispatch.Pending{Deadline: defaults.Deadline, HeartbeatTimeout: time.Minute, OnTimeout: dispatch.OnTimeoutErrorAsResult, OnCancel: dispatch.OnCancelIgnore, Key: testKey}},
		{name: "bad deadline", status: 202, body: `{"pending": {"deadline": "soon"}}`,
			code: CodeInvalidToolResponse, msg: `the tool's pending options are invalid: pending.deadline "soon"`},
		{name: "past deadline", status: 202, body: `{"pending": {"deadline": "2025-06-01T11:00:00Z"}}`,
			code: CodeInvalidToolResponse, msg: "pending.deadline"},
		{name: "deadline past the maximum", status: 202, body: `{"pending": {"deadline": "721h"}}`,
			code: CodeInvalidToolResponse, msg: "pending.deadline"},
		{name: "heartbeat past the deadline", status: 202, body: `{"pending": {"deadline": "1m", "heartbeat_timeout": "2m"}}`,
			code: CodeInvalidToolResponse, msg: "pending.heartbeat_timeout"},
		{name: "bad on_timeout", status: 202, body: `{"pending": {"on_timeout": "explode"}}`,
			code: CodeInvalidToolResponse, msg: `pending.on_timeout "explode"`},
		{name: "bad on_cancel", status: 200, body: `{"pending": {"on_cancel": "shrug"}}`,
			code: CodeInvalidToolResponse, msg: `pending.on_cancel "shrug"`},
		{name: "unknown option", status: 202, body: `{"pending": {"deadlin": "1h"}}`,
			code: CodeInvalidToolResponse, msg: `unknown field "deadlin"`},
		{name: "option not a string", status: 202, body: `{"pending": {"deadline": 90}}`,
			code: CodeInvalidToolResponse, msg: "deadline must be a string"},
		{name: "pending null", status: 202, body: `{"pending": null}`,
			code: CodeInvalidToolResponse, msg: `"pending" must be an object`},
		{name: "pending not an object", status: 202, body: `{"pending": "1h"}`,
			code: CodeInvalidToolResponse, msg: `"pending" must be an object`},
		{name: "pending and output", status: 202, body: `{"pending": {}, "output": 1}`,
			code: CodeInvalidToolResponse, msg: `"pending" together with "output" or "error"`},
		{name: "pending and error", status: 200, body: `{"pending": {}, "error": {"code": "x"}}`,
			code: CodeInvalidToolResponse, msg: `"pending" together with "output" or "error"`},
		{name: "pending with 201", status: 201, body: `{"pending": {}}`,
			code: CodeInvalidToolResponse, msg: "status 200 or 202, not 201"},
		{name: "202 output", status: 202, body: `{"output": {"done": true}}`, output: `{"done": true}`},
		{name: "202 error", status: 202, body: `{"error": {"code": "busy", "message": "later"}}`, code: "busy", msg: "later"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tt.status)
				io.WriteString(w, tt.body)
			})
			s := httpSpec(t, srv.URL, deferredConfig)
			out := runWave(t, s, `{}`, &keyIssuer{}).Outcome
			switch {
			case tt.pending != nil:
				if out.Status != dispatch.StatusPending || out.Pending == nil || *out.Pending != *tt.pending {
					t.Errorf("outcome = %+v (pending %+v, error %+v)\nwant pending %+v", out, out.Pending, out.Err, tt.pending)
				}
			case tt.code != "":
				if out.Status != dispatch.StatusError || out.Err.Code != tt.code || !strings.Contains(out.Err.Message, tt.msg) || out.Err.Retryable {
					t.Errorf("outcome = %+v %+v\nwant error %s containing %q", out, out.Err, tt.code, tt.msg)
				}
			default:
				if out.Status != dispatch.StatusOK || string(out.Output) != tt.output {
					t.Errorf("outcome = %+v (%s)", out, out.Output)
				}
			}
		})
	}
}

// TestPendingFromNonDeferredTool: a tool that was never told a key cannot
// park a call, whatever it answers.
func TestPendingFromNonDeferredTool(t *testing.T) {
	t.Parallel()
	for _, status := range []int{200, 202} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			t.Parallel()
			var sawCompletion atomic.Bool
			srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				var req request
				json.NewDecoder(r.Body).Decode(&req)
				sawCompletion.Store(req.Completion != nil)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(status)
				io.WriteString(w, `{"pending": {"deadline": "1h"}}`)
			})
			s := httpSpec(t, srv.URL, "")
			keys := &keyIssuer{}
			for name, out := range map[string]dispatch.Outcome{
				"wave":   runWave(t, s, `{}`, keys).Outcome,
				"direct": invoke(t.Context(), s, `{}`),
			} {
				if out.Status != dispatch.StatusError || out.Err.Code != dispatch.CodePendingMissingKey ||
					out.Err.Message != "the tool answered pending but is not configured with deferred: true" {
					t.Errorf("%s: outcome = %+v %+v", name, out, out.Err)
				}
			}
			if n := keys.calls.Load(); n != 0 || sawCompletion.Load() {
				t.Errorf("a tool without deferred: true took %d keys (completion sent: %v)", n, sawCompletion.Load())
			}
		})
	}
}

func TestDeferredKeyUnavailable(t *testing.T) {
	t.Parallel()
	var requests atomic.Int32
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"pending": {}}`)
	})
	s := httpSpec(t, srv.URL, deferredConfig)
	tests := []struct {
		name string
		run  func() dispatch.Outcome
		msg  string
	}{
		{"no key issuer", func() dispatch.Outcome { return runWave(t, s, `{}`, nil).Outcome }, "issues no completion keys"},
		{"issuer fails", func() dispatch.Outcome {
			return runWave(t, s, `{}`, &keyIssuer{err: errors.New("store unavailable")}).Outcome
		}, "could not take a completion key: dispatch: issuing completion key for call call_1: store unavailable"},
		{"no attempt", func() dispatch.Outcome { return invoke(t.Context(), s, `{}`) }, "outside a dispatch attempt"},
	}
	for _, tt := range tests {
		out := tt.run()
		if out.Status != dispatch.StatusError || out.Err.Code != CodeCompletionKeyUnavailable || out.Err.Retryable ||
			!strings.Contains(out.Err.Message, tt.msg) {
			t.Errorf("%s: outcome = %+v %+v", tt.name, out, out.Err)
		}
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("the tool was called %d times without a key", n)
	}
}

// TestDeferredRetryKeepsKey: every attempt of a call carries the key the
// first one took, and the issuer is asked once.
func TestDeferredRetryKeepsKey(t *testing.T) {
	t.Parallel()
	var (
		mu   sync.Mutex
		keys []string
	)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		var req request
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Completion == nil {
			t.Errorf("request without completion (%v)", err)
			return
		}
		mu.Lock()
		keys = append(keys, req.Completion.Key)
		n := len(keys)
		mu.Unlock()
		if n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		io.WriteString(w, `{"pending": {}}`)
	})
	s := httpSpec(t, srv.URL, deferredConfig+"    retry: {max_attempts: 2, initial_interval: 1ms, max_interval: 1ms, jitter: 0}\n")
	issuer := &keyIssuer{}
	a := runWave(t, s, `{}`, issuer)
	if a.Outcome.Status != dispatch.StatusPending || a.Attempts != 2 || a.Outcome.Pending.Key != testKey {
		t.Errorf("outcome %+v after %d attempts", a.Outcome, a.Attempts)
	}
	if fmt.Sprint(keys) != fmt.Sprint([]string{testKey, testKey}) || issuer.calls.Load() != 1 {
		t.Errorf("keys sent %v, issued %d", keys, issuer.calls.Load())
	}
}

// approvalRegistry registers the approval builtin (and "ask", an approval
// with config defaults), logging to buf, complete URLs included when logURL.
func approvalRegistry(t *testing.T, buf *bytes.Buffer, logURL bool) *Registry {
	t.Helper()
	reg, err := Parse([]byte("tools:\n  - name: ask\n    builtin: approval\n    pending: {deadline: 1h, on_timeout: fail_turn}\nbuiltin: [approval]\n"), Options{
		Now:               func() time.Time { return testNow },
		Logger:            slog.New(slog.NewJSONHandler(buf, nil)),
		LogCompletionURLs: logURL,
	})
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

func TestApproval(t *testing.T) {
	t.Parallel()
	defaults := dispatch.Pending{Deadline: testNow.Add(completion.DefaultDeadline), OnTimeout: dispatch.OnTimeoutErrorAsResult, OnCancel: dispatch.OnCancelIgnore, Key: testKey}
	tests := []struct {
		name, tool, args string
		want             dispatch.Pending
		prompt           string
	}{
		{"defaults", "approval", `{}`, defaults, ""},
		{"prompt and deadline", "approval", `{"prompt": "Deploy v2 to prod?", "deadline": "30m"}`,
			dispatch.Pending{Deadline: testNow.Add(30 * time.Minute), OnTimeout: dispatch.OnTimeoutErrorAsResult, OnCancel: dispatch.OnCancelIgnore, Key: testKey},
			"Deploy v2 to prod?"},
		{"absolute deadline", "approval", `{"deadline": "2025-06-02T00:00:00Z"}`,
			dispatch.Pending{Deadline: testNow.Add(12 * time.Hour), OnTimeout: dispatch.OnTimeoutErrorAsResult, OnCancel: dispatch.OnCancelIgnore, Key: testKey}, ""},
		{"config defaults", "ask", `{"prompt": "ok?"}`,
			dispatch.Pending{Deadline: testNow.Add(time.Hour), OnTimeout: dispatch.OnTimeoutFailTurn, OnCancel: dispatch.OnCancelIgnore, Key: testKey}, "ok?"},
	}
	for _, tt := range tests {
		for _, logURL := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/log_url=%v", tt.name, logURL), func(t *testing.T) {
				t.Parallel()
				testApproval(t, tt.tool, tt.args, tt.prompt, tt.want, logURL)
			})
		}
	}
}

// testApproval runs one approval call and checks its outcome and its log
// line: the complete URL (and so the key) is in it only when logURL.
func testApproval(t *testing.T, tool, args, prompt string, want dispatch.Pending, logURL bool) {
	t.Helper()
	var buf bytes.Buffer
	s := lookup(t, approvalRegistry(t, &buf, logURL), tool)
	if err := s.Validate(json.RawMessage(args)); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	out := runWave(t, s, args, &keyIssuer{}).Outcome
	if out.Status != dispatch.StatusPending || *out.Pending != want {
		t.Fatalf("outcome = %+v (pending %+v, error %+v)\nwant pending %+v", out, out.Pending, out.Err, want)
	}
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatalf("log %q: %v", buf.String(), err)
	}
	fields := map[string]any{
		"level": "INFO", "session_id": "ses_1", "turn_id": "turn_1", "call_id": "call_1", "tool": tool,
		"prompt": prompt, "deadline": want.Deadline.Format(time.RFC3339Nano),
	}
	if logURL {
		fields["complete_url"] = completeBase + testKey
		// The parked call shows where to answer: its pending result's output.
		if want := `{"complete_url":"` + completeBase + testKey + `"}`; !out.JSON || string(out.Output) != want {
			t.Errorf("parked output = %s (json %v), want %s", out.Output, out.JSON, want)
		}
	} else {
		if strings.Contains(buf.String(), testKey) || rec["complete_url"] != nil {
			t.Errorf("the key is logged without LogCompletionURLs: %s", buf.String())
		}
		if out.Output != nil {
			t.Errorf("the parked call has an output without LogCompletionURLs: %s", out.Output)
		}
	}
	for k, v := range fields {
		if rec[k] != v {
			t.Errorf("log %s = %v, want %v", k, rec[k], v)
		}
	}
	if msg, _ := rec["msg"].(string); !strings.HasPrefix(msg, "approval requested") || !strings.Contains(msg, "completion key") {
		t.Errorf("log msg = %q", msg)
	}
}

func TestApprovalRefuses(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	s := lookup(t, approvalRegistry(t, &buf, true), "approval")
	for _, args := range []string{`{"prompt": 1}`, `{"deadline": 30}`, `{"extra": true}`} {
		if err := s.Validate(json.RawMessage(args)); err == nil {
			t.Errorf("Validate(%s) passed", args)
		}
	}
	tests := []struct {
		args string
		keys dispatch.KeyIssuer
		code string
		msg  string
	}{
		{`{"deadline": "tomorrow"}`, &keyIssuer{}, dispatch.CodeInvalidArguments, `deadline "tomorrow"`},
		{`{"deadline": "1000h"}`, &keyIssuer{}, dispatch.CodeInvalidArguments, `deadline "1000h"`},
		{`{"prompt": 1}`, &keyIssuer{}, dispatch.CodeInvalidArguments, "arguments must be"},
		{`{}`, nil, CodeCompletionKeyUnavailable, "issues no completion keys"},
	}
	for _, tt := range tests {
		issuer, _ := tt.keys.(*keyIssuer)
		out := runWave(t, s, tt.args, tt.keys).Outcome
		if out.Status != dispatch.StatusError || out.Err.Code != tt.code || !strings.Contains(out.Err.Message, tt.msg) {
			t.Errorf("approval(%s) = %+v %+v", tt.args, out, out.Err)
		}
		if issuer != nil && issuer.calls.Load() != 0 {
			t.Errorf("approval(%s) took a key", tt.args)
		}
	}
	if buf.Len() != 0 {
		t.Errorf("a refused approval logged: %s", buf.String())
	}
}
