package turn_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnd/turnd/dispatch"
	"github.com/turnd/turnd/tool"
	"github.com/turnd/turnd/turn"
)

// countingStore counts the store calls that tell which path a turn took,
// and lets a test fail RecordTurn or run something before it.
type countingStore struct {
	turn.Store
	receives, commits, lookups, records atomic.Int64
	beforeRecord                        func(r turn.Record) error
}

func (c *countingStore) ReceiveTurn(ctx context.Context, r turn.Receive) (turn.ReceiveResult, error) {
	c.receives.Add(1)
	return c.Store.ReceiveTurn(ctx, r)
}

func (c *countingStore) Commit(ctx context.Context, cm turn.Commit) error {
	c.commits.Add(1)
	return c.Store.Commit(ctx, cm)
}

func (c *countingStore) LookupTurn(ctx context.Context, sid, tid string, ids []string) (turn.Lookup, error) {
	c.lookups.Add(1)
	return c.Store.LookupTurn(ctx, sid, tid, ids)
}

func (c *countingStore) RecordTurn(ctx context.Context, r turn.Record) error {
	c.records.Add(1)
	if c.beforeRecord != nil {
		if err := c.beforeRecord(r); err != nil {
			return err
		}
	}
	return c.Store.RecordTurn(ctx, r)
}

func (c *countingStore) calls() [4]int64 {
	return [4]int64{c.lookups.Load(), c.receives.Load(), c.records.Load(), c.commits.Load()}
}

// readsFixture is a fixture whose service runs on a countingStore with
// the given read-turn window, in a session s1 that exists.
func readsFixture(t *testing.T, window time.Duration, extra ...*tool.Spec) (*fixture, *countingStore) {
	t.Helper()
	f := newFixture(t, extra...)
	cs := &countingStore{Store: f.store}
	svc := newService(t, turn.Config{
		Store: cs, Tools: func() *tool.Registry { return f.reg }, Owner: "owner-a", ReadTurnWindow: window,
	})
	f.svc = svc
	if _, err := svc.CreateSession(context.Background(), turn.SessionSpec{ID: "s1"}); err != nil {
		t.Fatal(err)
	}
	return f, cs
}

func TestAllReadTurnIsRecordedWhole(t *testing.T) {
	t.Parallel()
	f, cs := readsFixture(t, time.Minute)
	sub, err := f.svc.Submit(context.Background(), "s1", turn.TurnRequest{ID: "t1", Calls: calls("a=read", "b=read", "c=strict")})
	if err != nil {
		t.Fatal(err)
	}
	// Settled on return: Submit answered after the one write committed.
	if sub.Replayed || sub.Turn.Status != turn.StatusCompleted || statuses(sub.Turn) != "a=ok b=ok c=refused(invalid_arguments)" {
		t.Fatalf("submitted %v %s %q", sub.Replayed, sub.Turn.Status, statuses(sub.Turn))
	}
	if got := cs.calls(); got != [4]int64{1, 0, 1, 0} {
		t.Fatalf("store calls lookup/receive/record/commit = %v, want one lookup and one record", got)
	}
	if f.count("read") != 2 {
		t.Fatalf("read ran %d times, want 2", f.count("read"))
	}
	f.wantLedger("s1", "", "turn_received", "call_admitted:a", "call_answered:a", "call_admitted:b", "call_answered:b",
		"call_refused:c", "turn_settled")
	stored, err := f.svc.GetTurn(context.Background(), turn.TurnKey{SessionID: "s1", TurnID: "t1"})
	if err != nil || stored.Status != turn.StatusCompleted || statuses(stored) != statuses(sub.Turn) || stored.SettledAt.IsZero() {
		t.Fatalf("stored turn %s %q settled %v: %v", stored.Status, statuses(stored), stored.SettledAt, err)
	}
}

