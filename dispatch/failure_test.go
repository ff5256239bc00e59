package dispatch_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/turnd/turnd/dispatch"
)

func TestCancellation(t *testing.T) {
	t.Parallel()
	t.Run("while running", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			h, _ := gatedHost(true)
			// stubborn ignores cancellation: what it did is kept.
			h.register("stubborn", dispatch.EffectRead, dispatch.ToolFunc(
				func(ctx context.Context, _ dispatch.Call, _ *dispatch.Attempt) dispatch.Outcome {
					<-ctx.Done()
					return dispatch.OK([]byte("done anyway"), false)
				}))
			w := dispatch.Wave{Calls: calls("r0", "s1:stubborn", "r2", "w3:write", "r4")}
			run := start(ctx, w, h)
			synctest.Wait()
			cancel()
			rep, err := run.wait()
			if err != nil {
				t.Fatalf("a cancelled wave is not an error: %v", err)
			}
			as := h.accountedCalls()
			checkOrder(t, as, w.Calls)
			want := []string{"r0=cancelled/cancelled", "s1=ok", "r2=cancelled/cancelled", "w3=cancelled/cancelled", "r4=cancelled/cancelled"}
			if got := statuses(as); !slices.Equal(got, want) {
				t.Errorf("accounted %q, want %q", got, want)
			}
			if a := as[3]; !a.Admitted || a.Verdict != dispatch.Run || a.Attempts != 0 {
				t.Errorf("write admitted but never run accounted as %+v", a)
			}
			if a := as[4]; a.Admitted || a.Verdict != dispatch.Refuse {
				t.Errorf("call never admitted accounted as %+v", a)
			}
			if got := h.admittedIDs(); !slices.Equal(got, []string{"r0", "s1", "r2", "w3"}) {
				t.Errorf("admitted %q after cancellation", got)
			}
			if !rep.Interrupted || rep.Cancelled != 4 || rep.OK != 1 {
				t.Errorf("report %+v", rep)
			}
		})
	})
	t.Run("before the wave", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		h := newHost().register("read", dispatch.EffectRead, okTool("x"))
		rep, err := dispatch.Wave{Calls: calls("a", "b")}.Run(ctx, h)
		if err != nil {
			t.Fatal(err)
		}
		if got := statuses(h.accountedCalls()); !slices.Equal(got, []string{"a=cancelled/cancelled", "b=cancelled/cancelled"}) {
			t.Errorf("accounted %q", got)
		}
		if len(h.admittedIDs()) != 0 || rep.Ran != 0 || !rep.Interrupted {
			t.Errorf("admitted %q, report %+v", h.admittedIDs(), rep)
		}
	})
	t.Run("open feed", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			h, _ := gatedHost(false)
			feed := make(chan dispatch.Call)
			run := start(ctx, dispatch.Wave{Feed: feed}, h)
			feed <- calls("a")[0]
			synctest.Wait()
			cancel()
			if _, err := run.wait(); err != nil {
				t.Fatal(err)
			}
			close(feed)
			if got := statuses(h.accountedCalls()); !slices.Equal(got, []string{"a=cancelled/cancelled"}) {
				t.Errorf("accounted %q", got)
			}
		})
	})
}

func TestPanickingToolBecomesAnError(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, message string
		tool          dispatch.ToolFunc
	}{
		{"panic", "kaboom", func(context.Context, dispatch.Call, *dispatch.Attempt) dispatch.Outcome { panic("kaboom") }},
		{"goexit", "exited", func(context.Context, dispatch.Call, *dispatch.Attempt) dispatch.Outcome {
			runtime.Goexit()
			return dispatch.Outcome{}
		}},
	} {
		for _, limit := range []int{1, 2, 0} {
			t.Run(fmt.Sprintf("%s cap %d", tc.name, limit), func(t *testing.T) {
				t.Parallel()
				h := newHost().register("read", dispatch.EffectRead, okTool("fine")).register("bad", dispatch.EffectRead, tc.tool)
				w := dispatch.Wave{Calls: calls("a", "b:bad", "c:bad", "d"), MaxConcurrency: limit}
				rep, err := w.Run(t.Context(), h)
				if err != nil {
					t.Fatal(err)
				}
				as := h.accountedCalls()
				checkOrder(t, as, w.Calls)
				if got := statuses(as); !slices.Equal(got, []string{"a=ok", "b=error/tool_panic", "c=error/tool_panic", "d=ok"}) {
					t.Errorf("accounted %q", got)
				}
				if msg := as[1].Outcome.Err.Message; !strings.Contains(msg, tc.message) {
					t.Errorf("panic message %q does not mention %q", msg, tc.message)
				}
				if rep.Errors != 2 || rep.OK != 2 {
					t.Errorf("report %+v", rep)
				}
			})
		}
	}
}

