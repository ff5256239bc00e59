package turn_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/turnd/turnd/dispatch"
	"github.com/turnd/turnd/internal/teststores"
	"github.com/turnd/turnd/tool"
	"github.com/turnd/turnd/turn"
)

// BenchmarkSubmitReads is workload 1's turn inside the service: four reads
// of an inline echo tool, submitted and awaited, on the embedded store.
// Its allocations are the service's cost per turn.
func BenchmarkSubmitReads(b *testing.B) {
	echoSpec := &tool.Spec{Name: "echo", Effect: dispatch.EffectRead, Idempotent: true, Impl: inlineEcho{}}
	reg := tool.NewRegistry(echoSpec)
	svc, err := turn.New(turn.Config{Store: teststores.SQLite(b), Tools: func() *tool.Registry { return reg }, Owner: "bench", LeaseTTL: 10 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = svc.Shutdown(ctx)
	})
	ctx := context.Background()
	calls := make([]turn.Call, 4)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		id := strconv.Itoa(i)
		for k := range calls {
			calls[k] = turn.Call{ID: id + "-" + strconv.Itoa(k), Name: "echo", Arguments: json.RawMessage(`{"text":"hello"}`)}
		}
		sub, err := svc.Submit(ctx, "s", turn.TurnRequest{ID: "t" + id, Calls: calls})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := svc.Await(ctx, turn.TurnKey{SessionID: "s", TurnID: sub.Turn.ID}); err != nil {
			b.Fatal(err)
		}
	}
}

// inlineEcho answers its arguments on the wave's goroutine, as the
// builtin echo does.
type inlineEcho struct{}

func (inlineEcho) Invoke(_ context.Context, c dispatch.Call, _ *dispatch.Attempt) dispatch.Outcome {
	return dispatch.OK(c.Arguments, true)
}
func (inlineEcho) Inline() bool { return true }
