package dispatch_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/turnd/turnd/dispatch"
)

// held is a tool whose calls block until the test lets them answer. Run
// inside a synctest bubble, synctest.Wait tells exactly which calls have
// started: the proof of overlap is the set of calls running at once, not
// a measured time.
type held struct {
	mu      sync.Mutex
	started []string
	running map[string]bool
	most    int // most calls running at once
	answer  map[string]chan dispatch.Outcome
}

func newHeld() *held {
	return &held{running: map[string]bool{}, answer: map[string]chan dispatch.Outcome{}}
}

func (h *held) gate(id string) chan dispatch.Outcome {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.answer[id]
	if c == nil {
		c = make(chan dispatch.Outcome, 1)
		h.answer[id] = c
	}
	return c
}

func (h *held) Invoke(ctx context.Context, call dispatch.Call, at *dispatch.Attempt) dispatch.Outcome {
	h.mu.Lock()
	h.started = append(h.started, call.ID)
	h.running[call.ID] = true
	h.most = max(h.most, len(h.running))
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.running, call.ID)
		h.mu.Unlock()
	}()
	select {
	case o := <-h.gate(call.ID):
		if o.Status == dispatch.StatusPending {
			if _, err := at.CompletionKey(ctx); err != nil {
				return dispatch.Fail("no_key", err.Error())
			}
		}
		return o
	case <-ctx.Done():
		return dispatch.Fail("stopped", context.Cause(ctx).Error())
	}
}

// answer lets call id return o.
func (h *held) answerWith(id string, o dispatch.Outcome) { h.gate(id) <- o }

// startedSet is the calls started so far, sorted, space-separated.
func (h *held) startedSet() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := slices.Clone(h.started)
	slices.Sort(s)
	return strings.Join(s, " ")
}

// keyedCall is a call with its admission: effect and resources ("-" for
// none declared).
type keyedCall struct {
	id, effect string
	res        string // comma-separated; "-" declares none
	gates      []dispatch.Gate
}

func keyedWave(h *host, tool dispatch.Tool, cs []keyedCall) []dispatch.Call {
	out := make([]dispatch.Call, len(cs))
	for i, c := range cs {
		out[i] = dispatch.Call{ID: c.id, Name: "t", Arguments: []byte(`{}`)}
		adm := dispatch.Admission{Verdict: dispatch.Run, Tool: tool, Effect: dispatch.Effect(c.effect), Gates: c.gates}
		if c.res != "-" {
			adm.Resources = strings.Split(c.res, ",")
		}
		h.verdicts[c.id] = adm
	}
	return out
}

type keyedStep struct {
	answer string // call to let answer ok first ("" for none)
	want   string // the calls started once everything settles
}

