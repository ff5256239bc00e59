package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/turnd/turnd/internal/teststores"
	"github.com/turnd/turnd/turn"
)

type progressData struct {
	CallID   string    `json:"call_id"`
	Progress float64   `json:"progress"`
	Total    float64   `json:"total"`
	Message  string    `json:"message"`
	At       time.Time `json:"at"`
}

// progressStack is a stack with a tool "slow" that streams 50 progress
// lines at once, then answers when release is closed.
func progressStack(t *testing.T, open func(testing.TB) turn.Store) (*stack, chan struct{}) {
	t.Helper()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		var b strings.Builder
		for i := 1; i <= 50; i++ {
			fmt.Fprintf(&b, "{\"progress\":{\"progress\":%d,\"total\":50,\"message\":\"page %d\"}}\n", i, i)
		}
		_, _ = w.Write([]byte(b.String())) // one burst: the reports come faster than they are shown
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		_, _ = w.Write([]byte("{\"output\":{\"pages\":50}}\n"))
	}))
	t.Cleanup(srv.Close)
	s := newStack(t, open, stackOptions{yaml: fmt.Sprintf("  - name: slow\n    effect: write\n    http: {url: %q, timeout: 30s}\n", srv.URL)})
	return s, release
}

// TestProgressEvents: an HTTP tool's progress reaches the turn's event
// stream (asked for with progress=true) as call_progress events without
// an id, rate limited, ending with its last value, and leaves no trace in
// the ledger.
func TestProgressEvents(t *testing.T) {
	t.Parallel()
	teststores.Each(t, func(t *testing.T, open func(testing.TB) turn.Store) {
		s, release := progressStack(t, open)
		if r := s.do("POST", "/v1/sessions/s/turns", `{"id":"t","calls":[{"id":"c1","name":"slow"}]}`, "Prefer", "respond-async"); r.status != 202 {
			t.Fatalf("post: %d %s", r.status, r.body)
		}
		events := make(chan sseEvent, 64)
		readEvents(t, s, "/v1/sessions/s/turns/t/events?progress=true", "", events)
		plain := make(chan sseEvent, 64)
		readEvents(t, s, "/v1/sessions/s/turns/t/events", "", plain)
		shown := 0
		var kinds []string
		for ev := range events {
			if ev.kind != "call_progress" {
				kinds = append(kinds, ev.kind)
				continue
			}
			shown++
			var p progressData
			if err := json.Unmarshal([]byte(ev.data), &p); err != nil || ev.id != 0 || p.CallID != "c1" || p.Total != 50 || p.At.IsZero() {
				t.Fatalf("call_progress id %d data %s (%v)", ev.id, ev.data, err)
			}
			if p.Progress == 50 {
				if p.Message != "page 50" {
					t.Fatalf("last progress %+v", p)
				}
				close(release)
			}
		}
		// 50 reports in one burst show as the first and the last, give or
		// take one woken by a ledger line: never one per report.
		if shown < 1 || shown > 3 {
			t.Errorf("%d call_progress events for 50 reports in a burst, want 1 to 3", shown)
		}
		want := "turn_received call_admitted attempt_started call_answered turn_settled"
		if strings.Join(kinds, " ") != want {
			t.Fatalf("ledger events\n got %s\nwant %s", strings.Join(kinds, " "), want)
		}
		var plainKinds []string
		for ev := range plain {
			plainKinds = append(plainKinds, ev.kind)
		}
		if strings.Join(plainKinds, " ") != want {
			t.Fatalf("a stream without progress=true\n got %s\nwant %s", strings.Join(plainKinds, " "), want)
		}
		var ledger struct {
			Lines []struct{ Kind string } `json:"lines"`
		}
		r := s.do("GET", "/v1/sessions/s/ledger", nil)
		r.json(t, &ledger)
		if len(ledger.Lines) != 5 {
			t.Fatalf("ledger has %d lines, want 5 (no progress): %s", len(ledger.Lines), r.body)
		}
		if r := s.do("GET", "/v1/sessions/s/turns/t/events?progress=maybe", nil); r.code(t) != "invalid_query" {
			t.Fatalf("progress=maybe: %d %s", r.status, r.body)
		}
	})
}

// TestCompletionProgress: a deferred call's sender posts progress to
// POST /v1/complete/{key}/progress while the call is parked.
func TestCompletionProgress(t *testing.T) {
	t.Parallel()
	eachStack(t, func(t *testing.T, s *stack) {
		if r := s.do("POST", "/v1/sessions/s/turns", `{"id":"t","calls":[{"id":"d","name":"deferred"}]}`); r.status != 202 {
			t.Fatalf("post: %d %s", r.status, r.body)
		}
		key := (<-s.tools.keys)[0]
		for _, c := range []struct {
			name, key, body string
			status          int
			code            string
		}{
			{"no progress", key, `{"message":"half way"}`, 422, "invalid_request"},
			{"negative", key, `{"progress":-1}`, 422, "invalid_request"},
			{"negative total", key, `{"progress":1,"total":-3}`, 422, "invalid_request"},
			{"message too long", key, `{"progress":1,"message":"` + strings.Repeat("x", 513) + `"}`, 422, "invalid_request"},
			{"NUL in the message", key, `{"progress":1,"message":"a\u0000b"}`, 422, "invalid_request"},
			{"not JSON", key, `progress=1`, 400, "malformed_json"},
			{"unknown key", "ck_" + strings.Repeat("A", 43), `{"progress":1}`, 404, "not_found"},
		} {
			if r := s.do("POST", "/v1/complete/"+c.key+"/progress", c.body); r.status != c.status || r.code(t) != c.code {
				t.Errorf("%s: %d %s, want %d %s", c.name, r.status, r.body, c.status, c.code)
			}
		}
		events := make(chan sseEvent, 64)
		readEvents(t, s, "/v1/sessions/s/turns/t/events?progress=true", "", events)
		var info struct{ Status string }
		r := s.do("POST", "/v1/complete/"+key+"/progress", `{"progress":2,"total":5,"message":"2 of 5 reviewers"}`)
		if r.status != 200 {
			t.Fatalf("progress: %d %s", r.status, r.body)
		}
		r.json(t, &info)
		if info.Status != "pending" {
			t.Fatalf("key state %q, want pending", info.Status)
		}
		var kinds []string
		for ev := range events {
			kinds = append(kinds, ev.kind)
			if ev.kind != "call_progress" {
				continue
			}
			var p progressData
			if err := json.Unmarshal([]byte(ev.data), &p); err != nil || p.CallID != "d" || p.Progress != 2 || p.Total != 5 || p.Message != "2 of 5 reviewers" {
				t.Fatalf("call_progress %s (%v)", ev.data, err)
			}
			if d := s.do("POST", "/v1/complete/"+key, `{"output":"approved"}`); d.status != 200 {
				t.Fatalf("deliver: %d %s", d.status, d.body)
			}
		}
		want := "turn_received call_admitted attempt_started call_pending call_progress call_answered turn_settled"
		if strings.Join(kinds, " ") != want {
			t.Fatalf("events\n got %s\nwant %s", strings.Join(kinds, " "), want)
		}
		if r := s.do("POST", "/v1/complete/"+key+"/progress", `{"progress":3}`); r.status != 410 || !strings.Contains(string(r.body), `"recorded_status":"completed"`) {
			t.Fatalf("progress after the result: %d %s", r.status, r.body)
		}
	})
}