// A repost to the process that recorded the turn runs nothing: it knows
// the turn id taken and takes the ordinary path, which answers from the
// record.
func TestAllReadRepostRunsNothing(t *testing.T) {
	t.Parallel()
	f, cs := readsFixture(t, time.Minute)
	req := turn.TurnRequest{ID: "t1", Calls: calls("a=read", "b=read")}
	first := f.run(f.svc, "s1", req)
	sub, err := f.svc.Submit(context.Background(), "s1", req)
	if err != nil {
		t.Fatal(err)
	}
	if !sub.Replayed || statuses(sub.Turn) != statuses(first) {
		t.Fatalf("repost: replayed %v %q, want %q", sub.Replayed, statuses(sub.Turn), statuses(first))
	}
	if _, err := f.svc.Submit(context.Background(), "s1", turn.TurnRequest{ID: "t1", Calls: calls("a=read")}); !errors.Is(err, turn.ErrTurnConflict) {
		t.Fatalf("other calls under the same id: %v, want ErrTurnConflict", err)
	}
	if f.count("read") != 2 {
		t.Fatalf("read ran %d times, want 2 (reposts run nothing)", f.count("read"))
	}
	if n := len(f.kinds("s1", "")); n != 6 {
		t.Fatalf("ledger has %d lines, want the first turn's 6", n)
	}
	if got := cs.calls(); got != [4]int64{1, 2, 1, 0} {
		t.Fatalf("store calls lookup/receive/record/commit = %v, want [1 2 1 0]", got)
	}
}

// replica returns another service on store (a replica sharing it), with
// the read-turn window of readsFixture, whose cache knows session s1: it
// ran turn "warm-<owner>" (call "warm-<owner>") there.
func replica(f *fixture, store turn.Store, owner string) *turn.Service {
	f.t.Helper()
	svc := newService(f.t, turn.Config{Store: store, Tools: func() *tool.Registry { return f.reg }, Owner: owner, ReadTurnWindow: time.Minute})
	if got := f.run(svc, "s1", turn.TurnRequest{ID: "warm-" + owner, Calls: calls("warm-" + owner + "=read")}); got.Status != turn.StatusCompleted {
		f.t.Fatalf("warming %s: %s", owner, got.Status)
	}
	return svc
}

// A repost to a replica that knows the session but not the turn runs the
// reads once more, optimistically; the record is refused (the turn id is
// taken) and the answer comes from the first record: nothing is written.
func TestAllReadRepostOnAnotherReplica(t *testing.T) {
	t.Parallel()
	f, cs := readsFixture(t, time.Minute)
	other := replica(f, f.store, "owner-b")
	req := turn.TurnRequest{ID: "t1", Calls: calls("a=read", "b=read")}
	first := f.run(f.svc, "s1", req)
	linesBefore, readsBefore := f.kinds("s1", ""), f.count("read")
	sub, err := other.Submit(context.Background(), "s1", req)
	if err != nil {
		t.Fatal(err)
	}
	if !sub.Replayed || statuses(sub.Turn) != statuses(first) || sub.Turn.Status != turn.StatusCompleted {
		t.Fatalf("repost: replayed %v %s %q, want %q", sub.Replayed, sub.Turn.Status, statuses(sub.Turn), statuses(first))
	}
	if got := f.count("read") - readsBefore; got != 2 {
		t.Fatalf("the repost ran %d reads, want 2 (run once more, then refused)", got)
	}
	if got := f.kinds("s1", ""); !slices.Equal(got, linesBefore) {
		t.Fatalf("ledger after the repost\n got %v\nwant %v", got, linesBefore)
	}
	// Now the replica knows the id: a third post runs nothing.
	if _, err := other.Submit(context.Background(), "s1", req); err != nil || f.count("read")-readsBefore != 2 {
		t.Fatalf("third post: %v, %d reads", err, f.count("read")-readsBefore)
	}
	if cs.records.Load() != 1 {
		t.Fatalf("%d records through the first service, want 1", cs.records.Load())
	}
}