func TestFailFast(t *testing.T) {
	t.Parallel()
	type step struct {
		id      string
		outcome dispatch.Outcome
	}
	boom := dispatch.Fail("boom", "")
	ok := dispatch.OK(nil, false)
	for _, tc := range []struct {
		name     string
		calls    []string
		limit    int
		steps    []step
		want     []string
		admitted []string
	}{
		{
			name:  "later calls cancelled or refused, earlier ones finish",
			calls: []string{"r0", "r1", "r2", "w3:write", "r4"},
			steps: []step{{"r1", boom}, {"r0", ok}},
			want: []string{"r0=ok", "r1=error/boom", "r2=cancelled/cancelled",
				"w3=refused/turn_failed", "r4=refused/turn_failed"},
			admitted: []string{"r0", "r1", "r2", "w3"},
		},
		{
			name:     "queued calls never start",
			calls:    []string{"r0", "r1", "r2"},
			limit:    1,
			steps:    []step{{"r0", boom}},
			want:     []string{"r0=error/boom", "r1=refused/turn_failed", "r2=refused/turn_failed"},
			admitted: []string{"r0", "r1", "r2"},
		},
		{
			name:     "an earlier failure after a later one",
			calls:    []string{"r0", "r1", "r2", "r3"},
			steps:    []step{{"r2", boom}, {"r1", boom}, {"r0", ok}},
			want:     []string{"r0=ok", "r1=error/boom", "r2=error/boom", "r3=cancelled/cancelled"},
			admitted: []string{"r0", "r1", "r2", "r3"},
		},
		{
			name:     "a refusal taints",
			calls:    []string{"r0", "x1:unknown", "r2", "w3:write"},
			steps:    []step{{"r0", ok}},
			want:     []string{"r0=ok", "x1=refused/unknown_tool", "r2=refused/turn_failed", "w3=refused/turn_failed"},
			admitted: []string{"r0", "x1"},
		},
		{
			name:     "a write's error taints",
			calls:    []string{"w0:write", "w1:write"},
			steps:    []step{{"w0", boom}},
			want:     []string{"w0=error/boom", "w1=refused/turn_failed"},
			admitted: []string{"w0"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				h, g := gatedHost(true)
				w := dispatch.Wave{Calls: calls(tc.calls...), FailurePolicy: dispatch.PolicyFailFast, MaxConcurrency: tc.limit}
				run := start(t.Context(), w, h)
				for _, s := range tc.steps {
					synctest.Wait()
					g.release(s.id, s.outcome)
				}
				rep, err := run.wait()
				if err != nil {
					t.Fatal(err)
				}
				as := h.accountedCalls()
				checkOrder(t, as, w.Calls)
				if got := statuses(as); !slices.Equal(got, tc.want) {
					t.Errorf("accounted %q, want %q", got, tc.want)
				}
				if got := h.admittedIDs(); !slices.Equal(got, tc.admitted) {
					t.Errorf("host admitted %q, want %q", got, tc.admitted)
				}
				if !rep.Tainted {
					t.Errorf("report %+v not tainted", rep)
				}
			})
		})
	}
	t.Run("isolate leaves the others alone", func(t *testing.T) {
		t.Parallel()
		h := newHost().register("read", dispatch.EffectRead, okTool("x"))
		rep, err := dispatch.Wave{Calls: calls("a", "x:unknown", "b")}.Run(t.Context(), h)
		if err != nil {
			t.Fatal(err)
		}
		if got := statuses(h.accountedCalls()); !slices.Equal(got, []string{"a=ok", "x=refused/unknown_tool", "b=ok"}) || rep.Tainted {
			t.Errorf("accounted %q, report %+v", got, rep)
		}
	})
}

func TestDuplicateCallIDIsRefused(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h, g := gatedHost(false)
		w := dispatch.Wave{Calls: calls("a", "a", "b")}
		run := start(t.Context(), w, h)
		synctest.Wait()
		g.release("a", dispatch.OK([]byte("first"), false))
		g.release("b", dispatch.OK(nil, false))
		if _, err := run.wait(); err != nil {
			t.Fatal(err)
		}
		as := h.accountedCalls()
		if got := statuses(as); !slices.Equal(got, []string{"a=ok", "a=refused/duplicate_call_id", "b=ok"}) {
			t.Errorf("accounted %q", got)
		}
		if string(as[0].Outcome.Output) != "first" || as[1].Admitted || as[1].Index != 1 {
			t.Errorf("accounted %+v", as)
		}
		if got := h.admittedIDs(); !slices.Equal(got, []string{"a", "b"}) {
			t.Errorf("host admitted %q", got)
		}
	})
}

