package turn_test

import (
	"context"
	"errors"
	"slices"
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
	svc, err := turn.New(turn.Config{
		Store: cs, Tools: func() *tool.Registry { return f.reg }, Owner: "owner-a", ReadTurnWindow: window,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = svc.Shutdown(ctx)
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
	want := []string{"turn_received", "call_admitted:a", "call_answered:a", "call_admitted:b", "call_answered:b",
		"call_refused:c", "turn_settled"}
	got := f.kinds("s1", "")
	if !slices.Equal(got, want) {
		t.Fatalf("ledger\n got %v\nwant %v", got, want)
	}
	stored, err := f.svc.GetTurn(context.Background(), turn.TurnKey{SessionID: "s1", TurnID: "t1"})
	if err != nil || stored.Status != turn.StatusCompleted || statuses(stored) != statuses(sub.Turn) || stored.SettledAt.IsZero() {
		t.Fatalf("stored turn %s %q settled %v: %v", stored.Status, statuses(stored), stored.SettledAt, err)
	}
}

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
	if cs.records.Load() != 1 {
		t.Fatalf("%d records, want 1", cs.records.Load())
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
	want := []string{"turn_received", "call_replayed:a", "call_replayed:w", "call_admitted:b", "call_answered:b", "turn_settled"}
	if got := f.kinds("s1", "t2"); !slices.Equal(got, want) {
		t.Fatalf("ledger of t2\n got %v\nwant %v", got, want)
	}
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
	want := []string{"turn_received", "call_admitted:a", "call_answered:a", "call_admitted:b", "call_answered:b", "turn_settled"}
	if got := f.kinds("s1", ""); !slices.Equal(got, want) {
		t.Fatalf("ledger\n got %v\nwant %v", got, want)
	}
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
