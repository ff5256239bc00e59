package dispatch_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/turnd/turnd/dispatch"
)

// Reads that each wait for all the others can only finish when they all run
// at once; a dispatcher that serialised them would deadlock the bubble.
func TestLeadingReadsRunTogether(t *testing.T) {
	t.Parallel()
	for _, n := range []int{2, 8, 16} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				all := newRendezvous(n)
				h := newHost().register("read", dispatch.EffectRead, dispatch.ToolFunc(
					func(ctx context.Context, call dispatch.Call, _ *dispatch.Attempt) dispatch.Outcome {
						all.arrive()
						<-all.all
						return dispatch.OK([]byte(call.ID), false)
					}))
				ids := make([]string, n)
				for i := range ids {
					ids[i] = fmt.Sprintf("c%d", i)
				}
				w := dispatch.Wave{Calls: calls(ids...)}
				rep, err := w.Run(t.Context(), h)
				if err != nil {
					t.Fatal(err)
				}
				checkOrder(t, h.accountedCalls(), w.Calls)
				if rep.OK != n || rep.Ran != n {
					t.Errorf("report %+v, want %d ok and ran", rep, n)
				}
			})
		})
	}
}

func TestWriteWaitsForEarlierReadsThenWaveIsSerial(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h, g := gatedHost(true)
		w := dispatch.Wave{Calls: calls("r0", "r1", "w2:write", "r3")}
		run := start(t.Context(), w, h)

		synctest.Wait()
		ev := h.eventLog()
		for _, want := range []string{"start r0", "start r1", "admit w2"} {
			indexOf(t, ev, want)
		}
		if slices.Contains(ev, "start w2") || slices.Contains(ev, "admit r3") {
			t.Fatalf("write started, or a call after it was admitted, while reads run: %q", ev)
		}

		g.release("r1", dispatch.OK(nil, false))
		synctest.Wait()
		if ev := h.eventLog(); slices.Contains(ev, "start w2") || slices.Contains(ev, "account r1") {
			t.Fatalf("r1 accounted before r0, or w2 started before r0 answered: %q", ev)
		}

		g.release("r0", dispatch.OK(nil, false))
		synctest.Wait()
		if ev := h.eventLog(); slices.Contains(ev, "admit r3") {
			t.Fatalf("r3 admitted before w2 was accounted: %q", ev)
		}
		g.release("w2", dispatch.OK(nil, false))
		synctest.Wait()
		g.release("r3", dispatch.OK(nil, false))
		if _, err := run.wait(); err != nil {
			t.Fatal(err)
		}

		ev = h.eventLog()
		before(t, ev, "account r0", "account r1")
		before(t, ev, "account r1", "start w2")
		before(t, ev, "account w2", "admit r3")
		checkOrder(t, h.accountedCalls(), w.Calls)
		if got := h.accountedCalls()[2].Effect; got != dispatch.EffectWrite {
			t.Errorf("w2 accounted with effect %q", got)
		}
	})
}

// permutations returns every ordering of 0..n-1.
func permutations(n int) [][]int {
	if n == 0 {
		return [][]int{{}}
	}
	var out [][]int
	for _, p := range permutations(n - 1) {
		for i := 0; i <= len(p); i++ {
			q := slices.Insert(slices.Clone(p), i, n-1)
			out = append(out, q)
		}
	}
	return out
}

// Whatever order tools finish in, the host accounts the same sequence, and
// accounts each call as soon as it and every call before it answered.
func TestAccountingOrderIsIndependentOfFinishOrder(t *testing.T) {
	t.Parallel()
	const n = 5
	outcomeOf := func(i int) dispatch.Outcome {
		if i == 2 {
			return dispatch.Fail("boom", "call 2 fails")
		}
		return dispatch.OK([]byte("out"+strconv.Itoa(i)), false)
	}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = "c" + strconv.Itoa(i)
	}
	var want []summary
	for i := range n {
		s := summary{Index: i, ID: ids[i], Verdict: dispatch.Run, Admitted: true, Status: dispatch.StatusOK,
			Output: "out" + strconv.Itoa(i), Attempts: 1}
		if i == 2 {
			s.Status, s.Code, s.Output = dispatch.StatusError, "boom", ""
		}
		want = append(want, s)
	}
	perms := permutations(n)
	if len(perms) != 120 {
		t.Fatalf("%d permutations of 5", len(perms))
	}
	for _, perm := range perms {
		t.Run(fmt.Sprint(perm), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				h, g := gatedHost(false)
				run := start(t.Context(), dispatch.Wave{Calls: calls(ids...)}, h)
				synctest.Wait()
				released := make([]bool, n)
				for _, i := range perm {
					g.release(ids[i], outcomeOf(i))
					released[i] = true
					synctest.Wait()
					prefix := slices.Index(released, false)
					if prefix < 0 {
						prefix = n
					}
					if got := len(h.accountedCalls()); got != prefix {
						t.Fatalf("after releasing %v: %d calls accounted, want %d", perm, got, prefix)
					}
				}
				if _, err := run.wait(); err != nil {
					t.Fatal(err)
				}
				if got := summarize(h.accountedCalls()); !slices.Equal(got, want) {
					t.Errorf("accounted\n%+v\nwant\n%+v", got, want)
				}
			})
		})
	}
}

