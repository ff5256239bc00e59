package turn_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/turnd/turnd/budget"
	"github.com/turnd/turnd/dispatch"
	"github.com/turnd/turnd/internal/teststores"
	"github.com/turnd/turnd/tool"
	"github.com/turnd/turnd/turn"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fixture is a service on a fresh embedded store with test tools.
type fixture struct {
	t     *testing.T
	store turn.Store
	svc   *turn.Service
	reg   *tool.Registry
	runs  sync.Map // tool name → *atomic.Int64
}

func (f *fixture) count(name string) int64 {
	v, _ := f.runs.LoadOrStore(name, new(atomic.Int64))
	return v.(*atomic.Int64).Load()
}

func (f *fixture) counted(name string, effect dispatch.Effect, fn dispatch.ToolFunc) *tool.Spec {
	return &tool.Spec{Name: name, Effect: effect, Impl: dispatch.ToolFunc(func(ctx context.Context, c dispatch.Call, at *dispatch.Attempt) dispatch.Outcome {
		v, _ := f.runs.LoadOrStore(name, new(atomic.Int64))
		v.(*atomic.Int64).Add(1)
		return fn(ctx, c, at)
	})}
}

func echo(_ context.Context, c dispatch.Call, _ *dispatch.Attempt) dispatch.Outcome {
	return dispatch.OK(c.Arguments, true)
}

func openSQLite(t *testing.T) turn.Store {
	t.Helper()
	return teststores.SQLite(t)
}

