package dispatch_test

import (
	"bytes"
	"context"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/turnd/turnd/dispatch"
)

// goid is the id of the calling goroutine, from its stack's first line.
func goid() int {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	id, _ := strconv.Atoi(string(b[:bytes.IndexByte(b, ' ')]))
	return id
}

// inlineTool is an InlineTool that notes the goroutine of each call.
type inlineTool struct {
	inline bool
	mu     sync.Mutex
	on     map[string]int // call id → goroutine id
	run    func(call dispatch.Call) dispatch.Outcome
}

func (t *inlineTool) Inline() bool { return t.inline }

func (t *inlineTool) Invoke(_ context.Context, call dispatch.Call, _ *dispatch.Attempt) dispatch.Outcome {
	t.mu.Lock()
	if t.on == nil {
		t.on = map[string]int{}
	}
	t.on[call.ID] = goid()
	t.mu.Unlock()
	if t.run != nil {
		return t.run(call)
	}
	return dispatch.OK([]byte(`"`+call.ID+`"`), true)
}

func (t *inlineTool) goroutine(id string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.on[id]
}

// TestInlineToolRunsOnTheWave: a read of a tool whose Inline reports true,
// tried once, runs on the goroutine that runs the wave, and is accounted
// as any other; every other call of the tool (Inline false, a write, a
// policy with retries, a fail_fast wave) runs on a worker.
func TestInlineToolRunsOnTheWave(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		inline bool
		effect dispatch.Effect
		retry  dispatch.RetryPolicy
		policy dispatch.FailurePolicy
		want   bool // on the wave's goroutine
	}{
		{name: "inline read", inline: true, effect: dispatch.EffectRead, want: true},
		{name: "inline read tried once by policy", inline: true, effect: dispatch.EffectRead, retry: dispatch.RetryPolicy{MaxAttempts: 1}, want: true},
		{name: "not inline", inline: false, effect: dispatch.EffectRead},
		{name: "inline write", inline: true, effect: dispatch.EffectWrite},
		{name: "inline read with retries", inline: true, effect: dispatch.EffectRead, retry: dispatch.RetryPolicy{MaxAttempts: 3}},
		{name: "inline read in a fail_fast wave", inline: true, effect: dispatch.EffectRead, policy: dispatch.PolicyFailFast},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tool := &inlineTool{inline: tc.inline}
			h := newHost()
			h.tools["read"] = registered{tool: tool, effect: tc.effect, retry: tc.retry}
			w := dispatch.Wave{Calls: calls("c0", "c1", "c2", "c3"), FailurePolicy: tc.policy}
			self := goid()
			rep, err := w.Run(t.Context(), h)
			if err != nil {
				t.Fatal(err)
			}
			if rep.OK != 4 || rep.Ran != 4 {
				t.Errorf("report %+v, want 4 ok and ran", rep)
			}
			checkOrder(t, h.accountedCalls(), w.Calls)
			for _, a := range h.accountedCalls() {
				if got := string(a.Outcome.Output); got != `"`+a.Call.ID+`"` {
					t.Errorf("%s accounted with output %s", a.Call.ID, got)
				}
				if on := tool.goroutine(a.Call.ID) == self; on != tc.want {
					t.Errorf("%s ran on the wave's goroutine: %v, want %v", a.Call.ID, on, tc.want)
				}
			}
		})
	}
}

// TestInlineCallsBesideWorkers: inline reads between reads that must run
// at once (each waits for the other) neither serialise those nor change
// the accounting order.
func TestInlineCallsBesideWorkers(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		both := newRendezvous(2)
		h := newHost().register("wait", dispatch.EffectRead, dispatch.ToolFunc(
			func(_ context.Context, call dispatch.Call, _ *dispatch.Attempt) dispatch.Outcome {
				both.arrive()
				<-both.all
				return dispatch.OK([]byte(`"`+call.ID+`"`), true)
			}))
		inline := &inlineTool{inline: true}
		h.register("read", dispatch.EffectRead, inline)
		w := dispatch.Wave{Calls: calls("i0", "w1:wait", "i2", "w3:wait", "i4")}
		self := goid()
		rep, err := w.Run(t.Context(), h)
		if err != nil {
			t.Fatal(err)
		}
		if rep.OK != 5 {
			t.Errorf("report %+v, want 5 ok", rep)
		}
		checkOrder(t, h.accountedCalls(), w.Calls)
		for _, id := range []string{"i0", "i2", "i4"} {
			if inline.goroutine(id) != self {
				t.Errorf("%s did not run on the wave's goroutine", id)
			}
		}
	})
}