func TestResourcesSchedule(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		calls []keyedCall
		steps []keyedStep
	}{
		{"writes on different resources overlap",
			[]keyedCall{{"w1", "write", "file:a", nil}, {"w2", "write", "file:b", nil}},
			[]keyedStep{{"", "w1 w2"}}},
		{"writes on one resource run in call order",
			[]keyedCall{{"w1", "write", "file:a", nil}, {"w2", "write", "file:a", nil}, {"w3", "write", "file:a", nil}},
			[]keyedStep{{"", "w1"}, {"w1", "w1 w2"}, {"w2", "w1 w2 w3"}}},
		{"reads of one resource share it",
			[]keyedCall{{"r1", "read", "file:a", nil}, {"r2", "read", "file:a", nil}},
			[]keyedStep{{"", "r1 r2"}}},
		{"a read waits for an earlier write on its resource only",
			[]keyedCall{{"w1", "write", "file:a", nil}, {"r2", "read", "file:a", nil}, {"r3", "read", "file:b", nil}},
			[]keyedStep{{"", "r3 w1"}, {"w1", "r2 r3 w1"}}},
		{"a write waits for an earlier read of its resource",
			[]keyedCall{{"r1", "read", "file:a", nil}, {"w2", "write", "file:a", nil}, {"w3", "write", "file:b", nil}},
			[]keyedStep{{"", "r1 w3"}, {"r1", "r1 w2 w3"}}},
		{"a call touching two resources waits for both",
			[]keyedCall{{"w1", "write", "file:a", nil}, {"w2", "write", "file:b", nil}, {"w3", "write", "file:a,file:b", nil}, {"w4", "write", "file:c", nil}},
			[]keyedStep{{"", "w1 w2 w4"}, {"w1", "w1 w2 w4"}, {"w2", "w1 w2 w3 w4"}}},
		{"a resource-less write after keyed writes waits for all",
			[]keyedCall{{"w1", "write", "file:a", nil}, {"w2", "write", "file:b", nil}, {"w3", "write", "-", nil}, {"w4", "write", "file:c", nil}},
			[]keyedStep{{"", "w1 w2"}, {"w1", "w1 w2"}, {"w2", "w1 w2 w3"}, {"w3", "w1 w2 w3 w4"}}},
		{"a keyed write waits for resource-less leading reads",
			[]keyedCall{{"r1", "read", "-", nil}, {"r2", "read", "file:a", nil}, {"w3", "write", "file:b", nil}},
			[]keyedStep{{"", "r1 r2"}, {"r1", "r1 r2 w3"}}},
		{"a resource-less read after a keyed write waits for everything",
			[]keyedCall{{"w1", "write", "file:a", nil}, {"r2", "read", "file:b", nil}, {"r3", "read", "-", nil}},
			[]keyedStep{{"", "r2 w1"}, {"w1", "r2 w1"}, {"r2", "r2 r3 w1"}}},
		{"keyed calls after a resource-less write wait for it",
			[]keyedCall{{"w1", "write", "-", nil}, {"w2", "write", "file:a", nil}, {"w3", "write", "file:b", nil}},
			[]keyedStep{{"", "w1"}, {"w1", "w1 w2 w3"}}},
		{"a repeated resource in one call is one",
			[]keyedCall{{"w1", "write", "file:a,file:a", nil}, {"w2", "write", "file:b", nil}},
			[]keyedStep{{"", "w1 w2"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				h, tool := newHost(), newHeld()
				wave := keyedWave(h, tool, tc.calls)
				run := start(t.Context(), dispatch.Wave{Calls: wave}, h)
				for i, st := range tc.steps {
					if st.answer != "" {
						tool.answerWith(st.answer, dispatch.OK([]byte(`"ok"`), false))
					}
					synctest.Wait()
					if got := tool.startedSet(); got != st.want {
						t.Fatalf("step %d: started %q, want %q", i, got, st.want)
					}
				}
				for _, c := range tc.calls {
					tool.answerWith(c.id, dispatch.OK([]byte(`"ok"`), false))
				}
				if _, err := run.wait(); err != nil {
					t.Fatal(err)
				}
				checkOrder(t, h.accountedCalls(), wave)
				for _, a := range h.accountedCalls() {
					if a.Outcome.Status != dispatch.StatusOK {
						t.Errorf("%s: %s", a.Call.ID, a.Outcome.Status)
					}
				}
			})
		})
	}
}

// TestResourcesKeepTodaysRule: without resources the first write still
// makes the rest of the wave serial, reads after it included.
func TestResourcesKeepTodaysRule(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h, tool := newHost(), newHeld()
		wave := keyedWave(h, tool, []keyedCall{
			{"r1", "read", "-", nil}, {"r2", "read", "-", nil}, {"w3", "write", "-", nil},
			{"r4", "read", "-", nil}, {"r5", "read", "-", nil},
		})
		run := start(t.Context(), dispatch.Wave{Calls: wave}, h)
		for _, st := range []keyedStep{{"", "r1 r2"}, {"r1", "r1 r2"}, {"r2", "r1 r2 w3"}, {"w3", "r1 r2 r4 w3"}, {"r4", "r1 r2 r4 r5 w3"}, {"r5", "r1 r2 r4 r5 w3"}} {
			if st.answer != "" {
				tool.answerWith(st.answer, dispatch.OK(nil, false))
			}
			synctest.Wait()
			if got := tool.startedSet(); got != st.want {
				t.Fatalf("after %q: started %q, want %q", st.answer, got, st.want)
			}
			// Admission waits with running: nothing after a running
			// resource-less write is even admitted.
			if st.answer == "r2" && slices.Contains(h.admittedIDs(), "r4") {
				t.Fatalf("r4 admitted while w3 runs: %q", h.admittedIDs())
			}
		}
		if _, err := run.wait(); err != nil {
			t.Fatal(err)
		}
	})
}

type fixedKeys struct{}

func (fixedKeys) IssueKey(_ context.Context, c dispatch.Call) (string, error) {
	return "key-" + c.ID, nil
}

