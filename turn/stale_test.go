package turn_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/turnd/turnd/dispatch"
	"github.com/turnd/turnd/internal/teststores"
	"github.com/turnd/turnd/tool"
	"github.com/turnd/turnd/turn"
)

// gateTool is an idempotent write tool that tells entered when it runs and
// answers out once release closes.
func gateTool(entered chan<- struct{}, release <-chan struct{}, out string) *tool.Registry {
	return tool.NewRegistry(&tool.Spec{Name: "gate", Effect: dispatch.EffectWrite, Idempotent: true,
		Impl: dispatch.ToolFunc(func(ctx context.Context, _ dispatch.Call, _ *dispatch.Attempt) dispatch.Outcome {
			entered <- struct{}{}
			select {
			case <-release:
				return dispatch.OK(json.RawMessage(`{"by":"`+out+`"}`), true)
			case <-ctx.Done():
				// A stale wave that goes on regardless is what this
				// test is about: answer as if the work finished.
				<-release
				return dispatch.OK(json.RawMessage(`{"by":"`+out+`"}`), true)
			}
		})})
}

// A wave whose turn another owner took over meanwhile commits nothing more,
// even when its process claims the lease back: A runs the turn, stalls past
// its lease, B resumes it, stalls past its own, and A's recovery claims it
// again while A's first wave still runs. That wave's outcome is stale and
// must not settle the turn. (Two replicas with a 1 s lease under load once
// settled a turn from such a wave, cancelling a call whose key a delivery
// had completed meanwhile.)
func TestStaleWaveCommitsNothing(t *testing.T) {
	t.Parallel()
	teststores.Each(t, func(t *testing.T, open func(testing.TB) turn.Store) {
		store := open(t)
		clk := &clock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
		const ttl = 10 * time.Second
		enteredA, releaseA := make(chan struct{}, 2), make(chan struct{})
		enteredB, releaseB := make(chan struct{}, 2), make(chan struct{})
		regA, regB := gateTool(enteredA, releaseA, "A"), gateTool(enteredB, releaseB, "B")
		a := newService(t, turn.Config{Store: store, Tools: func() *tool.Registry { return regA }, Owner: "A", Now: clk.Now, LeaseTTL: ttl, ResumeBackoff: time.Second})
		b := newService(t, turn.Config{Store: store, Tools: func() *tool.Registry { return regB }, Owner: "B", Now: clk.Now, LeaseTTL: ttl, ResumeBackoff: time.Second})
		k := turn.TurnKey{SessionID: "s1", TurnID: "t1"}
		if _, err := a.Submit(context.Background(), k.SessionID, turn.TurnRequest{ID: k.TurnID, Async: true,
			Calls: []turn.Call{{ID: "c1", Name: "gate", Arguments: json.RawMessage(`{}`)}}}); err != nil {
			t.Fatal(err)
		}
		<-enteredA
		clk.add(ttl + time.Second) // A stalls past its lease
		if n, err := b.Recover(context.Background()); err != nil || n != 1 {
			t.Fatalf("B recovered %d (%v), want 1", n, err)
		}
		<-enteredB
		clk.add(ttl + 2*time.Second) // B stalls past its own (and the back-off)
		if _, err := a.Recover(context.Background()); err != nil {
			t.Fatal(err)
		}
		// Each wave ends with its outcome; neither may settle the turn.
		// (Await answers a lost lease while the wave is still active,
		// and the turn as stored once it ended.)
		for _, w := range []struct {
			name    string
			release chan struct{}
			svc     *turn.Service
		}{{"A's stale wave", releaseA, a}, {"B's wave, whose lease A claimed", releaseB, b}} {
			close(w.release)
			if _, err := w.svc.Await(context.Background(), k); err != nil && !errors.Is(err, turn.ErrLeaseLost) {
				t.Errorf("%s ended with %v", w.name, err)
			}
			got, err := store.GetTurn(context.Background(), k)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != turn.StatusRunning || statuses(got) != "" && statuses(got) != "c1=started" {
				t.Fatalf("%s wrote the turn: %s %s", w.name, got.Status, statuses(got))
			}
		}
		// The turn is resumed anew once A's claim expires, and settles.
		clk.add(ttl + 4*time.Second)
		enteredC, releaseC := make(chan struct{}, 2), make(chan struct{})
		close(releaseC)
		regC := gateTool(enteredC, releaseC, "C")
		c := newService(t, turn.Config{Store: store, Tools: func() *tool.Registry { return regC }, Owner: "C", Now: clk.Now, LeaseTTL: ttl, ResumeBackoff: time.Second})
		if n, err := c.Recover(context.Background()); err != nil || n != 1 {
			t.Fatalf("C recovered %d (%v), want 1", n, err)
		}
		got, err := c.Await(context.Background(), k)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != turn.StatusCompleted || string(got.Results[0].Output) != `{"by":"C"}` {
			t.Errorf("turn %s %s %s, want completed by C", got.Status, statuses(got), got.Results[0].Output)
		}
	})
}