// Once the service knows the session, an all-read turn needs no read of the
// store: one write records it.
func TestAllReadWarmSessionNeedsNoRead(t *testing.T) {
	t.Parallel()
	f, cs := readsFixture(t, time.Minute)
	for i := range 3 {
		got := f.run(f.svc, "s1", turn.TurnRequest{ID: fmt.Sprintf("t%d", i), Calls: calls(fmt.Sprintf("a%d=read", i))})
		if got.Status != turn.StatusCompleted || statuses(got) != fmt.Sprintf("a%d=ok", i) {
			t.Fatalf("t%d: %s %q", i, got.Status, statuses(got))
		}
	}
	if got := cs.calls(); got != [4]int64{1, 0, 3, 0} {
		t.Fatalf("store calls lookup/receive/record/commit = %v, want one lookup and three records", got)
	}
	// A session created by an ordinary turn is known too.
	f.run(f.svc, "s2", turn.TurnRequest{ID: "t1", Calls: calls("w=write")})
	f.run(f.svc, "s2", turn.TurnRequest{ID: "t2", Calls: calls("r=read")})
	if got := cs.calls(); got != [4]int64{1, 1, 4, 2} {
		t.Fatalf("store calls lookup/receive/record/commit = %v, want [1 1 4 2]", got)
	}
}

// answeredScenario posts, in session s1: on first, t0 answering a and w
// (a write, so recorded the ordinary way) and t1 answering b by the
// all-read path; then on second, which knows the session but has seen none
// of these, t2 repeating a and b with a new c, all reads. It returns t2.
func answeredScenario(f *fixture, first, second *turn.Service) turn.Turn {
	f.t.Helper()
	f.run(first, "s1", turn.TurnRequest{ID: "t0", Calls: calls("a=read", "w=write")})
	f.run(first, "s1", turn.TurnRequest{ID: "t1", Calls: calls("b=read")})
	return f.run(second, "s1", turn.TurnRequest{ID: "t2", Calls: calls("a=read", "b=read", "c=read")})
}

