package postgres_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnd/turnd/dispatch"
	"github.com/turnd/turnd/internal/loadtest"
	"github.com/turnd/turnd/internal/pgtest"
	"github.com/turnd/turnd/turn"
	"github.com/turnd/turnd/turn/storetest"
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

// BenchmarkRecordStatement runs recording statements (the group commit's,
// see RecordTurn) of a fixed number of whole four-call turns, each of its
// own session, one statement after another on an otherwise idle database.
// A statement has a cost of its own besides its turns' rows (on its
// generic plan it still starts an executor for every part, receives its
// arrays, commits and flushes); the size 1 run shows it, the larger ones
// how it spreads. The time includes encoding the records in Go. Besides ns/op (one statement) it reports µs per turn and,
// when the server runs on this machine, its CPU µs per turn (every process
// of the server, see loadtest.PostgresCPU):
//
//	go test -run '^$' -bench RecordStatement ./store/postgres/
func BenchmarkRecordStatement(b *testing.B) {
	for _, size := range []int{1, 4, 16, 32} {
		b.Run(fmt.Sprintf("turns=%d", size), func(b *testing.B) {
			s := pgtest.Store(b)
			ctx := b.Context()
			sessions := make([]string, size)
			for i := range sessions {
				sessions[i] = fmt.Sprintf("s%d", i)
				if err := s.CreateSession(ctx, turn.Session{ID: sessions[i], CreatedAt: time.Now()}); err != nil {
					b.Fatal(err)
				}
			}
			n := 0
			batch := func() []turn.Record {
				rs := make([]turn.Record, size)
				for i := range rs {
					n++
					rs[i] = storetest.WholeTurn(sessions[i], fmt.Sprintf("t%d", n), 4)
				}
				return rs
			}
			record := func(rs []turn.Record) {
				outcomes, err := s.RecordBatch(ctx, rs)
				if err == nil {
					err = errors.Join(outcomes...)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			// Warm up: the statement prepared on the connections and the
			// tables past their first pages. Autovacuum may still visit
			// them during the measurement (its workers' CPU then counts, or
			// drops out when one exits between the readings), so compare
			// several runs.
			for warm := time.Now(); time.Since(warm) < time.Second; {
				record(batch())
			}
			conn, err := s.Pool().Acquire(ctx)
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Release()
			cpu0, cpuOK, err := loadtest.PostgresCPU(ctx, conn.Conn())
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				b.StopTimer()
				rs := batch()
				b.StartTimer()
				record(rs)
			}
			turns := float64(b.N * size)
			b.ReportMetric(float64(b.Elapsed().Microseconds())/turns, "µs/turn")
			if cpuOK {
				if cpu1, ok, err := loadtest.PostgresCPU(ctx, conn.Conn()); err == nil && ok {
					b.ReportMetric(float64((cpu1-cpu0).Microseconds())/turns, "db-cpu-µs/turn")
				}
			}
		})
	}
}
