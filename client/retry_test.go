package client_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/turnd/turnd/client"
)

// fakeTurns answers POSTs by the script of statuses (0: drop the
// connection), then 200 with a turn, and records every body's id.
type fakeTurns struct {
	mu     sync.Mutex
	script []int
	ids    []string
	ctypes []string
}

func (f *fakeTurns) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body struct{ ID string }
	data, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(data, &body)
	f.mu.Lock()
	f.ids = append(f.ids, body.ID)
	f.ctypes = append(f.ctypes, r.Header.Get("Content-Type"))
	status := http.StatusOK
	if len(f.script) > 0 {
		status, f.script = f.script[0], f.script[1:]
	}
	f.mu.Unlock()
	switch status {
	case 0:
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	case http.StatusOK:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": body.ID, "session_id": "s", "status": "completed", "results": []any{}})
	default:
		w.Header().Set("Content-Type", "application/problem+json")
		w.Header().Set("Retry-After", "0")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]any{"type": "urn:turnd:problem:x", "title": http.StatusText(status), "status": status, "code": "store_unavailable", "detail": "d"})
	}
}

func TestRetries(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		script   []int
		policy   client.RetryPolicy
		attempts int
		wantCode string // "" is success
	}{
		{name: "no retry needed", attempts: 1},
		{name: "503 then ok", script: []int{503, 503}, attempts: 3},
		{name: "dropped connection then ok", script: []int{0}, attempts: 2},
		{name: "gives up after MaxAttempts", script: []int{503, 503, 503}, policy: client.RetryPolicy{MaxAttempts: 2}, attempts: 2, wantCode: "store_unavailable"},
		{name: "4xx is not retried", script: []int{409}, attempts: 1, wantCode: "store_unavailable"},
		{name: "500 is not retried", script: []int{500}, attempts: 1, wantCode: "store_unavailable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeTurns{script: tt.script}
			srv := httptest.NewServer(f)
			t.Cleanup(srv.Close)
			policy := tt.policy
			policy.Backoff = time.Millisecond
			c := newClient(t, srv.URL, client.WithRetry(policy))
			turn, err := c.PostTurn(ctxFor(t), "s", client.TurnRequest{Calls: []client.Call{{ID: "a", Name: "now"}}}, nil)
			var apiErr *client.Error
			switch {
			case tt.wantCode == "" && err != nil:
				t.Fatalf("PostTurn: %v", err)
			case tt.wantCode != "" && (!errors.As(err, &apiErr) || apiErr.Code != tt.wantCode):
				t.Fatalf("PostTurn: %v, want code %s", err, tt.wantCode)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if len(f.ids) != tt.attempts {
				t.Errorf("%d attempts, want %d", len(f.ids), tt.attempts)
			}
			for i, id := range f.ids {
				if id != f.ids[0] || !hasPrefix(id, "turn_") {
					t.Errorf("attempt %d posted id %q, the first %q: one generated id for every attempt", i, id, f.ids[0])
				}
				if f.ctypes[i] != "application/json" {
					t.Errorf("attempt %d: Content-Type %q", i, f.ctypes[i])
				}
			}
			if err == nil && turn.ID != f.ids[0] {
				t.Errorf("turn id %q, posted %q", turn.ID, f.ids[0])
			}
		})
	}
}

// TestRetryHonoursRetryAfter: a Retry-After beyond MaxWait is not waited
// for; the 503 is returned with its RetryAfter.
func TestRetryHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "120")
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"type":"urn:turnd:problem:shutting_down","title":"Service Unavailable","status":503,"code":"shutting_down"}`)
	}))
	t.Cleanup(srv.Close)
	c := newClient(t, srv.URL, client.WithRetry(client.RetryPolicy{MaxWait: time.Second}))
	start := time.Now()
	_, err := c.Session(ctxFor(t), "s")
	var apiErr *client.Error
	if !errors.As(err, &apiErr) || apiErr.Code != "shutting_down" || apiErr.RetryAfter != 120*time.Second {
		t.Fatalf("Session: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("waited %v though Retry-After exceeds MaxWait", d)
	}
}