// A call id answered in an earlier turn, posted again in an all-read turn
// to a replica that knows the session but not the answer: the optimistic
// run's record is refused (ErrCallsAnswered) and the ordinary path replays
// it. The recorded turn and the ledger are exactly those of a service that
// never takes the all-read path; only the reads ran once more.
func TestAllReadAnsweredCallReplaysRecorded(t *testing.T) {
	t.Parallel()
	f, cs := readsFixture(t, time.Minute)
	var refused atomic.Int64
	other := &countingStore{Store: f.store, beforeRecord: func(r turn.Record) error {
		if r.Turn.ID == "t2" {
			refused.Add(1)
		}
		return nil
	}}
	second := replica(f, other, "owner-b")
	got := answeredScenario(f, f.svc, second)

	// The same posts through one service that records every turn first.
	g := newFixture(t)
	ordinary := newService(t, turn.Config{Store: g.store, Tools: func() *tool.Registry { return g.reg }, Owner: "owner-o", ReadTurnWindow: -1})
	g.run(ordinary, "s1", turn.TurnRequest{ID: "warm-owner-b", Calls: calls("warm-owner-b=read")})
	want := answeredScenario(g, ordinary, ordinary)

	if got.Status != turn.StatusCompleted || statuses(got) != statuses(want) || statuses(got) != "a=ok b=ok c=ok" {
		t.Fatalf("t2 %s %q, want %q", got.Status, statuses(got), statuses(want))
	}
	for i, res := range got.Results {
		if res.ReplayedFrom != want.Results[i].ReplayedFrom {
			t.Fatalf("result %d replayed from %q, want %q", i, res.ReplayedFrom, want.Results[i].ReplayedFrom)
		}
	}
	if got.Results[0].ReplayedFrom != "t0" || got.Results[1].ReplayedFrom != "t1" || got.Results[2].ReplayedFrom != "" {
		t.Fatalf("t2 results %+v", got.Results)
	}
	wantKinds := []string{"turn_received", "call_replayed:a", "call_replayed:b", "call_admitted:c", "call_answered:c", "turn_settled"}
	if k := f.kinds("s1", "t2"); !slices.Equal(k, wantKinds) || !slices.Equal(g.kinds("s1", "t2"), wantKinds) {
		t.Fatalf("ledger of t2\n got %v\nordinary %v\n want %v", k, g.kinds("s1", "t2"), wantKinds)
	}
	if a, b := f.kinds("s1", ""), g.kinds("s1", ""); !slices.Equal(a, b) {
		t.Fatalf("session ledger\n got %v\nordinary %v", a, b)
	}
	stored, err := f.svc.GetTurn(context.Background(), turn.TurnKey{SessionID: "s1", TurnID: "t2"})
	if err != nil || statuses(stored) != statuses(want) || stored.Results[0].ReplayedFrom != "t0" {
		t.Fatalf("stored t2 %q: %v", statuses(stored), err)
	}
	// t2 was tried whole once and refused; its reads ran then (3) and its
	// new call once more on the ordinary path: warm 1, t0 1, t1 1, t2 3+1.
	if refused.Load() != 1 || f.count("read") != 7 || g.count("read") != 4 {
		t.Fatalf("t2 records %d, reads %d (ordinary service %d); want 1, 7 and 4", refused.Load(), f.count("read"), g.count("read"))
	}
	// The process that wrote the answers sends a turn repeating one the
	// ordinary way at once: nothing runs again.
	before := f.count("read")
	t3 := f.run(f.svc, "s1", turn.TurnRequest{ID: "t3", Calls: calls("b=read", "d=read")})
	if statuses(t3) != "b=ok d=ok" || t3.Results[0].ReplayedFrom != "t1" || f.count("read") != before+1 {
		t.Fatalf("t3 %q (b replayed from %q) with %d reads; want b replayed from t1 and one read", statuses(t3), t3.Results[0].ReplayedFrom, f.count("read")-before)
	}
	// A service that does not know the session yet reads it, sees the
	// answered call and takes the ordinary path before any tool runs.
	cold := newService(t, turn.Config{Store: cs, Tools: func() *tool.Registry { return f.reg }, Owner: "owner-c", ReadTurnWindow: time.Minute})
	before, lookups := f.count("read"), cs.lookups.Load()
	t4 := f.run(cold, "s1", turn.TurnRequest{ID: "t4", Calls: calls("a=read", "e=read")})
	if statuses(t4) != "a=ok e=ok" || t4.Results[0].ReplayedFrom != "t0" || f.count("read") != before+1 || cs.lookups.Load() != lookups+1 {
		t.Fatalf("t4 %q replayed from %q, %d reads, %d lookups; want a replayed from t0, one read, one lookup",
			statuses(t4), t4.Results[0].ReplayedFrom, f.count("read")-before, cs.lookups.Load()-lookups)
	}
}

