package dispatch_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/turnd/turnd/dispatch"
)

func TestRetries(t *testing.T) {
	t.Parallel()
	retryable := dispatch.FailRetryable("busy", "try later", 0)
	for _, tc := range []struct {
		name string
		// failures is how many first attempts fail with fail.
		failures int
		fail     dispatch.Outcome
		policy   dispatch.RetryPolicy
		status   dispatch.Status
		attempts int
		elapsed  time.Duration
	}{
		{
			name: "retryable errors until success", failures: 2, fail: retryable,
			policy: dispatch.RetryPolicy{MaxAttempts: 5, InitialInterval: time.Second, Multiplier: 2},
			status: dispatch.StatusOK, attempts: 3, elapsed: 3 * time.Second,
		},
		{
			name: "not retryable", failures: 9, fail: dispatch.Fail("bad", ""),
			policy: dispatch.RetryPolicy{MaxAttempts: 5, InitialInterval: time.Second},
			status: dispatch.StatusError, attempts: 1,
		},
		{
			name: "zero policy does not retry", failures: 9, fail: retryable,
			status: dispatch.StatusError, attempts: 1,
		},
		{
			name: "max attempts", failures: 9, fail: retryable,
			policy: dispatch.RetryPolicy{MaxAttempts: 3, InitialInterval: time.Second, Multiplier: 2},
			status: dispatch.StatusError, attempts: 3, elapsed: 3 * time.Second,
		},
		{
			name: "max interval caps the backoff", failures: 3, fail: retryable,
			policy: dispatch.RetryPolicy{MaxAttempts: 4, InitialInterval: time.Second, MaxInterval: 5 * time.Second, Multiplier: 10},
			status: dispatch.StatusOK, attempts: 4, elapsed: 11 * time.Second,
		},
		{
			name: "retry after is honoured", failures: 1, fail: dispatch.FailRetryable("busy", "", 7*time.Second),
			policy: dispatch.RetryPolicy{MaxAttempts: 2, InitialInterval: time.Second, MaxInterval: 2 * time.Second},
			status: dispatch.StatusOK, attempts: 2, elapsed: 7 * time.Second,
		},
		{
			name: "retry after is capped", failures: 1, fail: dispatch.FailRetryable("busy", "", time.Hour),
			policy: dispatch.RetryPolicy{MaxAttempts: 2, InitialInterval: time.Second},
			status: dispatch.StatusOK, attempts: 2, elapsed: dispatch.MaxRetryAfter,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				var mu sync.Mutex
				var numbers []int
				tool := dispatch.ToolFunc(func(_ context.Context, _ dispatch.Call, at *dispatch.Attempt) dispatch.Outcome {
					mu.Lock()
					numbers = append(numbers, at.Number())
					mu.Unlock()
					if at.Number() <= tc.failures {
						return tc.fail
					}
					return dispatch.OK(nil, false)
				})
				h := newHost()
				h.tools["read"] = registered{tool: tool, effect: dispatch.EffectRead, retry: tc.policy}
				begin := time.Now()
				if _, err := (dispatch.Wave{Calls: calls("a")}).Run(t.Context(), h); err != nil {
					t.Fatal(err)
				}
				if got := time.Since(begin); got != tc.elapsed {
					t.Errorf("wave took %v, want %v", got, tc.elapsed)
				}
				a := h.accountedCalls()[0]
				if a.Outcome.Status != tc.status || a.Attempts != tc.attempts {
					t.Errorf("accounted %s after %d attempts, want %s after %d", a.Outcome.Status, a.Attempts, tc.status, tc.attempts)
				}
				want := make([]int, tc.attempts)
				for i := range want {
					want[i] = i + 1
				}
				if !slices.Equal(numbers, want) {
					t.Errorf("tool saw attempts %v, want %v", numbers, want)
				}
				if got := a.FinishedAt.Sub(a.StartedAt); got != tc.elapsed {
					t.Errorf("accounted span %v, want %v", got, tc.elapsed)
				}
			})
		})
	}
}

func TestCancelDuringBackoff(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		var mu sync.Mutex
		attempts := 0
		h := newHost()
		h.tools["read"] = registered{effect: dispatch.EffectRead,
			retry: dispatch.RetryPolicy{MaxAttempts: 5, InitialInterval: 10 * time.Second},
			tool: dispatch.ToolFunc(func(context.Context, dispatch.Call, *dispatch.Attempt) dispatch.Outcome {
				mu.Lock()
				attempts++
				mu.Unlock()
				return dispatch.FailRetryable("busy", "", 0)
			})}
		begin := time.Now()
		run := start(ctx, dispatch.Wave{Calls: calls("a")}, h)
		synctest.Wait() // the first attempt failed and the retry waits
		cancel()
		rep, err := run.wait()
		if err != nil {
			t.Fatal(err)
		}
		if got := time.Since(begin); got != 0 {
			t.Errorf("cancelled backoff still waited %v", got)
		}
		a := h.accountedCalls()[0]
		if a.Outcome.Status != dispatch.StatusCancelled || a.Attempts != 1 || attempts != 1 {
			t.Errorf("accounted %+v after %d attempts", a, attempts)
		}
		if rep.Cancelled != 1 {
			t.Errorf("report %+v", rep)
		}
	})
}