// TestPanickingInlineToolBecomesAnError: a panic in an inline call is the
// call's error outcome, and the wave goes on with the next call.
func TestPanickingInlineToolBecomesAnError(t *testing.T) {
	t.Parallel()
	tool := &inlineTool{inline: true, run: func(call dispatch.Call) dispatch.Outcome {
		if call.ID == "c1" {
			panic("boom")
		}
		return dispatch.OK([]byte(`"`+call.ID+`"`), true)
	}}
	h := newHost()
	h.tools["read"] = registered{tool: tool, effect: dispatch.EffectRead}
	w := dispatch.Wave{Calls: calls("c0", "c1", "c2")}
	self := goid()
	rep, err := w.Run(t.Context(), h)
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK != 2 || rep.Errors != 1 {
		t.Errorf("report %+v, want 2 ok and 1 error", rep)
	}
	as := h.accountedCalls()
	checkOrder(t, as, w.Calls)
	if e := as[1].Outcome.Err; e == nil || e.Code != dispatch.CodeToolPanic {
		t.Errorf("c1 accounted with %+v, want %s", as[1].Outcome, dispatch.CodeToolPanic)
	}
	for _, id := range []string{"c0", "c1", "c2"} {
		if tool.goroutine(id) != self {
			t.Errorf("%s did not run on the wave's goroutine", id)
		}
	}
}

// TestInlineCallsRunBesideABlockedWorker: under a cap of two, a read that
// blocks on its worker leaves the other slot to the inline calls, which
// all run (each holding the slot until the wave takes its result) while
// the read still blocks, and are accounted in call order after it.
func TestInlineCallsRunBesideABlockedWorker(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var workers sync.Map // goroutine ids of the blocking reads
		h := newHost().register("block", dispatch.EffectRead, dispatch.ToolFunc(
			func(_ context.Context, call dispatch.Call, _ *dispatch.Attempt) dispatch.Outcome {
				workers.Store(goid(), true)
				<-release
				return dispatch.OK([]byte(`"`+call.ID+`"`), true)
			}))
		inline := &inlineTool{inline: true}
		h.register("read", dispatch.EffectRead, inline)
		w := dispatch.Wave{Calls: calls("i0", "i1", "b2:block", "i3", "i4", "i5"), MaxConcurrency: 2}
		run := start(t.Context(), w, h)
		synctest.Wait()
		for _, id := range []string{"i0", "i1", "i3", "i4", "i5"} {
			if inline.goroutine(id) == 0 {
				t.Errorf("%s has not run while b2 blocks", id)
			}
		}
		close(release)
		if _, err := run.wait(); err != nil {
			t.Fatal(err)
		}
		checkOrder(t, h.accountedCalls(), w.Calls)
		n := 0
		workers.Range(func(any, any) bool { n++; return true })
		if n != 1 {
			t.Errorf("the blocking read ran on %d goroutines, want 1", n)
		}
	})
}

// observingHost is a host that also implements AttemptHook and
// AttemptObserver, noting each attempt's events.
type observingHost struct {
	*host
}

func (h observingHost) BeforeAttempt(_ context.Context, call dispatch.Call, _ dispatch.Effect, n int) error {
	h.log("before %s/%d", call.ID, n)
	return nil
}

func (h observingHost) AttemptStarted(call dispatch.Call, n int) { h.log("started %s/%d", call.ID, n) }

func (h observingHost) AttemptFinished(call dispatch.Call, n int, _ dispatch.Outcome, _ time.Duration) {
	h.log("finished %s/%d", call.ID, n)
}

// TestInlineAndWorkerRunsAccountAlike: whether its reads run inline or on
// workers, a wave accounts the same calls with the same outcomes in the
// same order — ordered or concurrent, under a cap of one, a refused call
// among them, on a context cancelled before it starts — and its host sees
// each attempt's hook and observer calls in pairs.
func TestInlineAndWorkerRunsAccountAlike(t *testing.T) {
	t.Parallel()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		wave dispatch.Wave
	}{
		{"ordered", context.Background(), dispatch.Wave{Calls: calls("c0", "c1", "x2:nosuch", "c3")}},
		{"concurrent", context.Background(), dispatch.Wave{Calls: calls("c0", "c1", "c2"), Mode: dispatch.ModeConcurrent}},
		{"cap of one", context.Background(), dispatch.Wave{Calls: calls("c0", "c1", "c2", "c3", "c4"), MaxConcurrency: 1}},
		{"cancelled", cancelled, dispatch.Wave{Calls: calls("c0", "c1")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got [2][]summary
			for i, inline := range []bool{false, true} {
				h := observingHost{newHost()}
				h.tools["read"] = registered{tool: &inlineTool{inline: inline}, effect: dispatch.EffectRead}
				if _, err := tc.wave.Run(tc.ctx, h); err != nil {
					t.Fatal(err)
				}
				checkOrder(t, h.accountedCalls(), tc.wave.Calls)
				got[i] = summarize(h.accountedCalls())
				events := h.eventLog()
				for _, a := range h.accountedCalls() {
					if a.Attempts == 0 {
						continue
					}
					id := a.Call.ID + "/1"
					before(t, events, "before "+id, "started "+id)
					before(t, events, "started "+id, "finished "+id)
					before(t, events, "finished "+id, "account "+a.Call.ID)
				}
			}
			if !slices.Equal(got[0], got[1]) {
				t.Errorf("on workers %+v\ninline     %+v", got[0], got[1])
			}
		})
	}
}