func TestBadWaves(t *testing.T) {
	t.Parallel()
	closed := make(chan dispatch.Call)
	close(closed)
	for _, tc := range []struct {
		name string
		wave dispatch.Wave
		nil  bool // nil host
		err  error
	}{
		{name: "no calls", wave: dispatch.Wave{}},
		{name: "empty calls", wave: dispatch.Wave{Calls: []dispatch.Call{}}},
		{name: "feed closed at once", wave: dispatch.Wave{Feed: closed}},
		{name: "calls and feed", wave: dispatch.Wave{Calls: calls("a"), Feed: closed}, err: dispatch.ErrInvalidWave},
		{name: "unknown mode", wave: dispatch.Wave{Calls: calls("a"), Mode: "sideways"}, err: dispatch.ErrInvalidWave},
		{name: "unknown policy", wave: dispatch.Wave{Calls: calls("a"), FailurePolicy: "maybe"}, err: dispatch.ErrInvalidWave},
		{name: "negative cap", wave: dispatch.Wave{Calls: calls("a"), MaxConcurrency: -1}, err: dispatch.ErrInvalidWave},
		{name: "nil host", wave: dispatch.Wave{Calls: calls("a")}, nil: true, err: dispatch.ErrInvalidWave},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHost().register("read", dispatch.EffectRead, okTool("x"))
			var host dispatch.Host = h
			if tc.nil {
				host = nil
			}
			rep, err := tc.wave.Run(t.Context(), host)
			if !errors.Is(err, tc.err) || (tc.err == nil && err != nil) {
				t.Fatalf("error %v, want %v", err, tc.err)
			}
			if rep != (dispatch.Report{}) || len(h.eventLog()) != 0 {
				t.Errorf("report %+v, events %q", rep, h.eventLog())
			}
		})
	}
}

func TestAccountErrorAbortsTheWave(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h, g := gatedHost(true)
		h.accountErr["r0"] = errHost
		w := dispatch.Wave{Calls: calls("r0", "r1", "r2", "w3:write", "r4")}
		run := start(t.Context(), w, h)
		synctest.Wait()
		g.release("r2", dispatch.OK(nil, false))
		g.release("r0", dispatch.OK(nil, false))
		rep, err := run.wait()
		if !errors.Is(err, dispatch.ErrAccount) || !errors.Is(err, errHost) {
			t.Fatalf("error %v, want ErrAccount wrapping the host's", err)
		}
		ev := h.eventLog()
		// Run waited for r1's tool, which it cancelled.
		indexOf(t, ev, "stopped r1")
		if got := len(h.accountedCalls()); got != 1 {
			t.Errorf("Account called %d times after failing", got)
		}
		if slices.Contains(ev, "admit r4") || slices.Contains(ev, "start w3") {
			t.Errorf("wave went on after the abort: %q", ev)
		}
		if rep.Calls != 0 {
			t.Errorf("report %+v counts the call whose accounting failed", rep)
		}
	})
}

// hookHost adds an AttemptHook to host.
type hookHost struct {
	*host
	mu   sync.Mutex
	seen []string
	fail map[string]error
}

func (h *hookHost) BeforeAttempt(_ context.Context, call dispatch.Call, effect dispatch.Effect, attempt int) error {
	h.mu.Lock()
	h.seen = append(h.seen, call.ID+"/"+string(effect)+"/"+string(rune('0'+attempt)))
	h.mu.Unlock()
	return h.fail[call.ID]
}

func TestAttemptHook(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var ran []string
	tool := dispatch.ToolFunc(func(_ context.Context, call dispatch.Call, at *dispatch.Attempt) dispatch.Outcome {
		mu.Lock()
		ran = append(ran, call.ID)
		mu.Unlock()
		if call.ID == "flaky" && at.Number() == 1 {
			return dispatch.FailRetryable("busy", "", 0)
		}
		return dispatch.OK(nil, false)
	})
	h := &hookHost{host: newHost(), fail: map[string]error{"w2": errHost}}
	h.register("read", dispatch.EffectRead, tool).register("write", dispatch.EffectWrite, tool)
	h.tools["write"] = registered{tool: tool, effect: dispatch.EffectWrite, retry: dispatch.RetryPolicy{MaxAttempts: 2, InitialInterval: 1}}
	h.verdicts["rep"] = dispatch.Admission{Verdict: dispatch.Replay, Outcome: dispatch.OK(nil, false)}
	w := dispatch.Wave{Calls: calls("r0", "rep", "flaky:write", "w2:write")}
	if _, err := w.Run(t.Context(), h); err != nil {
		t.Fatal(err)
	}
	if want := []string{"r0/read/1", "flaky/write/1", "flaky/write/2", "w2/write/1"}; !slices.Equal(h.seen, want) {
		t.Errorf("BeforeAttempt saw %q, want %q", h.seen, want)
	}
	if want := []string{"r0", "flaky", "flaky"}; !slices.Equal(ran, want) {
		t.Errorf("tools ran %q, want %q", ran, want)
	}
	as := h.accountedCalls()
	if a := as[3]; a.Outcome.Status != dispatch.StatusError || a.Outcome.Err.Code != dispatch.CodeAttemptNotRecorded ||
		!strings.Contains(a.Outcome.Err.Message, errHost.Error()) || a.Attempts != 0 {
		t.Errorf("unrecorded attempt accounted as %+v", a)
	}
	if a := as[2]; a.Attempts != 2 || a.Outcome.Status != dispatch.StatusOK {
		t.Errorf("retried write accounted as %+v", a)
	}
}