func newFixture(t *testing.T, extra ...*tool.Spec) *fixture {
	t.Helper()
	f := &fixture{t: t, store: openSQLite(t)}
	specs := append([]*tool.Spec{
		f.counted("read", dispatch.EffectRead, echo),
		f.counted("write", dispatch.EffectWrite, echo),
		{Name: "strict", Effect: dispatch.EffectRead, Impl: dispatch.ToolFunc(echo),
			InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`)},
	}, extra...)
	f.reg = mustRegistry(t, specs...)
	f.svc = f.service("owner-a", time.Now)
	return f
}

func mustRegistry(t *testing.T, specs ...*tool.Spec) *tool.Registry {
	t.Helper()
	for _, s := range specs {
		if s.InputSchema == nil {
			continue
		}
		if err := s.CompileSchema(s.InputSchema); err != nil {
			t.Fatalf("compiling %s: %v", s.Name, err)
		}
	}
	return tool.NewRegistry(specs...)
}

// newService builds a service from cfg and shuts it down when the test
// ends (within 5 s).
func newService(t testing.TB, cfg turn.Config) *turn.Service {
	t.Helper()
	svc, err := turn.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = svc.Shutdown(ctx)
	})
	return svc
}

// startService is newService, started (its background loops running).
func startService(t testing.TB, cfg turn.Config) *turn.Service {
	t.Helper()
	svc := newService(t, cfg)
	if err := svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return svc
}

func (f *fixture) service(owner string, now func() time.Time) *turn.Service {
	f.t.Helper()
	svc := newService(f.t, turn.Config{
		Store: f.store, Tools: func() *tool.Registry { return f.reg }, Owner: owner, Now: now,
		LeaseTTL: 10 * time.Second,
	})
	return svc
}

func (f *fixture) run(svc *turn.Service, session string, req turn.TurnRequest) turn.Turn {
	f.t.Helper()
	sub, err := svc.Submit(context.Background(), session, req)
	if err != nil {
		f.t.Fatalf("submit: %v", err)
	}
	if sub.Replayed {
		return sub.Turn
	}
	t, err := svc.Await(context.Background(), turn.TurnKey{SessionID: session, TurnID: sub.Turn.ID})
	if err != nil {
		f.t.Fatalf("await: %v", err)
	}
	return t
}

// wantLedger fails the test unless the ledger of the session (of the turn,
// when turnID is set) reads kinds, as kinds lists them.
func (f *fixture) wantLedger(session, turnID string, kinds ...string) {
	f.t.Helper()
	if got := f.kinds(session, turnID); !slices.Equal(got, kinds) {
		f.t.Fatalf("ledger of %s/%s\n got %v\nwant %v", session, turnID, got, kinds)
	}
}

func (f *fixture) kinds(session, turnID string) []string {
	f.t.Helper()
	lines, err := f.store.Ledger(context.Background(), session, 0, 1000, turn.MaxPageBytes)
	if err != nil {
		f.t.Fatal(err)
	}
	var out []string
	for i, l := range lines {
		if l.Seq != int64(i+1) {
			f.t.Fatalf("ledger seq %d at position %d: not gap-free", l.Seq, i)
		}
		if turnID != "" && l.TurnID != turnID {
			continue
		}
		k := string(l.Kind)
		if l.CallID != "" {
			k += ":" + l.CallID
		}
		out = append(out, k)
	}
	return out
}

func calls(spec ...string) []turn.Call {
	out := make([]turn.Call, len(spec))
	for i, s := range spec {
		id, name, _ := strings.Cut(s, "=")
		out[i] = turn.Call{ID: id, Name: name, Arguments: json.RawMessage(`{"id":"` + id + `"}`)}
	}
	return out
}

func statuses(t turn.Turn) string {
	var parts []string
	for _, r := range t.Results {
		s := r.CallID + "=" + string(r.Status)
		if r.Error != nil {
			s += "(" + r.Error.Code + ")"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}

func TestReadsRunTogetherAndLedgerIsInCallOrder(t *testing.T) {
	t.Parallel()
	const n = 3
	var started sync.WaitGroup
	started.Add(n)
	release := make(chan struct{})
	go func() { started.Wait(); close(release) }()
	var mu sync.Mutex
	var writeSawReads int
	var readsDone atomic.Int64
	barrier := &tool.Spec{Name: "barrier", Effect: dispatch.EffectRead, Impl: dispatch.ToolFunc(func(ctx context.Context, c dispatch.Call, _ *dispatch.Attempt) dispatch.Outcome {
		started.Done()
		<-release // returns only when all n reads have started: they run at once
		readsDone.Add(1)
		return dispatch.OK([]byte(c.ID), false)
	})}
	after := &tool.Spec{Name: "after", Effect: dispatch.EffectWrite, Impl: dispatch.ToolFunc(func(context.Context, dispatch.Call, *dispatch.Attempt) dispatch.Outcome {
		mu.Lock()
		writeSawReads = int(readsDone.Load())
		mu.Unlock()
		return dispatch.OK([]byte(`"written"`), true)
	})}
	f := newFixture(t, barrier, after)
	tr := f.run(f.svc, "s1", turn.TurnRequest{ID: "t1", Calls: calls("a=barrier", "b=barrier", "c=barrier", "d=after")})
	if tr.Status != turn.StatusCompleted {
		t.Fatalf("status %s", tr.Status)
	}
	if got, want := statuses(tr), "a=ok b=ok c=ok d=ok"; got != want {
		t.Fatalf("results %q, want %q", got, want)
	}
	if writeSawReads != n {
		t.Fatalf("write ran after %d reads finished, want %d", writeSawReads, n)
	}
	want := []string{"turn_received", "call_admitted:a", "call_answered:a", "call_admitted:b", "call_answered:b",
		"call_admitted:c", "call_answered:c", "call_admitted:d", "attempt_started:d", "call_answered:d", "turn_settled"}
	if got := f.kinds("s1", ""); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("ledger\n got %v\nwant %v", got, want)
	}
	if string(tr.Results[0].Output) != `"a"` || string(tr.Results[3].Output) != `"written"` {
		t.Fatalf("outputs %s %s", tr.Results[0].Output, tr.Results[3].Output)
	}
}

func TestRepostReplaysAndConflicts(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	req := turn.TurnRequest{ID: "t1", Calls: calls("a=read", "b=write")}
	first := f.run(f.svc, "s1", req)
	// Same calls, arguments formatted differently: the same turn.
	again := req
	again.Calls = []turn.Call{
		{ID: "a", Name: "read", Arguments: json.RawMessage(`{ "id" : "a" }`)},
		{ID: "b", Name: "write", Arguments: json.RawMessage(`{"id":"b"}`)},
	}
	sub, err := f.svc.Submit(context.Background(), "s1", again)
	if err != nil {
		t.Fatal(err)
	}
	if !sub.Replayed || statuses(sub.Turn) != statuses(first) {
		t.Fatalf("replay = %v %q, want replayed %q", sub.Replayed, statuses(sub.Turn), statuses(first))
	}
	if f.count("read") != 1 || f.count("write") != 1 {
		t.Fatalf("tools ran %d/%d times, want once each", f.count("read"), f.count("write"))
	}
	conflict := turn.TurnRequest{ID: "t1", Calls: calls("a=read")}
	if _, err := f.svc.Submit(context.Background(), "s1", conflict); !errors.Is(err, turn.ErrTurnConflict) {
		t.Fatalf("different calls under the same id: %v, want ErrTurnConflict", err)
	}
	if n := len(f.kinds("s1", "")); n != 7 {
		t.Fatalf("ledger has %d lines after replays, want the first turn's 7", n)
	}
}

func TestAnsweredCallIDIsReplayed(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.run(f.svc, "s1", turn.TurnRequest{ID: "t1", Calls: calls("a=write")})
	t2 := f.run(f.svc, "s1", turn.TurnRequest{ID: "t2", Calls: calls("a=write", "b=write")})
	if f.count("write") != 2 {
		t.Fatalf("write ran %d times, want 2 (a once, b once)", f.count("write"))
	}
	if t2.Results[0].ReplayedFrom != "t1" || t2.Results[0].Status != turn.CallOK || string(t2.Results[0].Output) != `{"id":"a"}` {
		t.Fatalf("replayed result %+v", t2.Results[0])
	}
	if got := f.kinds("s1", "t2"); got[1] != "call_replayed:a" {
		t.Fatalf("ledger of t2: %v", got)
	}
	// Another session does not share answers.
	f.run(f.svc, "s2", turn.TurnRequest{ID: "t1", Calls: calls("a=write")})
	if f.count("write") != 3 {
		t.Fatalf("write ran %d times, want 3", f.count("write"))
	}
}

func TestRefusalsAreResults(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	if _, err := f.svc.CreateSession(context.Background(), turn.SessionSpec{ID: "narrow", Tools: []string{"read", "strict"}}); err != nil {
		t.Fatal(err)
	}
	tr := f.run(f.svc, "narrow", turn.TurnRequest{Calls: []turn.Call{
		{ID: "1", Name: "nope"},
		{ID: "2", Name: "write"},
		{ID: "3", Name: "strict", Arguments: json.RawMessage(`{"q": 5}`)},
		{ID: "4", Name: "strict", Arguments: json.RawMessage(`{"q": "ok"}`)},
		{ID: "4", Name: "read"},
	}})
	want := "1=refused(unknown_tool) 2=refused(tool_not_granted) 3=refused(invalid_arguments) 4=ok 4=refused(duplicate_call_id)"
	if got := statuses(tr); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if tr.Status != turn.StatusCompleted {
		t.Fatalf("status %s", tr.Status)
	}
}

func TestInvalidRequests(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	many := make([]turn.Call, 129)
	for i := range many {
		many[i] = turn.Call{ID: fmt.Sprint(i), Name: "read"}
	}
	for _, tc := range []struct {
		name    string
		session string
		req     turn.TurnRequest
		field   string
	}{
		{"call without id", "s", turn.TurnRequest{Calls: []turn.Call{{Name: "read"}}}, "calls[0].id"},
		{"call without name", "s", turn.TurnRequest{Calls: []turn.Call{{ID: "x"}}}, "calls[0].name"},
		{"too many calls", "s", turn.TurnRequest{Calls: many}, "calls"},
		{"bad mode", "s", turn.TurnRequest{Mode: "parallel"}, "mode"},
		{"bad policy", "s", turn.TurnRequest{FailurePolicy: "yolo"}, "failure_policy"},
		{"bad turn id", "s", turn.TurnRequest{ID: "a/b"}, "id"},
		{"bad session id", "a b", turn.TurnRequest{}, "session_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.svc.Submit(context.Background(), tc.session, tc.req)
			var inv *turn.InvalidError
			if !errors.As(err, &inv) || inv.Field != tc.field {
				t.Fatalf("err %v, want InvalidError on %s", err, tc.field)
			}
		})
	}
	if lines, err := f.store.Ledger(context.Background(), "s", 0, 10, turn.MaxPageBytes); !errors.Is(err, turn.ErrNotFound) || len(lines) != 0 {
		t.Fatalf("a refused request left a trace: %v %v", lines, err)
	}
}

func TestTruncatedOutputIsKept(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("line of output\n", 1000)
	f := newFixture(t, &tool.Spec{Name: "big", Effect: dispatch.EffectRead, Impl: dispatch.ToolFunc(func(context.Context, dispatch.Call, *dispatch.Attempt) dispatch.Outcome {
		return dispatch.OK([]byte(big), false)
	})})
	lim := budget.Config{Limit: 200}
	if _, err := f.svc.CreateSession(context.Background(), turn.SessionSpec{ID: "s", Budget: &lim}); err != nil {
		t.Fatal(err)
	}
	tr := f.run(f.svc, "s", turn.TurnRequest{Calls: []turn.Call{{ID: "c", Name: "big"}}})
	r := tr.Results[0]
	var text string
	if err := json.Unmarshal(r.Output, &text); err != nil {
		t.Fatal(err)
	}
	if !r.Truncated || r.OriginalBytes != int64(len(big)) || r.OriginalLines != 1000 || r.OutputID == "" {
		t.Fatalf("result %+v", r)
	}
	if !strings.Contains(text, "bytes truncated...") || len(text) > 260 {
		t.Fatalf("projection %q", text)
	}
	out, err := f.svc.GetOutput(context.Background(), r.OutputID)
	if err != nil || string(out.Data) != big {
		t.Fatalf("full output: %v (%d bytes)", err, len(out.Data))
	}
}

func TestRetryableErrorsBecomeToolUnavailable(t *testing.T) {
	t.Parallel()
	flaky := &tool.Spec{Name: "flaky", Effect: dispatch.EffectRead,
		Retry: dispatch.RetryPolicy{MaxAttempts: 3, InitialInterval: time.Millisecond, MaxInterval: time.Millisecond, Multiplier: 1},
		Impl: dispatch.ToolFunc(func(context.Context, dispatch.Call, *dispatch.Attempt) dispatch.Outcome {
			return dispatch.FailRetryable("tool_unavailable", "HTTP 503", 0)
		})}
	f := newFixture(t, flaky)
	tr := f.run(f.svc, "s", turn.TurnRequest{Calls: []turn.Call{{ID: "c", Name: "flaky"}}})
	r := tr.Results[0]
	if r.Status != turn.CallFailed || r.Error.Code != "tool_unavailable" || r.Attempts != 3 || !strings.Contains(r.Error.Message, "3 attempts") {
		t.Fatalf("result %+v %+v", r, r.Error)
	}
}

// TestRecoveryAfterOwnerDies: owner A journals a write attempt and stalls;
// owner B, whose clock is past A's lease, takes the turn over. The write is
// answered "interrupted" (not run again), the idempotent write runs again,
// and A's late commit is fenced off.
func TestRecoveryAfterOwnerDies(t *testing.T) {
	t.Parallel()
	entered := make(chan struct{})
	unblock := make(chan struct{})
	var once sync.Once
	stuck := &tool.Spec{Name: "stuck", Effect: dispatch.EffectWrite, Impl: dispatch.ToolFunc(func(ctx context.Context, _ dispatch.Call, _ *dispatch.Attempt) dispatch.Outcome {
		once.Do(func() { close(entered) })
		select {
		case <-unblock:
		case <-ctx.Done():
		}
		return dispatch.OK([]byte(`"late"`), true)
	})}
	var idemRuns atomic.Int64
	idemEntered := make(chan struct{})
	idem := &tool.Spec{Name: "idem", Effect: dispatch.EffectWrite, Idempotent: true, Impl: dispatch.ToolFunc(func(ctx context.Context, _ dispatch.Call, _ *dispatch.Attempt) dispatch.Outcome {
		if idemRuns.Add(1) == 1 {
			close(idemEntered)
			select {
			case <-unblock:
			case <-ctx.Done():
			}
		}
		return dispatch.OK([]byte(`"idem"`), true)
	})}
	f := newFixture(t, stuck, idem)
	// A: read answered, then the stuck write journaled and running.
	svcA := f.service("owner-a", time.Now)
	if _, err := svcA.Submit(context.Background(), "s", turn.TurnRequest{ID: "t1", Calls: calls("r=read", "w=stuck", "x=write")}); err != nil {
		t.Fatal(err)
	}
	<-entered
	// A second turn whose idempotent write is in flight.
	if _, err := svcA.Submit(context.Background(), "s", turn.TurnRequest{ID: "t2", Calls: calls("i=idem")}); err != nil {
		t.Fatal(err)
	}
	<-idemEntered

	later := func() time.Time { return time.Now().Add(time.Hour) }
	svcB := f.service("owner-b", later)
	n, err := svcB.Recover(context.Background())
	if err != nil || n != 2 {
		t.Fatalf("recovered %d turns, err %v; want 2", n, err)
	}
	t1, err := svcB.Await(context.Background(), turn.TurnKey{SessionID: "s", TurnID: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := statuses(t1), "r=ok w=error(interrupted) x=ok"; got != want {
		t.Fatalf("t1 after recovery: %s, want %s", got, want)
	}
	t2, err := svcB.Await(context.Background(), turn.TurnKey{SessionID: "s", TurnID: "t2"})
	if err != nil || statuses(t2) != "i=ok" || idemRuns.Load() != 2 {
		t.Fatalf("t2 after recovery: %s %v, idempotent runs %d", statuses(t2), err, idemRuns.Load())
	}
	// The read ran once on A and was journaled? No: A had not committed it
	// (reads are committed with the next write-ahead), so it ran again on B
	// only if A's write-ahead had not carried it. A's write-ahead did.
	if f.count("read") != 1 {
		t.Fatalf("read ran %d times, want 1 (its outcome was committed with the write-ahead)", f.count("read"))
	}
	before := f.kinds("s", "")
	close(unblock) // A's tools return; A's commits must be fenced off.
	aT1, err := svcA.Await(context.Background(), turn.TurnKey{SessionID: "s", TurnID: "t1"})
	if !errors.Is(err, turn.ErrLeaseLost) {
		t.Fatalf("A's settle: %v %v, want ErrLeaseLost", statuses(aT1), err)
	}
	if after := f.kinds("s", ""); len(after) != len(before) {
		t.Fatalf("A wrote %d lines after losing its lease", len(after)-len(before))
	}
	got := strings.Join(f.kinds("s", "t1"), " ")
	want := "turn_received call_admitted:r call_answered:r call_admitted:w attempt_started:w turn_resumed call_answered:w call_admitted:x attempt_started:x call_answered:x turn_settled"
	if got != want {
		t.Fatalf("t1 ledger\n got %s\nwant %s", got, want)
	}
}

func TestShutdownCancelsAfterGrace(t *testing.T) {
	t.Parallel()
	entered := make(chan struct{})
	f := newFixture(t, &tool.Spec{Name: "forever", Effect: dispatch.EffectRead, Impl: dispatch.ToolFunc(func(ctx context.Context, _ dispatch.Call, _ *dispatch.Attempt) dispatch.Outcome {
		close(entered)
		<-ctx.Done()
		return dispatch.Cancelled("stopped")
	})})
	if _, err := f.svc.Submit(context.Background(), "s", turn.TurnRequest{ID: "t", Calls: calls("a=forever", "b=write")}); err != nil {
		t.Fatal(err)
	}
	<-entered
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // no grace at all
	if err := f.svc.Shutdown(ctx); err == nil {
		t.Fatal("Shutdown with an expired grace reported no cancellation")
	}
	tr, err := f.svc.GetTurn(context.Background(), turn.TurnKey{SessionID: "s", TurnID: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Status != turn.StatusCancelled || statuses(tr) != "a=cancelled(cancelled) b=cancelled(cancelled)" {
		t.Fatalf("after shutdown: %s %s", tr.Status, statuses(tr))
	}
	if _, err := f.svc.Submit(context.Background(), "s", turn.TurnRequest{Calls: calls("c=read")}); !errors.Is(err, turn.ErrShuttingDown) {
		t.Fatalf("submit after shutdown: %v", err)
	}
}
