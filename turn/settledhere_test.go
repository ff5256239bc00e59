package turn_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnd/turnd/internal/teststores"
	"github.com/turnd/turnd/tool"
	"github.com/turnd/turnd/turn"
)

// A waiter of a turn that a delivery in the same process settles answers
// with what the delivery changed, without reading the turn again; its
// answer is the turn as the store then reads it, field for field, on both
// stores. Turns whose other calls are still open when the waiter last read
// them (here: two deferred calls delivered one after the other) are read.
func TestWaiterTakesTheSettledTurnFromTheDelivery(t *testing.T) {
	t.Parallel()
	teststores.Each(t, func(t *testing.T, open func(testing.TB) turn.Store) {
		keys := make(chan string, 8)
		f := newFixture(t, deferring(keys, nil))
		f.store = open(t)
		svc := startService(t, turn.Config{Store: f.store, Tools: func() *tool.Registry { return f.reg }, Owner: "o"})
		ctx := context.Background()
		const rounds = 5
		for i := range rounds {
			id := fmt.Sprintf("t%d", i)
			k := turn.TurnKey{SessionID: "s", TurnID: id}
			if _, err := svc.Submit(ctx, "s", turn.TurnRequest{ID: id, Calls: []turn.Call{
				{ID: "r" + id, Name: "read", Arguments: json.RawMessage(`{"q":1}`)}, {ID: "d" + id, Name: "defer"}}}); err != nil {
				t.Fatal(err)
			}
			key := takeKey(t, svc, keys, k)
			waitStatus(t, svc, k, turn.StatusWaiting)
			got := waitAnswer(svc, k)
			// Let the waiter read the waiting turn first (when it has not,
			// it reads the settled one, which the comparison covers too).
			time.Sleep(20 * time.Millisecond)
			// An output, one cut by the budget (kept in full), an error.
			d := turn.Delivery{Output: json.RawMessage(`{"n": 1, "s": "é"}`)}
			want := "ok"
			switch i {
			case 1:
				d.Output = json.RawMessage(`"` + strings.Repeat(`line\n`, 200_000) + `"`)
			case 2:
				d, want = turn.Delivery{Error: &turn.CallError{Code: "refused", Message: "no"}}, "error(refused)"
			}
			if _, err := svc.Complete(ctx, key, d); err != nil {
				t.Fatal(err)
			}
			answer := answerIsRead(t, svc, k, got, fmt.Sprintf("round %d", i))
			if i == 1 && (!answer.Results[1].Truncated || answer.Results[1].OutputID == "") {
				t.Fatalf("round 1: the 1.2 MB output was not cut and kept: %+v", answer.Results[1])
			}
			if answer.Status != turn.StatusCompleted || statuses(answer) != fmt.Sprintf("r%s=ok d%s=%s", id, id, want) {
				t.Fatalf("round %d: %s %s", i, answer.Status, statuses(answer))
			}
		}
		if svc.SettledHere() == 0 {
			t.Fatalf("none of %d waiters took the settled turn from its delivery", rounds)
		}

		// Two open calls: the first delivery does not settle the turn;
		// the waiter reads it again after it (its read before showed both
		// calls open), and its answer is the turn read.
		if _, err := svc.Submit(ctx, "s", turn.TurnRequest{ID: "two", Calls: []turn.Call{{ID: "a", Name: "defer"}, {ID: "b", Name: "defer"}}}); err != nil {
			t.Fatal(err)
		}
		k := turn.TurnKey{SessionID: "s", TurnID: "two"}
		k1, k2 := takeKey(t, svc, keys, k), takeKey(t, svc, keys, k)
		waitStatus(t, svc, k, turn.StatusWaiting)
		got := waitAnswer(svc, k)
		time.Sleep(20 * time.Millisecond)
		for _, key := range []string{k1, k2} {
			if _, err := svc.Complete(ctx, key, turn.Delivery{Output: json.RawMessage(`2`)}); err != nil {
				t.Fatal(err)
			}
		}
		answer := answerIsRead(t, svc, k, got, "two open calls")
		if statuses(answer) != "a=ok b=ok" {
			t.Fatalf("two open calls: %s", statuses(answer))
		}

		// A cancel of the turn's one open call settles it too: its waiter
		// answers with the cancelled turn, as read.
		before := svc.SettledHere()
		if _, err := svc.Submit(ctx, "s", turn.TurnRequest{ID: "cancelled", Calls: []turn.Call{{ID: "x", Name: "defer"}}}); err != nil {
			t.Fatal(err)
		}
		k = turn.TurnKey{SessionID: "s", TurnID: "cancelled"}
		takeKey(t, svc, keys, k)
		waitStatus(t, svc, k, turn.StatusWaiting)
		got = waitAnswer(svc, k)
		time.Sleep(20 * time.Millisecond)
		if _, err := svc.Cancel(ctx, k); err != nil {
			t.Fatal(err)
		}
		answer = answerIsRead(t, svc, k, got, "cancelled")
		if answer.Status != turn.StatusCancelled {
			t.Fatalf("cancelled: %s %s", answer.Status, statuses(answer))
		}
		t.Logf("cancel answered from the resolution: %v", svc.SettledHere() > before)
	})
}