// TestParkedWriteHoldsItsResources: a call that parks keeps its resources
// until the wave hears that it settled; calls on other resources go on.
func TestParkedWriteHoldsItsResources(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h, tool := newHost(), newHeld()
		wave := keyedWave(h, tool, []keyedCall{
			{"w1", "write", "file:a", nil}, {"w2", "write", "file:a", nil}, {"w3", "write", "file:b", nil}, {"w4", "write", "-", nil},
		})
		released := make(chan int)
		run := start(t.Context(), dispatch.Wave{Calls: wave, Keys: fixedKeys{}, Released: released}, h)
		tool.answerWith("w1", dispatch.Outcome{Status: dispatch.StatusPending})
		tool.answerWith("w3", dispatch.OK(nil, false))
		synctest.Wait()
		if got := tool.startedSet(); got != "w1 w3" {
			t.Fatalf("started %q while w1 is parked, want w1 w3", got)
		}
		if n := len(h.accountedCalls()); n != 1 {
			t.Fatalf("accounted %d calls, want w1 (pending) only", n)
		}
		released <- 0
		synctest.Wait()
		if got := tool.startedSet(); got != "w1 w2 w3" {
			t.Fatalf("after w1 settled: started %q, want w1 w2 w3", got)
		}
		tool.answerWith("w2", dispatch.OK(nil, false))
		tool.answerWith("w4", dispatch.OK(nil, false))
		if _, err := run.wait(); err != nil {
			t.Fatal(err)
		}
		if got := statuses(h.accountedCalls()); !slices.Equal(got, []string{"w1=pending", "w2=ok", "w3=ok", "w4=ok"}) {
			t.Fatalf("accounted %q", got)
		}
	})
}

// TestReplayedParkedCallHoldsItsResources: after a restart the parked call
// is replayed as pending, and still holds what it held.
func TestReplayedParkedCallHoldsItsResources(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h, tool := newHost(), newHeld()
		wave := keyedWave(h, tool, []keyedCall{{"w1", "write", "file:a", nil}, {"w2", "write", "file:a", nil}})
		h.verdicts["w1"] = dispatch.Admission{Verdict: dispatch.Replay, Effect: dispatch.EffectWrite, Resources: []string{"file:a"},
			Outcome: dispatch.Outcome{Status: dispatch.StatusPending, Pending: &dispatch.Pending{Key: "key-w1"}}}
		released := make(chan int)
		run := start(t.Context(), dispatch.Wave{Calls: wave, Released: released}, h)
		synctest.Wait()
		if got := tool.startedSet(); got != "" {
			t.Fatalf("started %q while w1 is parked", got)
		}
		released <- 0
		tool.answerWith("w2", dispatch.OK(nil, false))
		if _, err := run.wait(); err != nil {
			t.Fatal(err)
		}
		if got := tool.startedSet(); got != "w2" {
			t.Fatalf("started %q", got)
		}
	})
}

// TestFailFastWithResources: calls after the failure that have not started
// are refused; a write already running is left to finish.
func TestFailFastWithResources(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h, tool := newHost(), newHeld()
		wave := keyedWave(h, tool, []keyedCall{
			{"w1", "write", "file:a", nil}, {"w2", "write", "file:b", nil}, {"w3", "write", "file:b", nil}, {"r4", "read", "file:c", nil},
		})
		run := start(t.Context(), dispatch.Wave{Calls: wave, FailurePolicy: dispatch.PolicyFailFast}, h)
		synctest.Wait()
		if got := tool.startedSet(); got != "r4 w1 w2" {
			t.Fatalf("started %q", got)
		}
		tool.answerWith("w1", dispatch.Fail("boom", "w1 failed"))
		synctest.Wait()
		tool.answerWith("w2", dispatch.OK([]byte(`"done"`), false))
		if _, err := run.wait(); err != nil {
			t.Fatal(err)
		}
		want := []string{"w1=error/boom", "w2=ok", "w3=refused/turn_failed", "r4=cancelled/cancelled"}
		if got := statuses(h.accountedCalls()); !slices.Equal(got, want) {
			t.Fatalf("accounted %q, want %q", got, want)
		}
	})
}

