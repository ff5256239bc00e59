package turn_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turnd/turnd/completion"
	"github.com/turnd/turnd/dispatch"
	"github.com/turnd/turnd/tool"
	"github.com/turnd/turnd/turn"
)

// deferring is a tool that takes its completion key, hands it to keys and
// parks with the options in its arguments ({"deadline_ms", "heartbeat_ms",
// "on_timeout", "on_cancel"}).
func deferring(keys chan<- string, before func(key string)) *tool.Spec {
	return &tool.Spec{Name: "defer", Effect: dispatch.EffectWrite, Impl: dispatch.ToolFunc(func(ctx context.Context, c dispatch.Call, at *dispatch.Attempt) dispatch.Outcome {
		var args struct {
			DeadlineMS  int    `json:"deadline_ms"`
			HeartbeatMS int    `json:"heartbeat_ms"`
			OnTimeout   string `json:"on_timeout"`
			OnCancel    string `json:"on_cancel"`
		}
		_ = json.Unmarshal(c.Arguments, &args)
		key, err := at.CompletionKey(ctx)
		if err != nil {
			return dispatch.Fail("no_key", err.Error())
		}
		if before != nil {
			before(key)
		}
		keys <- key
		p := dispatch.Pending{OnTimeout: args.OnTimeout, OnCancel: args.OnCancel}
		if args.DeadlineMS > 0 {
			p.Deadline = time.Now().Add(time.Duration(args.DeadlineMS) * time.Millisecond)
		}
		p.HeartbeatTimeout = time.Duration(args.HeartbeatMS) * time.Millisecond
		return dispatch.Defer(p)
	})}
}

func startedFixture(t *testing.T, extra ...*tool.Spec) (*fixture, *turn.Service) {
	t.Helper()
	f := newFixture(t, extra...)
	svc := startService(t, turn.Config{
		Store: f.store, Tools: func() *tool.Registry { return f.reg }, Owner: "completer",
		SweepInterval: 10 * time.Millisecond,
		CancelHook: func(c turn.Completion, key string) {
			cancelHooks.Store(c.CallID, key)
		},
	})
	return f, svc
}

var cancelHooks sync.Map

// waitCancelHook waits, up to 10 s, for the cancel hook to be called for
// callID.
func waitCancelHook(t *testing.T, callID string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		if _, ok := cancelHooks.Load(callID); ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("cancel_external_work was not applied to %s", callID)
		}
		<-tick.C
	}
}

func waitSettled(t *testing.T, svc *turn.Service, session, id string) turn.Turn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tr, err := svc.WaitSettled(ctx, turn.TurnKey{SessionID: session, TurnID: id})
	if err != nil {
		t.Fatal(err)
	}
	if !tr.Status.Settled() {
		t.Fatalf("turn %s not settled: %s", id, tr.Status)
	}
	return tr
}