// A read outlasting the window in a turn that repeats an answered call id:
// recording it as running first finds the answer, gives the optimistic run
// up (cancelling its wave) and the ordinary path replays the call.
func TestSlowReadWithAnsweredCallReplays(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	held := &tool.Spec{Name: "held", Effect: dispatch.EffectRead, Impl: dispatch.ToolFunc(
		func(ctx context.Context, c dispatch.Call, _ *dispatch.Attempt) dispatch.Outcome {
			select {
			case <-release:
				return dispatch.OK(c.Arguments, true)
			case <-ctx.Done():
				return dispatch.Fail("cancelled", "stopped")
			}
		})}
	f, cs := readsFixture(t, 20*time.Millisecond, held)
	// f.svc knows the session; another replica answers a.
	f.run(f.svc, "s1", turn.TurnRequest{ID: "tw", Calls: calls("x=read")})
	f.run(f.service("owner-b", time.Now), "s1", turn.TurnRequest{ID: "t0", Calls: calls("a=read")})
	sub, err := f.svc.Submit(context.Background(), "s1", turn.TurnRequest{ID: "t1", Calls: calls("a=read", "b=held")})
	if err != nil {
		t.Fatal(err)
	}
	if sub.Replayed || sub.Turn.Status != turn.StatusRunning {
		t.Fatalf("submitted replayed %v %s, want running", sub.Replayed, sub.Turn.Status)
	}
	close(release)
	done, err := f.svc.Await(context.Background(), turn.TurnKey{SessionID: "s1", TurnID: "t1"})
	if err != nil || done.Status != turn.StatusCompleted || statuses(done) != "a=ok b=ok" || done.Results[0].ReplayedFrom != "t0" {
		t.Fatalf("settled %s %q (a replayed from %q): %v", done.Status, statuses(done), done.Results[0].ReplayedFrom, err)
	}
	f.wantLedger("s1", "t1", "turn_received", "call_replayed:a", "call_admitted:b", "call_answered:b", "turn_settled")
	// tw looked up and recorded; t1 received once (the ordinary path) and
	// settled by one commit; no record of t1 was tried.
	if got := cs.calls(); got != [4]int64{1, 1, 1, 1} {
		t.Fatalf("store calls lookup/receive/record/commit = %v, want [1 1 1 1]", got)
	}
	// tw, t0, and t1's a once, optimistically, before the window ended.
	if f.count("read") != 3 {
		t.Fatalf("read ran %d times, want 3", f.count("read"))
	}
}

func TestAllReadAnsweredCallsReplay(t *testing.T) {
	t.Parallel()
	f, _ := readsFixture(t, time.Minute)
	f.run(f.svc, "s1", turn.TurnRequest{ID: "t1", Calls: calls("a=read", "w=write")})
	t2 := f.run(f.svc, "s1", turn.TurnRequest{ID: "t2", Calls: calls("a=read", "w=write", "b=read")})
	if f.count("read") != 2 || f.count("write") != 1 {
		t.Fatalf("read ran %d, write %d times; want 2 and 1", f.count("read"), f.count("write"))
	}
	if t2.Results[0].ReplayedFrom != "t1" || t2.Results[1].ReplayedFrom != "t1" || t2.Results[2].ReplayedFrom != "" {
		t.Fatalf("t2 results %+v", t2.Results)
	}
	f.wantLedger("s1", "t2", "turn_received", "call_replayed:a", "call_replayed:w", "call_admitted:b", "call_answered:b", "turn_settled")
}

func TestReadTurnOrdinaryPaths(t *testing.T) {
	t.Parallel()
	f, cs := readsFixture(t, time.Minute)
	ctx := context.Background()
	// A session the turn creates, a turn with a write, an async caller:
	// recorded first (ReceiveTurn), as before.
	for _, tc := range []struct {
		session string
		req     turn.TurnRequest
	}{
		{"new", turn.TurnRequest{ID: "t1", Calls: calls("a=read")}},
		{"s1", turn.TurnRequest{ID: "t2", Calls: calls("b=read", "c=write")}},
		{"s1", turn.TurnRequest{ID: "t3", Calls: calls("d=read"), Async: true}},
	} {
		before := cs.receives.Load()
		got := f.run(f.svc, tc.session, tc.req)
		if got.Status != turn.StatusCompleted || cs.receives.Load() != before+1 {
			t.Fatalf("%s/%s: %s with %d receives, want completed after one", tc.session, tc.req.ID, got.Status, cs.receives.Load()-before)
		}
	}
	if cs.records.Load() != 0 {
		t.Fatalf("%d records, want none", cs.records.Load())
	}
	// An async Submit answers before the turn settles, recorded.
	release := make(chan struct{})
	f.reg = mustRegistry(t, &tool.Spec{Name: "held", Effect: dispatch.EffectRead, Impl: dispatch.ToolFunc(
		func(ctx context.Context, c dispatch.Call, _ *dispatch.Attempt) dispatch.Outcome {
			<-release
			return dispatch.OK(c.Arguments, true)
		})})
	sub, err := f.svc.Submit(ctx, "s1", turn.TurnRequest{ID: "t4", Calls: calls("e=held"), Async: true})
	if err != nil || sub.Turn.Status != turn.StatusRunning {
		t.Fatalf("async submit: %v %v", sub.Turn.Status, err)
	}
	if stored, err := f.svc.GetTurn(ctx, turn.TurnKey{SessionID: "s1", TurnID: "t4"}); err != nil || stored.Status != turn.StatusRunning {
		t.Fatalf("async turn stored as %v: %v", stored.Status, err)
	}
	close(release)
	if done, err := f.svc.Await(ctx, turn.TurnKey{SessionID: "s1", TurnID: "t4"}); err != nil || done.Status != turn.StatusCompleted {
		t.Fatalf("async turn ended %v: %v", done.Status, err)
	}
}

