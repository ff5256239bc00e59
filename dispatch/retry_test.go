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

// TestTries: a retried call's attempts are accounted with when each ran
// and how it ended, the backoff between them; a call tried once has none.
func TestTries(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		timeout := dispatch.FailRetryable("tool_unavailable", "no answer within 1s", 0)
		timeout.Err.TimedOut = true
		answers := []dispatch.Outcome{dispatch.FailRetryable("busy", "", 0), timeout, dispatch.OK(nil, false)}
		h := newHost()
		h.tools["read"] = registered{effect: dispatch.EffectRead,
			retry: dispatch.RetryPolicy{MaxAttempts: 5, InitialInterval: 2 * time.Second, Multiplier: 2},
			tool: dispatch.ToolFunc(func(_ context.Context, _ dispatch.Call, at *dispatch.Attempt) dispatch.Outcome {
				time.Sleep(time.Second)
				return answers[at.Number()-1]
			})}
		h.tools["once"] = registered{effect: dispatch.EffectRead, tool: okTool("once")}
		begin := time.Now()
		if _, err := (dispatch.Wave{Calls: calls("a:read", "b:once")}).Run(t.Context(), h); err != nil {
			t.Fatal(err)
		}
		at := func(s int) time.Time { return begin.Add(time.Duration(s) * time.Second) }
		// 1 s attempts; 2 s, then 4 s of backoff between them.
		want := []dispatch.Try{
			{StartedAt: at(0), FinishedAt: at(1), Status: dispatch.StatusError, Err: answers[0].Err},
			{StartedAt: at(3), FinishedAt: at(4), Status: dispatch.StatusError, Err: answers[1].Err},
			{StartedAt: at(8), FinishedAt: at(9), Status: dispatch.StatusOK},
		}
		got := h.accountedCalls()
		same := func(a, b dispatch.Try) bool {
			return a.StartedAt.Equal(b.StartedAt) && a.FinishedAt.Equal(b.FinishedAt) && a.Status == b.Status && a.Err == b.Err
		}
		if a := got[0]; !slices.EqualFunc(a.Tries, want, same) || a.Attempts != 3 || !a.StartedAt.Equal(at(0)) || !a.FinishedAt.Equal(at(9)) {
			t.Errorf("accounted %d attempts %v to %v, tries\n%+v\nwant\n%+v", a.Attempts, a.StartedAt.Sub(begin), a.FinishedAt.Sub(begin), a.Tries, want)
		}
		if !got[0].Tries[1].Err.TimedOut {
			t.Error("the timed-out attempt lost its mark")
		}
		if got[1].Tries != nil {
			t.Errorf("a call tried once has tries %+v", got[1].Tries)
		}
	})
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
		// The attempt that ran is the one try: the retry never started.
		if len(a.Tries) != 1 || a.Tries[0].Status != dispatch.StatusError || a.Tries[0].Err.Code != "busy" {
			t.Errorf("tries %+v, want the one failed attempt", a.Tries)
		}
		if rep.Cancelled != 1 {
			t.Errorf("report %+v", rep)
		}
	})
}