// TestCancelledWaveCancelsBlockedCalls: a call blocked behind a resource
// is accounted cancelled, without running.
func TestCancelledWaveCancelsBlockedCalls(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h, tool := newHost(), newHeld()
		wave := keyedWave(h, tool, []keyedCall{{"w1", "write", "file:a", nil}, {"w2", "write", "file:a", nil}})
		ctx, cancel := context.WithCancel(t.Context())
		run := start(ctx, dispatch.Wave{Calls: wave}, h)
		synctest.Wait()
		cancel()
		rep, err := run.wait()
		if err != nil {
			t.Fatal(err)
		}
		got := h.accountedCalls()
		if !rep.Interrupted || len(got) != 2 || got[1].Outcome.Status != dispatch.StatusCancelled || got[1].Attempts != 0 {
			t.Fatalf("report %+v, accounted %q", rep, statuses(got))
		}
		if tool.startedSet() != "w1" {
			t.Fatalf("started %q", tool.startedSet())
		}
	})
}

// TestGateCapsAcrossWaves: two waves share a cap of one; their calls never
// overlap, and a wave's calls take the gate in call order.
func TestGateCapsAcrossWaves(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		limit := dispatch.NewLimit(1)
		tool := newHeld()
		var runs []*waveRun
		var hosts []*host
		for _, w := range []string{"a", "b"} {
			h := newHost()
			wave := keyedWave(h, tool, []keyedCall{
				{w + "1", "read", "-", []dispatch.Gate{limit}}, {w + "2", "read", "-", []dispatch.Gate{limit}}, {w + "3", "read", "-", []dispatch.Gate{limit}},
			})
			runs = append(runs, start(t.Context(), dispatch.Wave{Calls: wave}, h))
			hosts = append(hosts, h)
			synctest.Wait()
		}
		for range 6 {
			synctest.Wait()
			tool.mu.Lock()
			running := len(tool.running)
			var id string
			for k := range tool.running {
				id = k
			}
			tool.mu.Unlock()
			if running != 1 {
				t.Fatalf("%d calls running under a cap of 1", running)
			}
			tool.answerWith(id, dispatch.OK(nil, false))
		}
		for _, r := range runs {
			if _, err := r.wait(); err != nil {
				t.Fatal(err)
			}
		}
		if tool.most != 1 {
			t.Fatalf("at most %d at once", tool.most)
		}
		// Each wave's own calls started in call order.
		for _, w := range []string{"a", "b"} {
			var order []string
			for _, id := range tool.started {
				if strings.HasPrefix(id, w) {
					order = append(order, id)
				}
			}
			if want := []string{w + "1", w + "2", w + "3"}; !slices.Equal(order, want) {
				t.Fatalf("wave %s started %q, want %q", w, order, want)
			}
		}
		for _, h := range hosts {
			for _, a := range h.accountedCalls() {
				if a.ReadyAt.IsZero() || a.StartedAt.Before(a.ReadyAt) {
					t.Errorf("%s: ready %v, started %v", a.Call.ID, a.ReadyAt, a.StartedAt)
				}
			}
		}
	})
}

// TestGatePerSession: each key of a LimitSet has its own cap, and a key
// whose runs are done keeps nothing.
func TestGatePerSession(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		set := dispatch.NewLimitSet(1)
		tool := newHeld()
		h := newHost()
		wave := keyedWave(h, tool, []keyedCall{
			{"s1a", "read", "-", []dispatch.Gate{set.For("s1")}}, {"s1b", "read", "-", []dispatch.Gate{set.For("s1")}},
			{"s2a", "read", "-", []dispatch.Gate{set.For("s2")}},
		})
		run := start(t.Context(), dispatch.Wave{Calls: wave}, h)
		synctest.Wait()
		if got := tool.startedSet(); got != "s1a s2a" {
			t.Fatalf("started %q, want s1a s2a", got)
		}
		for _, id := range []string{"s1a", "s2a", "s1b"} {
			tool.answerWith(id, dispatch.OK(nil, false))
		}
		if _, err := run.wait(); err != nil {
			t.Fatal(err)
		}
		if n := dispatch.LimitSetKeys(set); n != 0 {
			t.Fatalf("%d idle keys kept", n)
		}
	})
}