// A read still running when the window ends is recorded as running (leased,
// visible, recoverable) and its turn continues as any other.
func TestSlowReadIsRecordedAfterWindow(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var started sync.WaitGroup
	started.Add(1)
	held := &tool.Spec{Name: "held", Effect: dispatch.EffectRead, Impl: dispatch.ToolFunc(
		func(ctx context.Context, c dispatch.Call, _ *dispatch.Attempt) dispatch.Outcome {
			started.Done()
			<-release
			return dispatch.OK(c.Arguments, true)
		})}
	f, cs := readsFixture(t, time.Millisecond, held)
	sub, err := f.svc.Submit(context.Background(), "s1", turn.TurnRequest{ID: "t1", Calls: calls("a=read", "b=held")})
	if err != nil {
		t.Fatal(err)
	}
	started.Wait()
	k := turn.TurnKey{SessionID: "s1", TurnID: "t1"}
	if sub.Turn.Status != turn.StatusRunning {
		t.Fatalf("submitted %s, want running", sub.Turn.Status)
	}
	stored, err := f.svc.GetTurn(context.Background(), k)
	if err != nil || stored.Status != turn.StatusRunning {
		t.Fatalf("stored %v: %v, want running", stored.Status, err)
	}
	close(release)
	done, err := f.svc.Await(context.Background(), k)
	if err != nil || done.Status != turn.StatusCompleted || statuses(done) != "a=ok b=ok" {
		t.Fatalf("settled %s %q: %v", done.Status, statuses(done), err)
	}
	if got := cs.calls(); got[1] != 1 || got[2] != 0 || got[3] != 1 {
		t.Fatalf("store calls lookup/receive/record/commit = %v, want one receive and one commit", got)
	}
	f.wantLedger("s1", "", "turn_received", "call_admitted:a", "call_answered:a", "call_admitted:b", "call_answered:b", "turn_settled")
}

// A failed record leaves nothing behind and is reported: nothing was
// acknowledged.
func TestFailedRecordLeavesNothing(t *testing.T) {
	t.Parallel()
	f, cs := readsFixture(t, time.Minute)
	cs.beforeRecord = func(turn.Record) error { return errors.New("disk full") }
	_, err := f.svc.Submit(context.Background(), "s1", turn.TurnRequest{ID: "t1", Calls: calls("a=read")})
	if err == nil {
		t.Fatal("Submit succeeded though recording failed")
	}
	if _, err := f.svc.GetTurn(context.Background(), turn.TurnKey{SessionID: "s1", TurnID: "t1"}); !errors.Is(err, turn.ErrNotFound) {
		t.Fatalf("GetTurn after a failed record: %v, want ErrNotFound", err)
	}
	if n := len(f.kinds("s1", "")); n != 0 {
		t.Fatalf("ledger has %d lines, want none", n)
	}
	// The client retries: the turn runs and is recorded.
	cs.beforeRecord = nil
	if got := f.run(f.svc, "s1", turn.TurnRequest{ID: "t1", Calls: calls("a=read")}); got.Status != turn.StatusCompleted {
		t.Fatalf("retry: %s", got.Status)
	}
}