// A wave of reads, writes, replays, refusals, errors and retries accounts
// the same sequence whether it runs ordered, concurrent or one at a time.
func TestSerialAndConcurrentRunsAccountAlike(t *testing.T) {
	t.Parallel()
	newWaveHost := func() *host {
		h := newHost()
		echo := dispatch.ToolFunc(func(_ context.Context, call dispatch.Call, at *dispatch.Attempt) dispatch.Outcome {
			switch {
			case strings.HasPrefix(call.ID, "err"):
				return dispatch.Fail("failed", call.ID)
			case strings.HasPrefix(call.ID, "flaky") && at.Number() < 2:
				return dispatch.FailRetryable("flaky", call.ID, 0)
			}
			return dispatch.OK([]byte(call.Name+"("+call.ID+")"), true)
		})
		h.register("read", dispatch.EffectRead, echo).register("write", dispatch.EffectWrite, echo)
		h.tools["read"] = registered{tool: echo, effect: dispatch.EffectRead,
			retry: dispatch.RetryPolicy{MaxAttempts: 3, InitialInterval: 1}}
		h.verdicts["rep"] = dispatch.Admission{Verdict: dispatch.Replay, Outcome: dispatch.OK([]byte("recorded"), false)}
		h.verdicts["ref"] = dispatch.Admission{Verdict: dispatch.Refuse, Outcome: dispatch.Refused("not_granted", "no")}
		return h
	}
	wave := calls("a", "flaky1", "rep", "err1", "b", "ref", "u:unknown", "w1:write", "c", "err2:write", "flaky2", "w2:write", "d")
	var reference []summary
	for _, cfg := range []struct {
		mode  dispatch.Mode
		limit int
	}{
		{dispatch.ModeOrdered, 1}, {dispatch.ModeOrdered, 0}, {dispatch.ModeOrdered, 3},
		{dispatch.ModeConcurrent, 1}, {dispatch.ModeConcurrent, 0}, {dispatch.ModeConcurrent, 3},
	} {
		for round := range 10 {
			h := newWaveHost()
			w := dispatch.Wave{Calls: wave, Mode: cfg.mode, MaxConcurrency: cfg.limit}
			if _, err := w.Run(t.Context(), h); err != nil {
				t.Fatal(err)
			}
			got := summarize(h.accountedCalls())
			if reference == nil {
				reference = got
				checkOrder(t, h.accountedCalls(), wave)
				continue
			}
			if !slices.Equal(got, reference) {
				t.Fatalf("mode %q cap %d round %d accounted\n%+v\nserial run accounted\n%+v", cfg.mode, cfg.limit, round, got, reference)
			}
		}
	}
}

func TestConcurrencyCapIsRespected(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		mode  dispatch.Mode
		limit int
		calls int
	}{
		{"one", dispatch.ModeOrdered, 1, 5},
		{"three of twenty", dispatch.ModeOrdered, 3, 20},
		{"default", dispatch.ModeOrdered, 0, 40},
		{"concurrent mode", dispatch.ModeConcurrent, 4, 12},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				var (
					mu                sync.Mutex
					inFlight, maxSeen int
					release           = make(chan struct{})
					limit             = tc.limit
				)
				if limit == 0 {
					limit = dispatch.DefaultMaxConcurrency
				}
				tool := dispatch.ToolFunc(func(context.Context, dispatch.Call, *dispatch.Attempt) dispatch.Outcome {
					mu.Lock()
					inFlight++
					maxSeen = max(maxSeen, inFlight)
					mu.Unlock()
					<-release
					mu.Lock()
					inFlight--
					mu.Unlock()
					return dispatch.OK(nil, false)
				})
				h := newHost().register("read", dispatch.EffectRead, tool)
				ids := make([]string, tc.calls)
				for i := range ids {
					ids[i] = "c" + strconv.Itoa(i)
				}
				run := start(t.Context(), dispatch.Wave{Calls: calls(ids...), Mode: tc.mode, MaxConcurrency: tc.limit}, h)
				for left := tc.calls; left > 0; left-- {
					synctest.Wait()
					mu.Lock()
					got := inFlight
					mu.Unlock()
					if want := min(limit, left); got != want {
						t.Fatalf("%d tools in flight with %d calls left, want %d", got, left, want)
					}
					release <- struct{}{}
				}
				if _, err := run.wait(); err != nil {
					t.Fatal(err)
				}
				if maxSeen != min(limit, tc.calls) {
					t.Errorf("max in flight %d, cap %d", maxSeen, limit)
				}
				checkOrder(t, h.accountedCalls(), calls(ids...))
			})
		})
	}
}