func TestCompletionDeliveredLater(t *testing.T) {
	t.Parallel()
	keys := make(chan string, 4)
	f, svc := startedFixture(t, deferring(keys, nil))
	sub, err := svc.Submit(context.Background(), "s", turn.TurnRequest{ID: "t", Calls: []turn.Call{{ID: "r", Name: "read"}, {ID: "d", Name: "defer"}}})
	if err != nil {
		t.Fatal(err)
	}
	key := <-keys
	tr, err := svc.Await(context.Background(), turn.TurnKey{SessionID: "s", TurnID: sub.Turn.ID})
	if err != nil || tr.Status != turn.StatusWaiting || statuses(tr) != "r=ok d=pending" {
		t.Fatalf("before delivery: %s %s %v", tr.Status, statuses(tr), err)
	}
	if sid, ok := completion.Route(key); !ok || sid != "s" {
		t.Fatalf("key %q does not route to its session s (%q)", key, sid)
	}
	info, err := svc.CompletionStatus(context.Background(), key)
	if err != nil || info.Status != turn.CompletionPending || info.Deadline.Sub(time.Now()) < 23*time.Hour {
		t.Fatalf("status %+v %v", info, err)
	}
	for _, bad := range []string{"", "ck_", key[:len(key)-1] + "A", "ck_" + strings.Repeat("A", 43), "nope", key + "x"} {
		if bad == key {
			continue
		}
		if _, err := svc.Complete(context.Background(), bad, turn.Delivery{Output: json.RawMessage(`1`)}); !errors.Is(err, turn.ErrNotFound) {
			t.Fatalf("key %q: %v, want ErrNotFound", bad, err)
		}
	}
	out := json.RawMessage(`{"approved": true}`)
	res, err := svc.Complete(context.Background(), key, turn.Delivery{Output: out})
	if err != nil || res.Status != "accepted" {
		t.Fatalf("deliver: %+v %v", res, err)
	}
	done := waitSettled(t, svc, "s", "t")
	if done.Status != turn.StatusCompleted || statuses(done) != "r=ok d=ok" || string(done.Results[1].Output) != `{"approved":true}` {
		t.Fatalf("after delivery: %s %s %s", done.Status, statuses(done), done.Results[1].Output)
	}
	again, err := svc.Complete(context.Background(), key, turn.Delivery{Output: json.RawMessage(`{ "approved" : true }`)})
	if err != nil || again.Status != "already_completed" {
		t.Fatalf("repeat: %+v %v", again, err)
	}
	if _, err := svc.Complete(context.Background(), key, turn.Delivery{Output: json.RawMessage(`{"approved": false}`)}); !errors.Is(err, turn.ErrCompletionConflict) {
		t.Fatalf("different payload: %v", err)
	}
	lines, _ := f.store.Ledger(context.Background(), "s", 0, 100, turn.MaxPageBytes)
	var kinds []string
	for _, l := range lines {
		if strings.Contains(string(l.Data), key) || strings.Contains(string(l.Data), key[3:]) {
			t.Fatalf("ledger line %s carries the key: %s", l.Kind, l.Data)
		}
		kinds = append(kinds, string(l.Kind)+":"+l.CallID)
	}
	want := "turn_received: call_admitted:r call_answered:r call_admitted:d attempt_started:d call_pending:d call_answered:d turn_settled:"
	if strings.Join(kinds, " ") != want {
		t.Fatalf("ledger\n got %s\nwant %s", strings.Join(kinds, " "), want)
	}
}

func TestCompletionArrivingBeforePendingIsKept(t *testing.T) {
	t.Parallel()
	keys := make(chan string, 1)
	var svc *turn.Service
	var early turn.DeliveryResult
	var earlyErr error
	_, svc = startedFixture(t, deferring(keys, func(key string) {
		// The external system answers before the tool has even returned.
		early, earlyErr = svc.Complete(context.Background(), key, turn.Delivery{Output: json.RawMessage(`"fast"`)})
	}))
	if _, err := svc.Submit(context.Background(), "s", turn.TurnRequest{ID: "t", Calls: []turn.Call{{ID: "d", Name: "defer"}}}); err != nil {
		t.Fatal(err)
	}
	<-keys
	tr := waitSettled(t, svc, "s", "t")
	if earlyErr != nil || early.Status != "accepted" {
		t.Fatalf("early delivery: %+v %v", early, earlyErr)
	}
	if tr.Status != turn.StatusCompleted || statuses(tr) != "d=ok" || string(tr.Results[0].Output) != `"fast"` {
		t.Fatalf("turn %s %s %s", tr.Status, statuses(tr), tr.Results[0].Output)
	}
}