// When the turn id is recorded elsewhere while the wave runs (two posts
// racing), the record writes nothing and Submit answers from the record.
func TestRecordRaceFallsBackToReplay(t *testing.T) {
	t.Parallel()
	f, cs := readsFixture(t, time.Minute)
	req := turn.TurnRequest{ID: "t1", Calls: calls("a=read")}
	cs.beforeRecord = func(r turn.Record) error {
		// Another replica receives the same turn first.
		_, err := cs.Store.ReceiveTurn(context.Background(), turn.Receive{
			Session: turn.Session{ID: "s1"}, Turn: turn.Turn{SessionID: "s1", ID: "t1", Status: turn.StatusRunning,
				Mode: r.Turn.Mode, FailurePolicy: r.Turn.FailurePolicy, Calls: r.Turn.Calls, Hash: r.Turn.Hash, CreatedAt: r.Turn.CreatedAt},
			Line: r.Lines[0], LeaseOwner: "owner-b", LeaseUntil: time.Now().Add(time.Minute),
		})
		return err
	}
	sub, err := f.svc.Submit(context.Background(), "s1", req)
	if err != nil {
		t.Fatal(err)
	}
	if !sub.Replayed || sub.Turn.Status != turn.StatusRunning {
		t.Fatalf("submitted replayed %v %s, want the other replica's running turn replayed", sub.Replayed, sub.Turn.Status)
	}
	if got := f.kinds("s1", ""); !slices.Equal(got, []string{"turn_received"}) {
		t.Fatalf("ledger %v, want only the other replica's turn_received", got)
	}
}

// requestKey marks a submitting request's context in TestWaveLogsCarryRequest.
type requestKey struct{}

// ctxHandler records each log message with the requestKey value of the
// context it was logged with.
type ctxHandler struct {
	mu  sync.Mutex
	got []string
}

func (h *ctxHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *ctxHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *ctxHandler) WithGroup(string) slog.Handler            { return h }
func (h *ctxHandler) Handle(ctx context.Context, r slog.Record) error {
	v, _ := ctx.Value(requestKey{}).(string)
	h.mu.Lock()
	h.got = append(h.got, r.Message+" | "+v)
	h.mu.Unlock()
	return nil
}

// The log lines a wave writes for a submitted turn carry the submitting
// request's context values (the logger's request id), though the wave runs
// detached from the request's cancellation.
func TestWaveLogsCarryRequest(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cs := &countingStore{Store: f.store, beforeRecord: func(turn.Record) error { return errors.New("disk full") }}
	h := &ctxHandler{}
	svc := newService(t, turn.Config{
		Store: cs, Tools: func() *tool.Registry { return f.reg }, Owner: "owner-a",
		ReadTurnWindow: time.Minute, Logger: slog.New(h),
	})
	if _, err := svc.CreateSession(context.Background(), turn.SessionSpec{ID: "s1"}); err != nil {
		t.Fatal(err)
	}
	ctx := context.WithValue(context.Background(), requestKey{}, "req-7")
	if _, err := svc.Submit(ctx, "s1", turn.TurnRequest{ID: "t1", Calls: calls("a=read")}); err == nil {
		t.Fatal("Submit succeeded though recording failed")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !slices.Contains(h.got, "recording turn failed; nothing of it is stored | req-7") {
		t.Fatalf("log lines %q: want the failed record logged with the request's context", h.got)
	}
}

// stackTool is an inline read tool (dispatch.InlineTool) that notes, per
// call, whether Service.Submit is on the stack that runs it: whether the
// wave ran on the goroutine that submitted the turn.
type stackTool struct {
	mu     sync.Mutex
	inline bool
	under  map[string]bool
}

func (s *stackTool) Inline() bool { return s.inline }

func (s *stackTool) Invoke(_ context.Context, call dispatch.Call, _ *dispatch.Attempt) dispatch.Outcome {
	pcs := make([]uintptr, 128)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(1, pcs)])
	under := false
	for f, more := frames.Next(); more && !under; f, more = frames.Next() {
		under = strings.HasSuffix(f.Function, "turn.(*Service).Submit")
	}
	s.mu.Lock()
	if s.under == nil {
		s.under = map[string]bool{}
	}
	s.under[call.ID] = under
	s.mu.Unlock()
	return dispatch.OK([]byte(`{}`), true)
}

