package dispatch_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/turnd/turnd/dispatch"
)

// issuer hands out numbered keys and counts how often it was asked.
type issuer struct {
	mu    sync.Mutex
	asked map[string]int
	err   error
}

func (i *issuer) IssueKey(_ context.Context, call dispatch.Call) (string, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.err != nil {
		return "", i.err
	}
	if i.asked == nil {
		i.asked = map[string]int{}
	}
	i.asked[call.ID]++
	return fmt.Sprintf("key-%s-%d", call.ID, i.asked[call.ID]), nil
}

func TestPending(t *testing.T) {
	t.Parallel()
	deadline := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	options := dispatch.Pending{Deadline: deadline, HeartbeatTimeout: time.Minute,
		OnTimeout: dispatch.OnTimeoutFailTurn, OnCancel: dispatch.OnCancelIgnore}
	errIssuer := errors.New("issuer down")
	for _, tc := range []struct {
		name   string
		keys   *issuer
		policy dispatch.RetryPolicy
		// tool runs one attempt; it may take keys and returns an outcome.
		tool     func(t *testing.T, ctx context.Context, at *dispatch.Attempt) dispatch.Outcome
		status   dispatch.Status
		code     string
		key      string
		attempts int
		issued   int
	}{
		{
			name: "key taken", keys: &issuer{},
			tool: func(t *testing.T, ctx context.Context, at *dispatch.Attempt) dispatch.Outcome {
				if at.KeyTaken() {
					t.Error("key taken before asking")
				}
				k1, err1 := at.CompletionKey(ctx)
				k2, err2 := at.CompletionKey(ctx)
				if err1 != nil || err2 != nil || k1 != k2 || !at.KeyTaken() {
					t.Errorf("keys %q, %q (%v, %v)", k1, k2, err1, err2)
				}
				return dispatch.Defer(options)
			},
			status: dispatch.StatusPending, key: "key-a-1", attempts: 1, issued: 1,
		},
		{
			name: "no key taken", keys: &issuer{},
			tool: func(*testing.T, context.Context, *dispatch.Attempt) dispatch.Outcome {
				return dispatch.Defer(options)
			},
			status: dispatch.StatusError, code: dispatch.CodePendingMissingKey, attempts: 1,
		},
		{
			name: "same key across retries", keys: &issuer{},
			policy: dispatch.RetryPolicy{MaxAttempts: 3, InitialInterval: 1},
			tool: func(t *testing.T, ctx context.Context, at *dispatch.Attempt) dispatch.Outcome {
				if at.Number() > 1 && !at.KeyTaken() {
					t.Error("retry forgot the key")
				}
				if _, err := at.CompletionKey(ctx); err != nil {
					t.Error(err)
				}
				if at.Number() == 1 {
					return dispatch.FailRetryable("busy", "", 0)
				}
				return dispatch.Defer(options)
			},
			status: dispatch.StatusPending, key: "key-a-1", attempts: 2, issued: 1,
		},
		{
			name: "pending stops retrying", keys: &issuer{},
			policy: dispatch.RetryPolicy{MaxAttempts: 3, InitialInterval: 1},
			tool: func(t *testing.T, ctx context.Context, at *dispatch.Attempt) dispatch.Outcome {
				if _, err := at.CompletionKey(ctx); err != nil {
					t.Error(err)
				}
				return dispatch.Outcome{Status: dispatch.StatusPending}
			},
			status: dispatch.StatusPending, key: "key-a-1", attempts: 1, issued: 1,
		},
		{
			name: "no key issuer",
			tool: func(t *testing.T, ctx context.Context, at *dispatch.Attempt) dispatch.Outcome {
				if _, err := at.CompletionKey(ctx); !errors.Is(err, dispatch.ErrNoKeyIssuer) {
					t.Errorf("error %v, want ErrNoKeyIssuer", err)
				}
				return dispatch.Defer(options)
			},
			status: dispatch.StatusError, code: dispatch.CodePendingMissingKey, attempts: 1,
		},
		{
			name: "issuer fails", keys: &issuer{err: errIssuer},
			tool: func(t *testing.T, ctx context.Context, at *dispatch.Attempt) dispatch.Outcome {
				if _, err := at.CompletionKey(ctx); !errors.Is(err, errIssuer) {
					t.Errorf("error %v, want the issuer's", err)
				}
				return dispatch.Fail("no_key", "")
			},
			status: dispatch.StatusError, code: "no_key", attempts: 1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHost()
			h.tools["defer"] = registered{effect: dispatch.EffectWrite, retry: tc.policy,
				tool: dispatch.ToolFunc(func(ctx context.Context, _ dispatch.Call, at *dispatch.Attempt) dispatch.Outcome {
					return tc.tool(t, ctx, at)
				})}
			w := dispatch.Wave{Calls: calls("a:defer")}
			if tc.keys != nil {
				w.Keys = tc.keys
			}
			rep, err := w.Run(t.Context(), h)
			if err != nil {
				t.Fatal(err)
			}
			a := h.accountedCalls()[0]
			if a.Outcome.Status != tc.status || a.Attempts != tc.attempts {
				t.Fatalf("accounted %+v, want %s after %d attempts", a.Outcome, tc.status, tc.attempts)
			}
			if tc.code != "" && a.Outcome.Err.Code != tc.code {
				t.Errorf("code %q, want %q", a.Outcome.Err.Code, tc.code)
			}
			if tc.status == dispatch.StatusPending {
				if a.Outcome.Pending.Key != tc.key {
					t.Errorf("pending key %q, want %q", a.Outcome.Pending.Key, tc.key)
				}
				if rep.Pending != 1 {
					t.Errorf("report %+v", rep)
				}
			}
			if tc.name == "key taken" || tc.name == "same key across retries" {
				want := options
				want.Key = tc.key
				if *a.Outcome.Pending != want {
					t.Errorf("pending %+v, want %+v", *a.Outcome.Pending, want)
				}
			}
			if tc.keys != nil && tc.keys.asked["a"] != tc.issued {
				t.Errorf("issuer asked %d times, want %d", tc.keys.asked["a"], tc.issued)
			}
		})
	}
}