// TestGateWaitEndsWithTheWave: a call waiting for a gate is cancelled with
// its wave and gives its place up.
func TestGateWaitEndsWithTheWave(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		limit := dispatch.NewLimit(1)
		hold := limit.Reserve()
		if err := hold.Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
		h, tool := newHost(), newHeld()
		wave := keyedWave(h, tool, []keyedCall{{"c1", "read", "-", []dispatch.Gate{limit}}})
		ctx, cancel := context.WithCancel(t.Context())
		run := start(ctx, dispatch.Wave{Calls: wave}, h)
		synctest.Wait()
		cancel()
		if _, err := run.wait(); err != nil {
			t.Fatal(err)
		}
		if got := statuses(h.accountedCalls()); !slices.Equal(got, []string{"c1=cancelled/cancelled"}) || tool.startedSet() != "" {
			t.Fatalf("accounted %q, started %q", got, tool.startedSet())
		}
		hold.Release()
		next := limit.Reserve()
		if err := next.Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
		next.Release()
	})
}

// TestCancelWithBlockedWriteBehindQueuedRead: cancelling settles a queued
// resource-less read, which frees the keyed write blocked behind it; the
// write is cancelled too and the wave ends (a wave that lost it would
// block forever: synctest reports that as a deadlock).
func TestCancelWithBlockedWriteBehindQueuedRead(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h, tool := newHost(), newHeld()
		wave := keyedWave(h, tool, []keyedCall{
			{"r1", "read", "file:x", nil},  // runs, and fills the cap of 1
			{"a2", "read", "-", nil},       // a leading read, queued for the cap
			{"w3", "write", "file:y", nil}, // blocked behind a2
		})
		ctx, cancel := context.WithCancel(t.Context())
		run := start(ctx, dispatch.Wave{Calls: wave, MaxConcurrency: 1}, h)
		synctest.Wait()
		if got := tool.startedSet(); got != "r1" {
			t.Fatalf("started %q", got)
		}
		cancel()
		if _, err := run.wait(); err != nil {
			t.Fatal(err)
		}
		want := []string{"r1=cancelled/cancelled", "a2=cancelled/cancelled", "w3=cancelled/cancelled"}
		if got := statuses(h.accountedCalls()); !slices.Equal(got, want) {
			t.Fatalf("accounted %q, want %q", got, want)
		}
	})
}

// TestHeldWriteMakesLaterPlainCallsWait: a resource-less read after a
// parked keyed write waits for its completion, whether the write parked in
// this wave or is replayed as parked after a restart.
func TestHeldWriteMakesLaterPlainCallsWait(t *testing.T) {
	t.Parallel()
	for _, replayed := range []bool{false, true} {
		t.Run(map[bool]string{false: "parked", true: "replayed"}[replayed], func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				h, tool := newHost(), newHeld()
				wave := keyedWave(h, tool, []keyedCall{{"w1", "write", "file:a", nil}, {"r2", "read", "-", nil}})
				if replayed {
					h.verdicts["w1"] = dispatch.Admission{Verdict: dispatch.Replay, Effect: dispatch.EffectWrite, Resources: []string{"file:a"},
						Outcome: dispatch.Outcome{Status: dispatch.StatusPending, Pending: &dispatch.Pending{Key: "key-w1"}}}
				}
				released := make(chan int)
				run := start(t.Context(), dispatch.Wave{Calls: wave, Keys: fixedKeys{}, Released: released}, h)
				if !replayed {
					tool.answerWith("w1", dispatch.Outcome{Status: dispatch.StatusPending})
				}
				synctest.Wait()
				if got := tool.startedSet(); strings.Contains(got, "r2") {
					t.Fatalf("started %q while w1 holds file:a", got)
				}
				released <- 0
				tool.answerWith("r2", dispatch.OK(nil, false))
				if _, err := run.wait(); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}

// TestAheadReadKeepsItsResourcesOrder: a keyed read is not kept from a run
// ahead of admission (it would hold no place among the resources): a
// later write on its resource still waits for it.
func TestAheadReadKeepsItsResourcesOrder(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		base, tool := newHost(), newHeld()
		wave := keyedWave(base, tool, []keyedCall{{"r1", "read", "file:a", nil}, {"w2", "write", "file:a", nil}})
		h := &aheadHost{host: base, lend: map[string]dispatch.Tool{"t": tool}}
		run := start(t.Context(), dispatch.Wave{Calls: wave}, h)
		synctest.Wait()
		got := tool.startedSet()
		tool.answerWith("r1", dispatch.OK(nil, false))
		tool.answerWith("w2", dispatch.OK(nil, false))
		if _, err := run.wait(); err != nil {
			t.Fatal(err)
		}
		if got != "r1" {
			t.Fatalf("started %q while r1 reads file:a; w2 writes it", got)
		}
	})
}