func (s *stackTool) ranUnderSubmit(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.under[id]
}

// TestInlineReadTurnRunsInSubmit: a turn whose calls are all reads of
// inline tools runs on the goroutine that submits it, and is recorded
// whole as any all-read turn; one call of another tool (a read that is
// not inline, an unknown tool) sends the wave to a worker goroutine.
func TestInlineReadTurnRunsInSubmit(t *testing.T) {
	t.Parallel()
	instant := &stackTool{inline: true}
	notInline := &stackTool{}
	f, cs := readsFixture(t, time.Minute,
		&tool.Spec{Name: "instant", Effect: dispatch.EffectRead, Impl: instant},
		&tool.Spec{Name: "plain", Effect: dispatch.EffectRead, Impl: notInline})
	for _, tc := range []struct {
		turn  string
		calls []turn.Call
		want  string
		here  bool
	}{
		{"t1", calls("a=instant", "b=instant", "c=instant"), "a=ok b=ok c=ok", true},
		{"t2", calls("d=instant", "e=plain"), "d=ok e=ok", false},
		{"t3", calls("g=instant", "h=nosuch"), "g=ok h=refused(unknown_tool)", false},
	} {
		records := cs.records.Load()
		sub, err := f.svc.Submit(context.Background(), "s1", turn.TurnRequest{ID: tc.turn, Calls: tc.calls})
		if err != nil {
			t.Fatal(err)
		}
		if sub.Turn.Status != turn.StatusCompleted || statuses(sub.Turn) != tc.want {
			t.Errorf("%s: %s %s, want completed %s", tc.turn, sub.Turn.Status, statuses(sub.Turn), tc.want)
		}
		if got := cs.records.Load() - records; got != 1 {
			t.Errorf("%s: %d whole recordings, want 1", tc.turn, got)
		}
		if got := instant.ranUnderSubmit(tc.calls[0].ID); got != tc.here {
			t.Errorf("%s: the wave ran on Submit's goroutine: %v, want %v", tc.turn, got, tc.here)
		}
	}
	if notInline.ranUnderSubmit("e") {
		t.Error("a read of a tool that is not inline ran on Submit's goroutine")
	}

	// The window does not apply: with a window that is over at once, the
	// inline turn still comes back completed, recorded whole, never
	// recorded as running first.
	instant = &stackTool{inline: true}
	f, cs = readsFixture(t, time.Nanosecond, &tool.Spec{Name: "instant", Effect: dispatch.EffectRead, Impl: instant})
	sub, err := f.svc.Submit(context.Background(), "s1", turn.TurnRequest{ID: "t4", Calls: calls("x=instant", "y=instant")})
	if err != nil {
		t.Fatal(err)
	}
	if sub.Turn.Status != turn.StatusCompleted || cs.receives.Load() != 0 || cs.records.Load() != 1 || !instant.ranUnderSubmit("x") {
		t.Errorf("with a window of 1 ns: %s %s, %d receives, %d whole recordings, on Submit's goroutine %v; want completed, 0, 1, true",
			sub.Turn.Status, statuses(sub.Turn), cs.receives.Load(), cs.records.Load(), instant.ranUnderSubmit("x"))
	}
}
