package postgres_test

import (
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnd/turnd/dispatch"
	"github.com/turnd/turnd/internal/pgtest"
	"github.com/turnd/turnd/turn"
)

// These benchmarks put the store's hot path next to the database's own
// speed: BenchmarkRawInsert is one single-row INSERT per op through the same
// pool; BenchmarkTurn records a turn and commits it in two steps, the writes
// of a typical two-call turn. Run them in parallel (-cpu) to see throughput.
//
//	go test -run '^$' -bench . -cpu 1,8,32 ./store/postgres/

func BenchmarkRawInsert(b *testing.B) {
	s := pgtest.Store(b)
	ctx := b.Context()
	if _, err := s.Pool().Exec(ctx, `CREATE TABLE raw (id bigint PRIMARY KEY, at timestamptz NOT NULL, data json)`); err != nil {
		b.Fatal(err)
	}
	var n atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.Pool().Exec(ctx, `INSERT INTO raw (id, at, data) VALUES ($1, $2, $3)`,
				n.Add(1), time.Now(), []byte(`{"k":"v"}`)); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkTurn: ReceiveTurn, then a commit of both results with their
// lines, then the settling commit — three statements per turn.
func BenchmarkTurn(b *testing.B) {
	s := pgtest.Store(b)
	ctx := b.Context()
	var n atomic.Int64
	now := time.Now()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			sid, tid := fmt.Sprintf("s%d", i%64), fmt.Sprintf("t%d", i)
			k := turn.TurnKey{SessionID: sid, TurnID: tid}
			_, err := s.ReceiveTurn(ctx, turn.Receive{
				Session: turn.Session{ID: sid, CreatedAt: now},
				Turn: turn.Turn{SessionID: sid, ID: tid, Status: turn.StatusRunning, Mode: dispatch.ModeOrdered,
					FailurePolicy: dispatch.PolicyIsolate, Hash: "h", CreatedAt: now,
					Calls: []turn.Call{{ID: tid + "a", Name: "read"}, {ID: tid + "b", Name: "read"}}},
				Line:       turn.Line{Kind: turn.LineTurnReceived, At: now, Data: json.RawMessage(`{"calls":2}`)},
				LeaseOwner: "bench", LeaseUntil: now.Add(time.Minute),
			})
			if err != nil {
				b.Error(err)
				return
			}
			c := turn.Commit{Key: k, LeaseOwner: "bench", LeaseUntil: now.Add(time.Minute)}
			for j, id := range []string{tid + "a", tid + "b"} {
				c.Lines = append(c.Lines,
					turn.Line{CallID: id, Kind: turn.LineCallAdmitted, At: now},
					turn.Line{CallID: id, Kind: turn.LineCallAnswered, At: now, Data: json.RawMessage(`{"bytes":12}`)})
				c.Results = append(c.Results, turn.Result{Index: j, CallID: id, Name: "read", Effect: dispatch.EffectRead,
					Status: turn.CallOK, Output: json.RawMessage(`"hello world!"`), OriginalBytes: 12, OriginalLines: 1,
					Attempts: 1, StartedAt: now, FinishedAt: now})
			}
			if err := s.Commit(ctx, c); err != nil {
				b.Error(err)
				return
			}
			settle := turn.Commit{Key: k, LeaseOwner: "bench", Status: turn.StatusCompleted, SettledAt: now,
				Lines: []turn.Line{{Kind: turn.LineTurnSettled, At: now}}}
			if err := s.Commit(ctx, settle); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
