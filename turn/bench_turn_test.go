package turn_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/turnd/turnd/internal/teststores"
	"github.com/turnd/turnd/tool"
	"github.com/turnd/turnd/turn"
)

// benchTurns submits b.N turns of four reads of the echo builtin, each in
// a session of its own, on the embedded store, and waits for each: the
// all-read path of workload 1, one turn at a time. edit adjusts the
// service's config (tracing, in BenchmarkTurnTraced). cpu-ns/op is the
// process's CPU time per turn (the store's included).
func benchTurns(b *testing.B, edit func(*turn.Config)) {
	reg, err := tool.Parse([]byte("builtin: [echo]\n"), tool.Options{})
	if err != nil {
		b.Fatal(err)
	}
	cfg := turn.Config{Store: teststores.SQLite(b), Tools: func() *tool.Registry { return reg }}
	if edit != nil {
		edit(&cfg)
	}
	svc := newService(b, cfg)
	args := json.RawMessage(`{"q":"what is the weather in Lisbon today?"}`)
	calls := []turn.Call{{ID: "c1", Name: "echo", Arguments: args}, {ID: "c2", Name: "echo", Arguments: args},
		{ID: "c3", Name: "echo", Arguments: args}, {ID: "c4", Name: "echo", Arguments: args}}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU()
	for i := range b.N {
		sid := "s" + strconv.Itoa(i)
		sub, err := svc.Submit(ctx, sid, turn.TurnRequest{ID: "t", Calls: calls})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := svc.Await(ctx, turn.TurnKey{SessionID: sid, TurnID: sub.Turn.ID}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
}

// BenchmarkTurn is a turn without tracing (see benchTurns).
func BenchmarkTurn(b *testing.B) { benchTurns(b, nil) }