func TestCompletionTimeouts(t *testing.T) {
	t.Parallel()
	keys := make(chan string, 4)
	f, svc := startedFixture(t, deferring(keys, nil))
	// error_as_result: the turn goes on and completes.
	if _, err := svc.Submit(context.Background(), "s", turn.TurnRequest{ID: "t1", Calls: []turn.Call{
		{ID: "a", Name: "defer", Arguments: json.RawMessage(`{"deadline_ms": 30}`)}}}); err != nil {
		t.Fatal(err)
	}
	keyA := <-keys
	tr := waitSettled(t, svc, "s", "t1")
	if tr.Status != turn.StatusCompleted || statuses(tr) != "a=timed_out(completion_timeout)" {
		t.Fatalf("t1: %s %s", tr.Status, statuses(tr))
	}
	// A late delivery is refused as gone but recorded.
	if _, err := svc.Complete(context.Background(), keyA, turn.Delivery{Output: json.RawMessage(`"late"`)}); !errors.Is(err, turn.ErrCompletionGone) {
		t.Fatalf("late delivery: %v", err)
	}
	lines, _ := f.store.Ledger(context.Background(), "s", 0, 100, turn.MaxPageBytes)
	if last := lines[len(lines)-1]; last.Kind != turn.LineCompletionLate || !strings.Contains(string(last.Data), `"late"`) {
		t.Fatalf("last line %s %s", last.Kind, last.Data)
	}
	// fail_turn: the turn fails and its other parked call is cancelled.
	if _, err := svc.Submit(context.Background(), "s", turn.TurnRequest{ID: "t2", Calls: []turn.Call{
		{ID: "b", Name: "defer", Arguments: json.RawMessage(`{"deadline_ms": 60000, "on_cancel": "cancel_external_work"}`)},
		{ID: "c", Name: "defer", Arguments: json.RawMessage(`{"deadline_ms": 30, "on_timeout": "fail_turn"}`)}}}); err != nil {
		t.Fatal(err)
	}
	<-keys
	<-keys
	tr = waitSettled(t, svc, "s", "t2")
	if tr.Status != turn.StatusFailed || statuses(tr) != "b=cancelled(turn_failed) c=timed_out(completion_timeout)" {
		t.Fatalf("t2: %s %s", tr.Status, statuses(tr))
	}
	// The sweeper tells the tool after the settlement has committed, so
	// the settled turn may be seen first.
	waitCancelHook(t, "b")
	// heartbeat: no heartbeat within its timeout ends the wait early.
	if _, err := svc.Submit(context.Background(), "s", turn.TurnRequest{ID: "t3", Calls: []turn.Call{
		{ID: "h", Name: "defer", Arguments: json.RawMessage(`{"deadline_ms": 60000, "heartbeat_ms": 1500}`)}}}); err != nil {
		t.Fatal(err)
	}
	keyH := <-keys
	if _, err := svc.Await(context.Background(), turn.TurnKey{SessionID: "s", TurnID: "t3"}); err != nil {
		t.Fatal(err)
	}
	if info, err := svc.Heartbeat(context.Background(), keyH); err != nil || info.HeartbeatDeadline.IsZero() || !info.HeartbeatDeadline.Before(info.Deadline) {
		t.Fatalf("heartbeat: %+v %v", info, err)
	}
	tr = waitSettled(t, svc, "s", "t3")
	if statuses(tr) != "h=timed_out(completion_timeout)" || !strings.Contains(tr.Results[0].Error.Message, "heartbeat") {
		t.Fatalf("t3: %s %+v", statuses(tr), tr.Results[0].Error)
	}
}

func TestCancelWaitingTurn(t *testing.T) {
	t.Parallel()
	keys := make(chan string, 2)
	_, svc := startedFixture(t, deferring(keys, nil))
	if _, err := svc.Submit(context.Background(), "s", turn.TurnRequest{ID: "t", Calls: []turn.Call{
		{ID: "x", Name: "defer", Arguments: json.RawMessage(`{"on_cancel": "cancel_external_work"}`)},
		{ID: "y", Name: "defer", Arguments: json.RawMessage(`{"on_cancel": "ignore"}`)}}}); err != nil {
		t.Fatal(err)
	}
	key := <-keys
	<-keys
	if tr, err := svc.Await(context.Background(), turn.TurnKey{SessionID: "s", TurnID: "t"}); err != nil || tr.Status != turn.StatusWaiting {
		t.Fatalf("%s %v", tr.Status, err)
	}
	tr, err := svc.Cancel(context.Background(), turn.TurnKey{SessionID: "s", TurnID: "t"})
	if err != nil || tr.Status != turn.StatusCancelled || statuses(tr) != "x=cancelled(cancelled) y=cancelled(cancelled)" {
		t.Fatalf("cancel: %s %s %v", tr.Status, statuses(tr), err)
	}
	if k, ok := cancelHooks.Load("x"); !ok || k != key {
		t.Fatal("cancel_external_work not applied to x with its key")
	}
	if _, ok := cancelHooks.Load("y"); ok {
		t.Fatal("on_cancel ignore was not honoured for y")
	}
	if _, err := svc.Complete(context.Background(), key, turn.Delivery{Output: json.RawMessage(`1`)}); !errors.Is(err, turn.ErrCompletionGone) {
		t.Fatalf("delivery after cancel: %v", err)
	}
}

// gate is a write tool that signals entered and blocks until release closes.
func gate(entered chan<- struct{}, release <-chan struct{}) *tool.Spec {
	return &tool.Spec{Name: "gate", Effect: dispatch.EffectWrite, Impl: dispatch.ToolFunc(func(ctx context.Context, c dispatch.Call, _ *dispatch.Attempt) dispatch.Outcome {
		entered <- struct{}{}
		select {
		case <-release:
			return dispatch.OK(json.RawMessage(`"opened"`), true)
		case <-ctx.Done():
			return dispatch.Fail("cancelled", ctx.Err().Error())
		}
	})}
}

