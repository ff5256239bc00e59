package dispatch_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/turnd/turnd/dispatch"
)

// aheadHost lends tools by name before admission.
type aheadHost struct {
	*host
	lend map[string]dispatch.Tool
}

func (h *aheadHost) Ahead(call dispatch.Call) (dispatch.Tool, bool) {
	t, ok := h.lend[call.Name]
	return t, ok
}

// probe is a comparable read tool that signals when it starts and records
// how it ended.
type probe struct {
	h       *host
	name    string
	started chan struct{}
	once    sync.Once
	// hold makes it wait for cancellation instead of answering.
	hold bool
	// fail makes its first attempt fail retryably.
	fail bool

	mu    sync.Mutex
	calls int
	keys  []string
}

func newProbe(h *host, name string) *probe {
	return &probe{h: h, name: name, started: make(chan struct{})}
}

func (p *probe) Invoke(ctx context.Context, call dispatch.Call, at *dispatch.Attempt) dispatch.Outcome {
	p.mu.Lock()
	p.calls++
	p.mu.Unlock()
	p.h.log("%s start %s/%d", p.name, call.ID, at.Number())
	p.once.Do(func() { close(p.started) })
	if k, err := at.CompletionKey(ctx); err == nil {
		p.mu.Lock()
		p.keys = append(p.keys, k)
		p.mu.Unlock()
	}
	if p.hold {
		<-ctx.Done()
		p.h.log("%s stopped %s", p.name, call.ID)
		return dispatch.Fail("stopped", "")
	}
	if p.fail && at.Number() == 1 {
		return dispatch.FailRetryable("busy", "", 0)
	}
	return dispatch.OK([]byte(p.name), false)
}

func (p *probe) invocations() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls
}

// idTool is not comparable (it holds a func) but names itself.
type idTool struct {
	dispatch.ToolFunc
	id string
}

func (t idTool) ToolID() string { return t.id }