func TestMalformedAdmissionsAndOutcomes(t *testing.T) {
	t.Parallel()
	h := newHost()
	h.register("read", dispatch.EffectRead, dispatch.ToolFunc(
		func(_ context.Context, call dispatch.Call, _ *dispatch.Attempt) dispatch.Outcome {
			switch call.ID {
			case "zero":
				return dispatch.Outcome{Detail: 7}
			case "bare":
				return dispatch.Outcome{Status: dispatch.StatusError}
			}
			return dispatch.OK(nil, false)
		}))
	h.verdicts["nil-tool"] = dispatch.Admission{Verdict: dispatch.Run}
	h.verdicts["odd-verdict"] = dispatch.Admission{Verdict: dispatch.Verdict(9), Tool: okTool("x")}
	h.verdicts["bare-refusal"] = dispatch.Admission{Verdict: dispatch.Refuse}
	w := dispatch.Wave{Calls: calls("nil-tool", "odd-verdict", "zero", "bare", "bare-refusal")}
	if _, err := w.Run(t.Context(), h); err != nil {
		t.Fatal(err)
	}
	as := h.accountedCalls()
	want := []string{"nil-tool=refused/invalid_admission", "odd-verdict=refused/invalid_admission",
		"zero=error/invalid_outcome", "bare=error/tool_error", "bare-refusal=refused/refused"}
	if got := statuses(as); !slices.Equal(got, want) {
		t.Errorf("accounted %q, want %q", got, want)
	}
	if as[2].Outcome.Detail != 7 {
		t.Errorf("detail lost: %+v", as[2].Outcome)
	}
}

// A host that panics takes the wave down with it, but not its tools: they
// are cancelled and waited for (goleak checks in TestMain).
func TestPanickingHostLeaksNothing(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h, _ := gatedHost(false)
		h.onAdmit = func(call dispatch.Call) {
			if call.ID == "c2" {
				synctest.Wait() // c0 and c1 are running
				panic("host bug")
			}
		}
		defer func() {
			if v := recover(); v != "host bug" {
				t.Errorf("recovered %v", v)
			}
			indexOf(t, h.eventLog(), "stopped c0")
			indexOf(t, h.eventLog(), "stopped c1")
		}()
		_, _ = dispatch.Wave{Calls: calls("c0", "c1", "c2")}.Run(t.Context(), h)
		t.Error("Run returned despite the panic")
	})
}

func TestCancellationOfASerialWave(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		h, _ := gatedHost(true)
		w := dispatch.Wave{Calls: calls("w0:write", "r1", "w2:write")}
		run := start(ctx, w, h)
		synctest.Wait()
		cancel()
		if _, err := run.wait(); err != nil {
			t.Fatal(err)
		}
		want := []string{"w0=cancelled/cancelled", "r1=cancelled/cancelled", "w2=cancelled/cancelled"}
		if got := statuses(h.accountedCalls()); !slices.Equal(got, want) {
			t.Errorf("accounted %q, want %q", got, want)
		}
		if got := h.admittedIDs(); !slices.Equal(got, []string{"w0"}) {
			t.Errorf("admitted %q", got)
		}
	})
}

// An aborted wave stops reading its feed: the feeder is not waited for.
func TestAccountErrorAbandonsTheFeed(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h := newHost().register("read", dispatch.EffectRead, okTool("x"))
		h.accountErr["a"] = errHost
		feed := make(chan dispatch.Call)
		run := start(t.Context(), dispatch.Wave{Feed: feed}, h)
		feed <- calls("a")[0]
		if _, err := run.wait(); !errors.Is(err, errHost) {
			t.Fatalf("error %v", err)
		}
		close(feed)
	})
}