// A delivery to a call parked early in a wave, arriving while a later call
// of the same wave still runs, settles the turn once the wave ends: it must
// not stay waiting with nothing pending.
func TestCompletionDeliveredWhileWaveRuns(t *testing.T) {
	t.Parallel()
	keys := make(chan string, 1)
	entered, release := make(chan struct{}, 1), make(chan struct{})
	f, svc := startedFixture(t, deferring(keys, nil), gate(entered, release))
	if _, err := svc.Submit(context.Background(), "s", turn.TurnRequest{ID: "t", Async: true,
		Calls: []turn.Call{{ID: "d", Name: "defer"}, {ID: "g", Name: "gate"}}}); err != nil {
		t.Fatal(err)
	}
	key := <-keys
	// The gate's attempt_started commit carries d's park: once the gate
	// runs, d is pending in the store.
	<-entered
	res, err := svc.Complete(context.Background(), key, turn.Delivery{Output: json.RawMessage(`"later"`)})
	if err != nil || res.Status != "accepted" {
		t.Fatalf("deliver: %+v %v", res, err)
	}
	close(release)
	tr := waitSettled(t, svc, "s", "t")
	if tr.Status != turn.StatusCompleted || statuses(tr) != "d=ok g=ok" || string(tr.Results[0].Output) != `"later"` {
		t.Fatalf("turn %s %s %s", tr.Status, statuses(tr), tr.Results[0].Output)
	}
	lines, err := f.store.Ledger(context.Background(), "s", 0, 100, turn.MaxPageBytes)
	if err != nil {
		t.Fatal(err)
	}
	settled := 0
	for _, l := range lines {
		if l.Kind == turn.LineTurnSettled {
			settled++
		}
	}
	if settled != 1 {
		t.Fatalf("%d turn_settled lines, want 1", settled)
	}
}

// A call id parked in an earlier turn and posted again in a later one is
// refused there (its result arrives in the earlier turn), so that the later
// turn settles instead of waiting on a completion that is not its own; once
// the result has arrived, the call id replays it.
func TestPendingCallPostedAgain(t *testing.T) {
	t.Parallel()
	keys := make(chan string, 1)
	_, svc := startedFixture(t, deferring(keys, nil))
	if _, err := svc.Submit(context.Background(), "s", turn.TurnRequest{ID: "t1", Calls: []turn.Call{{ID: "d", Name: "defer"}}}); err != nil {
		t.Fatal(err)
	}
	key := <-keys
	if tr, err := svc.Await(context.Background(), turn.TurnKey{SessionID: "s", TurnID: "t1"}); err != nil || tr.Status != turn.StatusWaiting {
		t.Fatalf("t1: %s %v", tr.Status, err)
	}
	for _, calls := range [][]turn.Call{
		{{ID: "d", Name: "defer"}},
		{{ID: "r", Name: "read"}, {ID: "d", Name: "defer"}},
	} {
		id := "t2-" + calls[0].ID
		if _, err := svc.Submit(context.Background(), "s", turn.TurnRequest{ID: id, Calls: calls}); err != nil {
			t.Fatal(err)
		}
		tr := waitSettled(t, svc, "s", id)
		last := tr.Results[len(tr.Results)-1]
		if last.Status != turn.CallRefused || last.Error == nil || last.Error.Code != "call_pending" || !strings.Contains(last.Error.Message, `"t1"`) {
			t.Fatalf("%s: %s %+v", id, statuses(tr), last.Error)
		}
	}
	if _, err := svc.Complete(context.Background(), key, turn.Delivery{Output: json.RawMessage(`"done"`)}); err != nil {
		t.Fatal(err)
	}
	waitSettled(t, svc, "s", "t1")
	if _, err := svc.Submit(context.Background(), "s", turn.TurnRequest{ID: "t3", Calls: []turn.Call{{ID: "d", Name: "defer"}}}); err != nil {
		t.Fatal(err)
	}
	tr := waitSettled(t, svc, "s", "t3")
	if statuses(tr) != "d=ok" || tr.Results[0].ReplayedFrom != "t1" || string(tr.Results[0].Output) != `"done"` {
		t.Fatalf("t3: %s from %q %s", statuses(tr), tr.Results[0].ReplayedFrom, tr.Results[0].Output)
	}
}
