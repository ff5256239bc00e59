package dispatch_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/turnd/turnd/dispatch"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// registered is a tool as the test host registers it.
type registered struct {
	tool   dispatch.Tool
	effect dispatch.Effect
	retry  dispatch.RetryPolicy
}

// host is a Host that admits calls from a registry and records every event
// in order. Its maps are set up before the wave runs and only read after.
type host struct {
	tools map[string]registered
	// verdicts overrides the registry by call id.
	verdicts map[string]dispatch.Admission
	// accountErr fails Account for a call id.
	accountErr map[string]error
	// onAdmit, when set, runs at the start of every Admit.
	onAdmit func(dispatch.Call)

	mu        sync.Mutex
	events    []string
	accounted []dispatch.Accounted
	admitted  []string
}

func newHost() *host {
	return &host{
		tools:      map[string]registered{},
		verdicts:   map[string]dispatch.Admission{},
		accountErr: map[string]error{},
	}
}

func (h *host) register(name string, effect dispatch.Effect, tool dispatch.Tool) *host {
	h.tools[name] = registered{tool: tool, effect: effect}
	return h
}

func (h *host) log(format string, a ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, fmt.Sprintf(format, a...))
}

func (h *host) Admit(_ context.Context, call dispatch.Call) dispatch.Admission {
	h.log("admit %s", call.ID)
	if h.onAdmit != nil {
		h.onAdmit(call)
	}
	h.mu.Lock()
	h.admitted = append(h.admitted, call.ID)
	h.mu.Unlock()
	if adm, ok := h.verdicts[call.ID]; ok {
		return adm
	}
	reg, ok := h.tools[call.Name]
	if !ok {
		return dispatch.Admission{Verdict: dispatch.Refuse, Outcome: dispatch.Refused("unknown_tool", call.Name)}
	}
	return dispatch.Admission{Verdict: dispatch.Run, Tool: reg.tool, Effect: reg.effect, Retry: reg.retry}
}

func (h *host) Account(_ context.Context, a dispatch.Accounted) error {
	h.log("account %s", a.Call.ID)
	h.mu.Lock()
	h.accounted = append(h.accounted, a)
	h.mu.Unlock()
	return h.accountErr[a.Call.ID]
}

func (h *host) eventLog() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.events)
}

func (h *host) accountedCalls() []dispatch.Accounted {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.accounted)
}

func (h *host) admittedIDs() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.admitted)
}

// indexOf finds an event in the log, failing the test when it is missing.
func indexOf(t *testing.T, events []string, event string) int {
	t.Helper()
	i := slices.Index(events, event)
	if i < 0 {
		t.Fatalf("event %q missing from %q", event, events)
	}
	return i
}

// before asserts that event a happened before event b.
func before(t *testing.T, events []string, a, b string) {
	t.Helper()
	if indexOf(t, events, a) > indexOf(t, events, b) {
		t.Errorf("%q happened after %q: %q", a, b, events)
	}
}

// gates holds, per call id, a tool blocked until the test releases it with
// the outcome it should return.
type gates struct {
	h  *host
	mu sync.Mutex
	ch map[string]chan dispatch.Outcome
}

// gatedHost is a host with the tool "read" (and, withWrite, "write") held
// by gates of its own.
func gatedHost(withWrite bool) (*host, *gates) {
	h := newHost()
	g := newGates(h)
	h.register("read", dispatch.EffectRead, g.tool())
	if withWrite {
		h.register("write", dispatch.EffectWrite, g.tool())
	}
	return h, g
}

func newGates(h *host) *gates {
	return &gates{h: h, ch: map[string]chan dispatch.Outcome{}}
}

func (g *gates) gate(id string) chan dispatch.Outcome {
	g.mu.Lock()
	defer g.mu.Unlock()
	c, ok := g.ch[id]
	if !ok {
		c = make(chan dispatch.Outcome)
		g.ch[id] = c
	}
	return c
}