// takeKey takes the next key the deferring tool handed out, up to 10 s.
func takeKey(t *testing.T, svc *turn.Service, keys <-chan string, k turn.TurnKey) string {
	t.Helper()
	select {
	case key := <-keys:
		return key
	case <-time.After(10 * time.Second):
		tr, err := svc.GetTurn(context.Background(), k)
		t.Fatalf("no completion key within 10 s; turn %s: %s %s %v", k.TurnID, tr.Status, statuses(tr), err)
		return ""
	}
}

// answer is a waiter's answer.
type answer struct {
	turn turn.Turn
	err  error
}

// waitAnswer waits for turn k to settle, as a waiter, up to 20 s.
func waitAnswer(svc *turn.Service, k turn.TurnKey) <-chan answer {
	got := make(chan answer, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		tr, err := svc.WaitSettled(ctx, k)
		got <- answer{tr, err}
	}()
	return got
}

// answerIsRead takes the waiter's answer from got and fails unless it is
// turn k as read now, field for field; what names the case.
func answerIsRead(t *testing.T, svc *turn.Service, k turn.TurnKey, got <-chan answer, what string) turn.Turn {
	t.Helper()
	a := <-got
	if a.err != nil || !a.turn.Status.Settled() {
		t.Fatalf("%s: the waiter's answer: %s %v", what, a.turn.Status, a.err)
	}
	read, err := svc.GetTurn(context.Background(), k)
	if err != nil {
		t.Fatal(err)
	}
	if x, r := normalTimes(a.turn), normalTimes(read); !reflect.DeepEqual(x, r) {
		t.Fatalf("%s: the waiter's answer differs from the turn read:\n got %+v\nread %+v", what, x, r)
	}
	return a.turn
}