func TestConcurrentModeStartsWritesAtOnce(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const n = 4
		all := newRendezvous(n)
		h := newHost()
		h.register("write", dispatch.EffectWrite, dispatch.ToolFunc(
			func(context.Context, dispatch.Call, *dispatch.Attempt) dispatch.Outcome {
				all.arrive()
				<-all.all
				return dispatch.OK(nil, false)
			}))
		w := dispatch.Wave{Calls: calls("w0:write", "w1:write", "w2:write", "w3:write"), Mode: dispatch.ModeConcurrent}
		if _, err := w.Run(t.Context(), h); err != nil {
			t.Fatal(err)
		}
		checkOrder(t, h.accountedCalls(), w.Calls)
		ev := h.eventLog()
		if want := []string{"admit w0", "admit w1", "admit w2", "admit w3", "account w0", "account w1", "account w2", "account w3"}; !slices.Equal(ev, want) {
			t.Errorf("events %q, want %q", ev, want)
		}
	})
}

// Replayed and refused calls need no tool, so they do not end the leading
// run of reads: the reads around them still meet.
func TestReplayAndRefuseNeedNoTool(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		all := newRendezvous(2)
		var mu sync.Mutex
		invoked := map[string]int{}
		tool := dispatch.ToolFunc(func(_ context.Context, call dispatch.Call, _ *dispatch.Attempt) dispatch.Outcome {
			mu.Lock()
			invoked[call.ID]++
			mu.Unlock()
			if call.Name == "read" {
				all.arrive()
				<-all.all
			}
			return dispatch.OK(nil, false)
		})
		h := newHost().register("read", dispatch.EffectRead, tool).register("write", dispatch.EffectWrite, tool)
		recorded := dispatch.OK([]byte("recorded"), true)
		recorded.Detail = "projection"
		h.verdicts["rep"] = dispatch.Admission{Verdict: dispatch.Replay, Effect: dispatch.EffectWrite, Outcome: recorded}
		h.verdicts["ref"] = dispatch.Admission{Verdict: dispatch.Refuse, Outcome: dispatch.Outcome{Err: &dispatch.Error{Code: "not_granted"}}}
		w := dispatch.Wave{Calls: calls("r0", "rep:write", "ref:write", "r3")}
		rep, err := w.Run(t.Context(), h)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[string]int{"r0": 1, "r3": 1}; !mapsEqual(invoked, want) {
			t.Errorf("tools invoked %v, want %v", invoked, want)
		}
		as := h.accountedCalls()
		checkOrder(t, as, w.Calls)
		if a := as[1]; a.Verdict != dispatch.Replay || !a.Admitted || a.Attempts != 0 || !a.StartedAt.IsZero() ||
			string(a.Outcome.Output) != "recorded" || a.Outcome.Detail != "projection" {
			t.Errorf("replayed call accounted as %+v", a)
		}
		if a := as[2]; a.Verdict != dispatch.Refuse || a.Outcome.Status != dispatch.StatusRefused || a.Outcome.Err.Code != "not_granted" || a.Attempts != 0 {
			t.Errorf("refused call accounted as %+v", a)
		}
		if rep.Replayed != 1 || rep.Refused != 1 || rep.Ran != 2 || rep.OK != 3 || rep.Calls != 4 {
			t.Errorf("report %+v", rep)
		}
	})
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// Call k is accounted as soon as it answered, while later calls are still
// being fed, admitted or run.
func TestAccountingDoesNotWaitForTheWave(t *testing.T) {
	t.Parallel()
	t.Run("feed", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			h, g := gatedHost(false)
			feed := make(chan dispatch.Call)
			run := start(t.Context(), dispatch.Wave{Feed: feed}, h)
			cs := calls("c0", "c1", "c2")
			feed <- cs[0]
			feed <- cs[1]
			synctest.Wait()
			g.release("c0", dispatch.OK(nil, false))
			synctest.Wait()
			if got := statuses(h.accountedCalls()); !slices.Equal(got, []string{"c0=ok"}) {
				t.Fatalf("accounted %q while c1 runs and the feed is open", got)
			}
			feed <- cs[2]
			close(feed)
			g.release("c2", dispatch.OK(nil, false))
			g.release("c1", dispatch.OK(nil, false))
			if _, err := run.wait(); err != nil {
				t.Fatal(err)
			}
			checkOrder(t, h.accountedCalls(), cs)
		})
	})
	t.Run("slow admission", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			h := newHost()
			c0done := make(chan struct{})
			h.register("read", dispatch.EffectRead, dispatch.ToolFunc(
				func(_ context.Context, call dispatch.Call, _ *dispatch.Attempt) dispatch.Outcome {
					if call.ID == "c0" {
						defer close(c0done)
					}
					return dispatch.OK(nil, false)
				}))
			h.onAdmit = func(call dispatch.Call) {
				if call.ID == "c2" {
					<-c0done // admission is slow, and c0 answers meanwhile
					synctest.Wait()
				}
			}
			w := dispatch.Wave{Calls: calls("c0", "c1", "c2", "c3")}
			if _, err := w.Run(t.Context(), h); err != nil {
				t.Fatal(err)
			}
			before(t, h.eventLog(), "account c0", "admit c3")
		})
	})
}
