package dispatch_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnd/turnd/dispatch"
)

// watchingHost is a host that also implements dispatch.AttemptObserver and
// records what it is told.
type watchingHost struct {
	*host
	mu       sync.Mutex
	started  []string
	finished []string
	open     map[string]bool
	negative bool
}

func (w *watchingHost) AttemptStarted(call dispatch.Call, attempt int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	k := fmt.Sprintf("%s#%d", call.ID, attempt)
	w.open[k] = true
	w.started = append(w.started, k)
}

func (w *watchingHost) AttemptFinished(call dispatch.Call, attempt int, o dispatch.Outcome, took time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	k := fmt.Sprintf("%s#%d", call.ID, attempt)
	delete(w.open, k)
	w.finished = append(w.finished, k+" "+string(o.Status))
	if took < 0 {
		w.negative = true
	}
}

// TestAttemptObserver: every attempt that invokes a tool is bracketed by
// AttemptStarted and AttemptFinished (retries, panics and runtime.Goexit
// included); calls that run no tool are not; every accounted call carries
// the time dispatch took it up for admission.
func TestAttemptObserver(t *testing.T) {
	t.Parallel()
	var flakes atomic.Int32
	h := newHost().
		register("ok", dispatch.EffectRead, okTool("fine")).
		register("panics", dispatch.EffectRead, dispatch.ToolFunc(func(context.Context, dispatch.Call, *dispatch.Attempt) dispatch.Outcome {
			panic("boom")
		})).
		register("exits", dispatch.EffectRead, dispatch.ToolFunc(func(context.Context, dispatch.Call, *dispatch.Attempt) dispatch.Outcome {
			runtime.Goexit()
			return dispatch.Outcome{}
		}))
	h.tools["flaky"] = registered{
		effect: dispatch.EffectWrite,
		retry:  dispatch.RetryPolicy{MaxAttempts: 3, InitialInterval: time.Microsecond, MaxInterval: time.Microsecond},
		tool: dispatch.ToolFunc(func(context.Context, dispatch.Call, *dispatch.Attempt) dispatch.Outcome {
			if flakes.Add(1) < 3 {
				return dispatch.FailRetryable("busy", "try again", 0)
			}
			return dispatch.OK([]byte(`"done"`), true)
		}),
	}
	w := &watchingHost{host: h, open: map[string]bool{}}
	before := time.Now()
	_, err := dispatch.Wave{Calls: calls("a:ok", "b:panics", "c:exits", "d:missing", "e:flaky", "e:ok")}.Run(context.Background(), w)
	if err != nil {
		t.Fatal(err)
	}
	after := time.Now()

	slices.Sort(w.started)
	wantStarted := []string{"a#1", "b#1", "c#1", "e#1", "e#2", "e#3"}
	if !slices.Equal(w.started, wantStarted) {
		t.Errorf("attempts started %v, want %v", w.started, wantStarted)
	}
	slices.Sort(w.finished)
	wantFinished := []string{"a#1 ok", "b#1 error", "c#1 error", "e#1 error", "e#2 error", "e#3 ok"}
	if !slices.Equal(w.finished, wantFinished) {
		t.Errorf("attempts finished %v, want %v", w.finished, wantFinished)
	}
	if len(w.open) != 0 || w.negative {
		t.Errorf("attempts left open %v, negative duration %v", w.open, w.negative)
	}
	as := h.accountedCalls()
	if len(as) != 6 {
		t.Fatalf("%d calls accounted, want 6", len(as))
	}
	for _, a := range as {
		if a.AdmittedAt.Before(before) || a.AdmittedAt.After(after) {
			t.Errorf("call %d (%s): AdmittedAt %v outside the wave's run", a.Index, a.Call.ID, a.AdmittedAt)
		}
		if !a.StartedAt.IsZero() && a.StartedAt.Before(a.AdmittedAt) {
			t.Errorf("call %d (%s): started %v before its admission %v", a.Index, a.Call.ID, a.StartedAt, a.AdmittedAt)
		}
	}
}
