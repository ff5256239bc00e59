package bench

import (
	"bytes"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/turnd/turnd/client"
	"github.com/turnd/turnd/internal/loadtest"
)

// BenchmarkClientWork is the work each client does for a turn of workload 1
// (4 calls of echo) outside the HTTP stack: the tuned client's body and
// check (most answers by their text), and the ordinary client's
// encoding/json request and whole decoded answer.
//
//	go test -run '^$' -bench ClientWork -benchmem ./internal/bench/
func BenchmarkClientWork(b *testing.B) {
	w := Workload{Concurrency: 32, Duration: time.Second, Calls: 4, ReadFraction: 1, Tools: ToolBuiltin, Seed: 1}
	answer := echoAnswer(b, w.Calls)
	b.Run("tuned", func(b *testing.B) {
		r := offlineRunner(b, w)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			_ = r.body(i)
			if i%loadtest.FullCheckEvery != 0 && loadtest.QuickCheck(answer, w.Calls) {
				_ = bytes.Count(answer, []byte(`"truncated":true,`))
				continue
			}
			var t client.Turn
			if err := json.Unmarshal(answer, &t); err != nil {
				b.Fatal(err)
			}
			if _, kind, msg := checkTurn(&t, w.Calls, nil); kind != "" {
				b.Fatal(kind, msg)
			}
		}
	})
	b.Run("ordinary", func(b *testing.B) {
		w := w
		w.Client = ClientOrdinary
		r := offlineRunner(b, w)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			t, err := r.turnRequest(i)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := json.Marshal(t); err != nil {
				b.Fatal(err)
			}
			var got client.Turn
			if err := json.NewDecoder(bytes.NewReader(answer)).Decode(&got); err != nil {
				b.Fatal(err)
			}
			if _, kind, msg := checkTurn(&got, w.Calls, nil); kind != "" {
				b.Fatal(kind, msg)
			}
		}
	})
}

// echoAnswer is an answer of turnd's shape to a turn of calls calls of
// echo, each answered ok.
func echoAnswer(b *testing.B, calls int) []byte {
	now := time.Now().UTC()
	t := client.Turn{ID: "t1", SessionID: "bench-0", Status: client.StatusCompleted, Mode: "ordered",
		FailurePolicy: "isolate", CreatedAt: now, SettledAt: &now}
	for k := range calls {
		t.Results = append(t.Results, client.Result{CallID: "t1." + strconv.Itoa(k), Name: "echo", Status: "ok",
			Output: json.RawMessage(`{"pad":""}`), OriginalBytes: 10, OriginalLines: 1, Attempts: 1, StartedAt: &now, FinishedAt: &now})
	}
	answer, err := json.Marshal(t)
	if err != nil {
		b.Fatal(err)
	}
	return answer
}
