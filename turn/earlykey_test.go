package turn_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/turnd/turnd/dispatch"
	"github.com/turnd/turnd/tool"
	"github.com/turnd/turnd/turn"
)

// slowDeferring takes its completion key, hands it to keys, and then waits
// for the wave's cancellation before it could answer pending: a tool whose
// request is cut while its external work is under way.
func slowDeferring(keys chan<- string) *tool.Spec {
	return &tool.Spec{Name: "slow_defer", Effect: dispatch.EffectWrite, Impl: dispatch.ToolFunc(func(ctx context.Context, _ dispatch.Call, at *dispatch.Attempt) dispatch.Outcome {
		key, err := at.CompletionKey(ctx)
		if err != nil {
			return dispatch.Fail("no_key", err.Error())
		}
		keys <- key
		<-ctx.Done()
		return dispatch.Cancelled("cut before it answered")
	})}
}

// slowDeferringTurn submits turn s1/t1, async, of one call c1 to
// slowDeferring on a started fixture, and waits for the call's key.
func slowDeferringTurn(t *testing.T) (*fixture, *turn.Service, turn.TurnKey, string) {
	t.Helper()
	keys := make(chan string, 1)
	f, svc := startedFixture(t, slowDeferring(keys))
	k := turn.TurnKey{SessionID: "s1", TurnID: "t1"}
	if _, err := svc.Submit(context.Background(), k.SessionID, turn.TurnRequest{ID: k.TurnID, Async: true,
		Calls: []turn.Call{{ID: "c1", Name: "slow_defer", Arguments: json.RawMessage(`{}`)}}}); err != nil {
		t.Fatal(err)
	}
	return f, svc, k, <-keys
}

// A call whose key took a delivery before its tool answered (early), and
// whose turn is then cancelled before the call parked: the accepted
// delivery is the call's result, the key is completed, and the call is
// answered once. Before, the key stayed early (repeated deliveries said
// already_completed) while the call said cancelled, and a second
// call_answered line came after turn_settled.
func TestEarlyDeliveryOutlivesACancel(t *testing.T) {
	t.Parallel()
	f, svc, k, key := slowDeferringTurn(t)
	res, err := svc.Complete(context.Background(), key, turn.Delivery{Output: json.RawMessage(`{"done":true}`)})
	if err != nil || res.Status != "accepted" {
		t.Fatalf("early delivery: %+v %v", res, err)
	}
	got, err := svc.Cancel(context.Background(), k)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != turn.StatusCancelled || statuses(got) != "c1=ok" || string(got.Results[0].Output) != `{"done":true}` {
		t.Fatalf("turn %s %s %s, want cancelled with c1 answered by the delivery", got.Status, statuses(got), got.Results[0].Output)
	}
	info, err := svc.CompletionStatus(context.Background(), key)
	if err != nil || info.Status != turn.CompletionCompleted {
		t.Errorf("key %+v %v, want completed", info, err)
	}
	if _, err := svc.Complete(context.Background(), key, turn.Delivery{Output: json.RawMessage(`{"done":false}`)}); !errors.Is(err, turn.ErrCompletionConflict) {
		t.Errorf("another payload: %v, want a conflict", err)
	}
	f.wantLedger("s1", "t1", "turn_received", "call_admitted:c1", "attempt_started:c1", "call_answered:c1", "turn_settled")
}

// A call whose tool took a key and did not park before its turn was
// cancelled has its key closed with it: a delivery afterwards is late
// (410, recorded once), never accepted for a call that ended.
func TestKeyOfACallThatDidNotParkIsClosed(t *testing.T) {
	t.Parallel()
	f, svc, k, key := slowDeferringTurn(t)
	got, err := svc.Cancel(context.Background(), k)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != turn.StatusCancelled || statuses(got) != "c1=cancelled(cancelled)" {
		t.Fatalf("turn %s %s", got.Status, statuses(got))
	}
	if _, err := svc.Complete(context.Background(), key, turn.Delivery{Output: json.RawMessage(`{"done":true}`)}); !errors.Is(err, turn.ErrCompletionGone) {
		t.Errorf("a delivery after the call ended: %v, want gone (410)", err)
	}
	kinds := strings.Join(f.kinds("s1", "t1"), " ")
	if strings.Count(kinds, "call_answered:c1") != 1 || !strings.Contains(kinds, "completion_late") {
		t.Errorf("ledger %s: want one call_answered and the late delivery", kinds)
	}
}

// A call parked with a delivery that reached its key before it parked
// (early, accepted) keeps that delivery as its result when the turn is
// cancelled before the early payload was applied: the key is completed,
// not cancelled. (Two replicas racing deliveries and cancels lost such
// accepted deliveries.)
func TestEarlyDeliveryOfAParkedCallOutlivesACancel(t *testing.T) {
	t.Parallel()
	keys := make(chan string, 1)
	var svc *turn.Service
	deliver := func(key string) {
		// The key is issued, the call not parked yet: the delivery is early.
		res, err := svc.Complete(context.Background(), key, turn.Delivery{Output: json.RawMessage(`{"approved":true}`)})
		if err != nil || res.Status != "accepted" {
			t.Errorf("early delivery: %+v %v", res, err)
		}
	}
	blocking := &tool.Spec{Name: "blocking", Effect: dispatch.EffectWrite, Impl: dispatch.ToolFunc(func(ctx context.Context, _ dispatch.Call, _ *dispatch.Attempt) dispatch.Outcome {
		<-ctx.Done()
		return dispatch.Cancelled("the turn was cancelled")
	})}
	entered := make(chan struct{})
	watch := &tool.Spec{Name: "watch", Effect: dispatch.EffectWrite, Impl: dispatch.ToolFunc(func(ctx context.Context, c dispatch.Call, at *dispatch.Attempt) dispatch.Outcome {
		close(entered)
		return blocking.Impl.Invoke(ctx, c, at)
	})}
	f, s := startedFixture(t, deferring(keys, deliver), watch)
	svc = s
	k := turn.TurnKey{SessionID: "s1", TurnID: "t1"}
	if _, err := svc.Submit(context.Background(), k.SessionID, turn.TurnRequest{ID: k.TurnID, Async: true,
		Calls: []turn.Call{{ID: "c1", Name: "defer", Arguments: json.RawMessage(`{}`)}, {ID: "c2", Name: "watch", Arguments: json.RawMessage(`{}`)}}}); err != nil {
		t.Fatal(err)
	}
	key := <-keys
	<-entered // c1 is parked (its park rode with c2's journaling), c2 runs
	got, err := svc.Cancel(context.Background(), k)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != turn.StatusCancelled || statuses(got) != "c1=ok c2=cancelled(cancelled)" || string(got.Results[0].Output) != `{"approved":true}` {
		t.Fatalf("turn %s %s %s, want c1 answered by its early delivery", got.Status, statuses(got), got.Results[0].Output)
	}
	if info, err := svc.CompletionStatus(context.Background(), key); err != nil || info.Status != turn.CompletionCompleted {
		t.Errorf("key %+v %v, want completed", info, err)
	}
	kinds := strings.Join(f.kinds("s1", "t1"), " ")
	if strings.Count(kinds, "call_answered:c1") != 1 {
		t.Errorf("ledger %s: want c1 answered once", kinds)
	}
}