// tool blocks each call until released, or returns an error once its
// context is done.
func (g *gates) tool() dispatch.Tool {
	return dispatch.ToolFunc(func(ctx context.Context, call dispatch.Call, at *dispatch.Attempt) dispatch.Outcome {
		g.h.log("start %s", call.ID)
		select {
		case o := <-g.gate(call.ID):
			g.h.log("end %s", call.ID)
			return o
		case <-ctx.Done():
			g.h.log("stopped %s", call.ID)
			return dispatch.Fail("stopped", context.Cause(ctx).Error())
		}
	})
}

// release lets call id's tool return o; it blocks until the tool took it.
func (g *gates) release(id string, o dispatch.Outcome) {
	g.gate(id) <- o
}

// rendezvous is a barrier: wait returns once n parties arrived.
type rendezvous struct {
	mu  sync.Mutex
	n   int
	all chan struct{}
}

func newRendezvous(n int) *rendezvous {
	return &rendezvous{n: n, all: make(chan struct{})}
}

func (r *rendezvous) arrive() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n--
	if r.n == 0 {
		close(r.all)
	}
}

// waveRun is a Wave.Run in flight on its own goroutine.
type waveRun struct {
	done   chan struct{}
	report dispatch.Report
	err    error
}

func start(ctx context.Context, w dispatch.Wave, h dispatch.Host) *waveRun {
	r := &waveRun{done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.report, r.err = w.Run(ctx, h)
	}()
	return r
}

func (r *waveRun) wait() (dispatch.Report, error) {
	<-r.done
	return r.report, r.err
}

func (r *waveRun) finished() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// calls builds calls named "id:tool"; a bare id names tool "read".
func calls(specs ...string) []dispatch.Call {
	out := make([]dispatch.Call, len(specs))
	for i, s := range specs {
		id, name, ok := strings.Cut(s, ":")
		if !ok {
			name = "read"
		}
		out[i] = dispatch.Call{ID: id, Name: name, Arguments: []byte(`{}`)}
	}
	return out
}

// summary is the part of an accounted call that must not depend on timing.
type summary struct {
	Index    int
	ID       string
	Verdict  dispatch.Verdict
	Admitted bool
	Status   dispatch.Status
	Code     string
	Output   string
	Attempts int
}

func summarize(as []dispatch.Accounted) []summary {
	out := make([]summary, len(as))
	for i, a := range as {
		s := summary{
			Index: a.Index, ID: a.Call.ID, Verdict: a.Verdict, Admitted: a.Admitted,
			Status: a.Outcome.Status, Output: string(a.Outcome.Output), Attempts: a.Attempts,
		}
		if a.Outcome.Err != nil {
			s.Code = a.Outcome.Err.Code
		}
		out[i] = s
	}
	return out
}

// statuses lists "id=status[/code]" for compact comparisons.
func statuses(as []dispatch.Accounted) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.Call.ID + "=" + string(a.Outcome.Status)
		if a.Outcome.Err != nil {
			out[i] += "/" + a.Outcome.Err.Code
		}
	}
	return out
}

// checkOrder asserts that every call was accounted exactly once, in order.
func checkOrder(t *testing.T, as []dispatch.Accounted, want []dispatch.Call) {
	t.Helper()
	if len(as) != len(want) {
		t.Fatalf("accounted %d calls, want %d: %q", len(as), len(want), statuses(as))
	}
	for i, a := range as {
		if a.Index != i || a.Call.ID != want[i].ID {
			t.Errorf("accounted #%d is call %d (%s), want %d (%s)", i, a.Index, a.Call.ID, i, want[i].ID)
		}
	}
}

func okTool(output string) dispatch.Tool {
	return dispatch.ToolFunc(func(context.Context, dispatch.Call, *dispatch.Attempt) dispatch.Outcome {
		return dispatch.OK([]byte(output), false)
	})
}

var errHost = errors.New("host says no")
