package tool

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turnd/turnd/completion"
	"github.com/turnd/turnd/internal/testnet"
)

// cancelKey is the completion key in the cancel tests; no error may show it.
const cancelKey = "ck_cancel-key-must-not-leak"

var cancelBody = CancelRequest{Key: cancelKey, SessionID: "ses_1", TurnID: "turn_1", CallID: "call_1"}

func testSigner(t *testing.T) *completion.Signer {
	t.Helper()
	s, err := completion.NewSigner("whsec_" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("k"), 32)))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// cancelRegistry registers the deferred tool "t" with cancel URL u (none
// if empty) and a quick backoff between cancel attempts.
func cancelRegistry(t *testing.T, u string) *Registry {
	t.Helper()
	cancel := ""
	if u != "" {
		cancel = fmt.Sprintf("      cancel_url: %q\n", u)
	}
	config := "tools:\n  - name: t\n    deferred: true\n    http:\n      url: http://127.0.0.1:1/\n" +
		"      timeout: 5s\n      headers: {X-Api-Key: '${TOKEN}'}\n" + cancel +
		"  - name: plain\n    http: {url: 'http://127.0.0.1:1/'}\n"
	reg, err := Parse([]byte(config), Options{Env: testEnv, Now: func() time.Time { return testNow }})
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	t.Cleanup(reg.CloseIdleConnections)
	reg.cancelBackoff = time.Millisecond
	return reg
}

// checkCancelError fails the test if err shows the key, the secret or the
// URL's query.
func checkCancelError(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	for _, s := range []string{cancelKey, secret, "?t=", "/cancel"} {
		if strings.Contains(err.Error(), s) {
			t.Errorf("error shows %q: %v", s, err)
		}
	}
}

type cancelSeen struct {
	header http.Header
	body   []byte
}

// cancelServer answers each cancel request with the next status (the last
// one repeats) and records what it saw.
func cancelServer(t *testing.T, statuses ...int) (url string, seen func() []cancelSeen) {
	t.Helper()
	var (
		mu  sync.Mutex
		got []cancelSeen
	)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, cancelSeen{r.Header.Clone(), body})
		n := len(got)
		mu.Unlock()
		w.WriteHeader(statuses[min(n, len(statuses))-1])
	})
	return srv.URL + "/cancel?t=${TOKEN}", func() []cancelSeen {
		mu.Lock()
		defer mu.Unlock()
		return append([]cancelSeen(nil), got...)
	}
}

func TestCancelExternalSigned(t *testing.T) {
	t.Parallel()
	u, seen := cancelServer(t, http.StatusNoContent)
	reg := cancelRegistry(t, u)
	signer := testSigner(t)
	if err := reg.CancelExternal(t.Context(), "t", cancelBody, signer); err != nil {
		t.Fatalf("CancelExternal: %v", err)
	}
	got := seen()
	if len(got) != 1 {
		t.Fatalf("%d requests, want 1", len(got))
	}
	r := got[0]
	if err := signer.Verify(r.header, r.body, testNow, 0); err != nil {
		t.Errorf("signature: %v", err)
	}
	if !strings.HasPrefix(r.header.Get("Webhook-Id"), "msg_") {
		t.Errorf("webhook-id = %q", r.header.Get("Webhook-Id"))
	}
	for k, want := range map[string]string{"Content-Type": "application/json", "X-Api-Key": secret, "User-Agent": "turnd"} {
		if v := r.header.Get(k); v != want {
			t.Errorf("header %s = %q, want %q", k, v, want)
		}
	}
	var body map[string]string
	if err := json.Unmarshal(r.body, &body); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"key": cancelKey, "session_id": "ses_1", "turn_id": "turn_1", "call_id": "call_1"}
	if fmt.Sprint(body) != fmt.Sprint(want) {
		t.Errorf("body = %v, want %v", body, want)
	}

	// Without a signer, the request goes unsigned.
	if err := reg.CancelExternal(t.Context(), "t", cancelBody, nil); err != nil {
		t.Fatalf("CancelExternal unsigned: %v", err)
	}
	if h := seen()[1].header; h.Get("Webhook-Signature") != "" || h.Get("Webhook-Id") != "" {
		t.Errorf("unsigned request has webhook headers: %v", h)
	}
}

func TestCancelExternalRetries(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		statuses []int
		requests int
		ok       bool
	}{
		{"503 then success", []int{503, 503, 200}, 3, true},
		{"429 then success", []int{429, 202}, 2, true},
		{"runs out", []int{503}, CancelAttempts, false},
		{"4xx is final", []int{400, 200}, 1, false},
		{"redirect is final", []int{307, 200}, 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			u, seen := cancelServer(t, tt.statuses...)
			reg := cancelRegistry(t, u)
			signer := testSigner(t)
			err := reg.CancelExternal(t.Context(), "t", cancelBody, signer)
			checkCancelError(t, err)
			if tt.ok != (err == nil) || (err != nil && !errors.Is(err, ErrCancelFailed)) {
				t.Errorf("CancelExternal = %v", err)
			}
			got := seen()
			if len(got) != tt.requests {
				t.Fatalf("%d requests, want %d", len(got), tt.requests)
			}
			for _, r := range got {
				if err := signer.Verify(r.header, r.body, testNow, 0); err != nil {
					t.Errorf("signature: %v", err)
				}
				// One message, so one id: the tool can deduplicate.
				if id := r.header.Get("Webhook-Id"); id != got[0].header.Get("Webhook-Id") {
					t.Errorf("webhook-id changed between attempts: %q, %q", got[0].header.Get("Webhook-Id"), id)
				}
			}
		})
	}
}

func TestCancelExternalNetworkError(t *testing.T) {
	t.Parallel()
	addr := testnet.ClosedAddr(t)
	reg := cancelRegistry(t, "http://"+addr+"/cancel?t=${TOKEN}")
	err := reg.CancelExternal(t.Context(), "t", cancelBody, testSigner(t))
	checkCancelError(t, err)
	if !errors.Is(err, ErrCancelFailed) || !strings.Contains(err.Error(), "connection refused") ||
		!strings.Contains(err.Error(), fmt.Sprintf("attempt %d of %d", CancelAttempts, CancelAttempts)) {
		t.Errorf("CancelExternal = %v", err)
	}
}

func TestCancelExternalNothingToDo(t *testing.T) {
	t.Parallel()
	reg := cancelRegistry(t, "")
	for _, name := range []string{"t", "plain"} {
		if err := reg.CancelExternal(t.Context(), name, cancelBody, testSigner(t)); err != nil {
			t.Errorf("CancelExternal(%s) = %v, want nil: no cancel_url", name, err)
		}
	}
	err := reg.CancelExternal(t.Context(), "gone", cancelBody, nil)
	checkCancelError(t, err)
	if !errors.Is(err, ErrUnknownTool) {
		t.Errorf("CancelExternal(gone) = %v, want ErrUnknownTool", err)
	}
}

// TestCancelExternalContext: ctx ends the wait between attempts.
func TestCancelExternalContext(t *testing.T) {
	t.Parallel()
	answered := make(chan struct{})
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		w.(http.Flusher).Flush()
		close(answered) // once: the backoff below outlasts the test
	})
	reg := cancelRegistry(t, srv.URL)
	reg.cancelBackoff = time.Hour
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- reg.CancelExternal(ctx, "t", cancelBody, nil) }()
	select {
	case <-answered:
	case err := <-done:
		t.Fatalf("CancelExternal returned before it was cancelled: %v", err)
	}
	cancel()
	err := <-done
	checkCancelError(t, err)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("CancelExternal = %v, want context.Canceled", err)
	}
}