func TestAhead(t *testing.T) {
	t.Parallel()
	t.Run("used when cleared", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			h := &aheadHost{host: newHost()}
			p := newProbe(h.host, "lent")
			h.lend = map[string]dispatch.Tool{"read": p}
			h.register("read", dispatch.EffectRead, p)
			// Admission only returns once the tool runs: without a
			// speculative start the bubble would deadlock.
			h.onAdmit = func(dispatch.Call) { <-p.started }
			feed := make(chan dispatch.Call, 1)
			feed <- calls("a")[0]
			close(feed)
			rep, err := dispatch.Wave{Feed: feed}.Run(t.Context(), h)
			if err != nil {
				t.Fatal(err)
			}
			a := h.accountedCalls()[0]
			if a.Outcome.Status != dispatch.StatusOK || string(a.Outcome.Output) != "lent" || a.Attempts != 1 || !a.Admitted {
				t.Errorf("accounted %+v", a)
			}
			if p.invocations() != 1 || rep.Ran != 1 {
				t.Errorf("tool ran %d times, report %+v", p.invocations(), rep)
			}
			if ids := h.admittedIDs(); !slices.Equal(ids, []string{"a"}) {
				t.Errorf("admitted %q", ids)
			}
		})
	})

	for _, tc := range []struct {
		name      string
		admission func(admitted dispatch.Tool) dispatch.Admission
		want      string // accounted status/code
		output    string
	}{
		{"refused", func(dispatch.Tool) dispatch.Admission {
			return dispatch.Admission{Verdict: dispatch.Refuse, Outcome: dispatch.Refused("not_granted", "")}
		}, "a=refused/not_granted", ""},
		{"replayed", func(dispatch.Tool) dispatch.Admission {
			return dispatch.Admission{Verdict: dispatch.Replay, Outcome: dispatch.OK([]byte("recorded"), false)}
		}, "a=ok", "recorded"},
		{"another tool admitted", func(admitted dispatch.Tool) dispatch.Admission {
			return dispatch.Admission{Verdict: dispatch.Run, Tool: admitted, Effect: dispatch.EffectRead}
		}, "a=ok", "admitted"},
		{"admitted as a write", func(dispatch.Tool) dispatch.Admission {
			return dispatch.Admission{Verdict: dispatch.Run, Effect: dispatch.EffectWrite} // Tool filled in below
		}, "a=ok", "admitted"},
	} {
		t.Run("discarded when "+tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				h := &aheadHost{host: newHost()}
				lent := newProbe(h.host, "lent")
				lent.hold = true
				admitted := newProbe(h.host, "admitted")
				h.lend = map[string]dispatch.Tool{"read": lent}
				adm := tc.admission(admitted)
				if tc.name == "admitted as a write" {
					adm.Tool = lent // the same tool, but not as a read
					lent.hold = false
					lent.name = "admitted"
				}
				h.verdicts["a"] = adm
				h.onAdmit = func(dispatch.Call) { <-lent.started }
				feed := make(chan dispatch.Call, 2)
				feed <- calls("a")[0]
				close(feed)
				if _, err := (dispatch.Wave{Feed: feed}).Run(t.Context(), h); err != nil {
					t.Fatal(err)
				}
				as := h.accountedCalls()
				if got := statuses(as); !slices.Equal(got, []string{tc.want}) || string(as[0].Outcome.Output) != tc.output {
					t.Errorf("accounted %q output %q, want %q output %q", got, as[0].Outcome.Output, tc.want, tc.output)
				}
				if tc.name != "admitted as a write" {
					// Run returned only after the discarded tool saw its cancellation.
					indexOf(t, h.eventLog(), "lent stopped a")
				} else if lent.invocations() != 2 {
					t.Errorf("tool ran %d times, want the discarded speculative run and the admitted write", lent.invocations())
				}
			})
		})
	}

	t.Run("matched by tool id", func(t *testing.T) {
		t.Parallel()
		var mu sync.Mutex
		runs := 0
		tool := func(id string) idTool {
			return idTool{id: id, ToolFunc: func(context.Context, dispatch.Call, *dispatch.Attempt) dispatch.Outcome {
				mu.Lock()
				runs++
				mu.Unlock()
				return dispatch.OK([]byte(id), false)
			}}
		}
		h := &aheadHost{host: newHost(), lend: map[string]dispatch.Tool{"read": tool("lookup")}}
		h.register("read", dispatch.EffectRead, tool("lookup"))
		if _, err := (dispatch.Wave{Calls: calls("a")}).Run(t.Context(), h); err != nil {
			t.Fatal(err)
		}
		if runs != 1 || h.accountedCalls()[0].Outcome.Status != dispatch.StatusOK {
			t.Errorf("%d runs, accounted %+v", runs, h.accountedCalls()[0])
		}
	})

	t.Run("retried under the admitted policy", func(t *testing.T) {
		t.Parallel()
		h := &aheadHost{host: newHost()}
		p := newProbe(h.host, "lent")
		p.fail = true
		h.lend = map[string]dispatch.Tool{"read": p}
		h.tools["read"] = registered{tool: p, effect: dispatch.EffectRead, retry: dispatch.RetryPolicy{MaxAttempts: 3, InitialInterval: 1}}
		w := dispatch.Wave{Calls: calls("a"), Keys: &issuer{}}
		if _, err := w.Run(t.Context(), h); err != nil {
			t.Fatal(err)
		}
		a := h.accountedCalls()[0]
		if a.Outcome.Status != dispatch.StatusOK || a.Attempts != 2 {
			t.Errorf("accounted %+v", a)
		}
		if !slices.Equal(p.keys, []string{"key-a-1", "key-a-1"}) {
			t.Errorf("attempts took keys %q, want the same key twice", p.keys)
		}
		// The speculative attempt is the first of the call's tries.
		if len(a.Tries) != 2 || a.Tries[0].Status != dispatch.StatusError || a.Tries[0].Err.Code != "busy" ||
			a.Tries[1].Status != dispatch.StatusOK || !a.Tries[0].StartedAt.Equal(a.StartedAt) ||
			a.Tries[1].StartedAt.Before(a.Tries[0].FinishedAt) || !a.Tries[1].FinishedAt.Equal(a.FinishedAt) {
			t.Errorf("tries %+v of a call accounted %v to %v", a.Tries, a.StartedAt, a.FinishedAt)
		}
	})

	t.Run("not once the wave is serial", func(t *testing.T) {
		t.Parallel()
		h := &aheadHost{host: newHost()}
		p := newProbe(h.host, "lent")
		h.lend = map[string]dispatch.Tool{"read": p}
		h.register("read", dispatch.EffectRead, p).register("write", dispatch.EffectWrite, okTool("w"))
		w := dispatch.Wave{Calls: calls("w0:write", "r1")}
		if _, err := w.Run(t.Context(), h); err != nil {
			t.Fatal(err)
		}
		before(t, h.eventLog(), "account w0", "lent start r1/1")
	})
}

// ToolFuncs are not comparable: without a ToolID they never match (and
// comparing them does not panic), so the speculative run is discarded and
// the admitted one runs.
func TestAheadWithIncomparableTool(t *testing.T) {
	t.Parallel()
	f := dispatch.ToolFunc(func(ctx context.Context, _ dispatch.Call, at *dispatch.Attempt) dispatch.Outcome {
		<-ctx.Done() // only its discarding ends the speculative run
		return dispatch.Fail("stopped", "")
	})
	h := &aheadHost{host: newHost(), lend: map[string]dispatch.Tool{"read": f}}
	h.verdicts["a"] = dispatch.Admission{Verdict: dispatch.Run, Effect: dispatch.EffectRead,
		Tool: dispatch.ToolFunc(func(ctx context.Context, call dispatch.Call, at *dispatch.Attempt) dispatch.Outcome {
			return dispatch.OK([]byte("admitted"), false)
		})}
	if _, err := (dispatch.Wave{Calls: calls("a")}).Run(t.Context(), h); err != nil {
		t.Fatal(err)
	}
	as := h.accountedCalls()
	if got := statuses(as); !slices.Equal(got, []string{"a=ok"}) || string(as[0].Outcome.Output) != "admitted" {
		t.Errorf("accounted %q", got)
	}
}
