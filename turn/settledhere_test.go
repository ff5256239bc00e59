package turn_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
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
			got := make(chan turn.Turn, 1)
			go func() { got <- waitSettled(t, svc, "s", id) }()
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
			answer := <-got
			read, err := svc.GetTurn(ctx, k)
			if err != nil {
				t.Fatal(err)
			}
			if a, r := normalTimes(answer), normalTimes(read); !reflect.DeepEqual(a, r) {
				t.Fatalf("round %d: the waiter's answer differs from the turn read:\n got %+v\nread %+v", i, a, r)
			}
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
		got := make(chan turn.Turn, 1)
		go func() { got <- waitSettled(t, svc, "s", "two") }()
		time.Sleep(20 * time.Millisecond)
		for _, key := range []string{k1, k2} {
			if _, err := svc.Complete(ctx, key, turn.Delivery{Output: json.RawMessage(`2`)}); err != nil {
				t.Fatal(err)
			}
		}
		answer := <-got
		read, err := svc.GetTurn(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if a, r := normalTimes(answer), normalTimes(read); !reflect.DeepEqual(a, r) {
			t.Fatalf("two open calls: the waiter's answer differs from the turn read:\n got %+v\nread %+v", a, r)
		}
		if statuses(answer) != "a=ok b=ok" {
			t.Fatalf("two open calls: %s", statuses(answer))
		}
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