// waitStatus waits, up to 10 s, for turn k to reach status.
func waitStatus(t *testing.T, svc *turn.Service, k turn.TurnKey, status turn.Status) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		tr, err := svc.GetTurn(context.Background(), k)
		if err == nil && tr.Status == status {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("turn %s: %s %v, want %s", k.TurnID, tr.Status, err, status)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// normalTimes is t with its times in UTC and without monotonic readings,
// so that reflect.DeepEqual compares instants.
func normalTimes(t turn.Turn) turn.Turn {
	n := func(v time.Time) time.Time { return v.Round(0).UTC() }
	t.CreatedAt, t.SettledAt = n(t.CreatedAt), n(t.SettledAt)
	rs := make([]turn.Result, len(t.Results))
	for i, r := range t.Results {
		r.StartedAt, r.FinishedAt = n(r.StartedAt), n(r.FinishedAt)
		rs[i] = r
	}
	t.Results = rs
	return t
}

// deliveryReads counts GetDelivery reads.
type deliveryReads struct {
	turn.Store
	reads atomic.Int64
}

func (c *deliveryReads) GetDelivery(ctx context.Context, sessionID string, keyHash [32]byte) (turn.DeliveryTarget, error) {
	c.reads.Add(1)
	return c.Store.GetDelivery(ctx, sessionID, keyHash)
}

// A delivery to a key parked here takes what it needs of the key from
// the run that parked it, not from a read; a key that changed since (its
// turn cancelled, or resolved by another replica) is read then and
// answered as it is.
func TestDeliveryToAKeyParkedHere(t *testing.T) {
	t.Parallel()
	teststores.Each(t, func(t *testing.T, open func(testing.TB) turn.Store) {
		keys := make(chan string, 8)
		f := newFixture(t, deferring(keys, nil))
		st := &deliveryReads{Store: open(t)}
		cfg := func(owner string) turn.Config {
			return turn.Config{Store: st, Tools: func() *tool.Registry { return f.reg }, Owner: owner}
		}
		a, b := startService(t, cfg("a")), startService(t, cfg("b"))
		ctx := context.Background()
		park := func(id string) (turn.TurnKey, string) {
			t.Helper()
			k := turn.TurnKey{SessionID: "s", TurnID: id}
			if _, err := a.Submit(ctx, "s", turn.TurnRequest{ID: id, Calls: []turn.Call{{ID: "c" + id, Name: "defer"}}}); err != nil {
				t.Fatal(err)
			}
			key := takeKey(t, a, keys, k)
			// Await returns once the run ended, the turn left waiting.
			if tr, err := a.Await(ctx, k); err != nil || tr.Status != turn.StatusWaiting {
				t.Fatalf("parking %s: %s %v", id, tr.Status, err)
			}
			return k, key
		}

		// Parked and delivered here: no read.
		k, key := park("here")
		before := st.reads.Load()
		if res, err := a.Complete(ctx, key, turn.Delivery{Output: json.RawMessage(`1`)}); err != nil || res.Status != "accepted" {
			t.Fatalf("deliver: %+v %v", res, err)
		}
		if n := st.reads.Load() - before; n != 0 {
			t.Errorf("a delivery to a key parked here read it %d times", n)
		}
		if tr := waitSettled(t, a, "s", k.TurnID); statuses(tr) != "chere=ok" {
			t.Fatalf("after delivery: %s", statuses(tr))
		}
		// Again (the key is read now): the same payload is a repeat.
		if res, err := a.Complete(ctx, key, turn.Delivery{Output: json.RawMessage(` 1 `)}); err != nil || res.Status != "already_completed" {
			t.Fatalf("repeat: %+v %v", res, err)
		}

		// Cancelled after it parked: gone, and recorded late.
		k, key = park("cancelled")
		if _, err := a.Cancel(ctx, k); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Complete(ctx, key, turn.Delivery{Output: json.RawMessage(`2`)}); !errors.Is(err, turn.ErrCompletionGone) {
			t.Fatalf("delivery to a cancelled key: %v, want ErrCompletionGone", err)
		}
		if tr := waitSettled(t, a, "s", k.TurnID); tr.Status != turn.StatusCancelled {
			t.Fatalf("cancelled turn: %s", tr.Status)
		}

		// Delivered to the other replica first: here it is a repeat, or a
		// conflict with another payload; the turn keeps the first.
		k, key = park("elsewhere")
		if res, err := b.Complete(ctx, key, turn.Delivery{Output: json.RawMessage(`3`)}); err != nil || res.Status != "accepted" {
			t.Fatalf("deliver to b: %+v %v", res, err)
		}
		if _, err := a.Complete(ctx, key, turn.Delivery{Output: json.RawMessage(`4`)}); !errors.Is(err, turn.ErrCompletionConflict) {
			t.Fatalf("another payload to a: %v, want ErrCompletionConflict", err)
		}
		if tr := waitSettled(t, a, "s", k.TurnID); len(tr.Results) != 1 || string(tr.Results[0].Output) != `3` {
			t.Fatalf("turn resolved elsewhere: %+v", tr.Results)
		}
	})
}
