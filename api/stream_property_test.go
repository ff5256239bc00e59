package api_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/turnd/turnd/internal/streamfix"
	"github.com/turnd/turnd/internal/teststores"
	"github.com/turnd/turnd/turn"
)

// TestStreamedLedgerProperty: the ledger of a streamed turn is line for
// line the ledger of the same calls posted whole (timestamps, seqs, output
// ids and completion keys aside, and its turn_received line marked
// streamed), over random turns mixing reads that
// start early, writes, refusals (unknown tool, bad arguments, a tool not
// granted, a repeated id), replays of earlier calls and whole turns, and
// deferred calls. Session W gets every turn whole, session S the same
// turns streamed in a random format, in random chunks.
func TestStreamedLedgerProperty(t *testing.T) {
	t.Parallel()
	teststores.Each(t, func(t *testing.T, open func(testing.TB) turn.Store) {
		p := newProbe(t)
		s := newStack(t, open, stackOptions{yaml: probeYAML(p)})
		// The deferred tool's server reports each key; nobody completes them.
		stop := make(chan struct{})
		drained := make(chan struct{})
		go func() {
			defer close(drained)
			for {
				select {
				case <-s.tools.keys:
				case <-p.invoked:
				case <-stop:
					return
				}
			}
		}()
		t.Cleanup(func() { close(stop); <-drained })
		grants := `["echo","sleep","now","pread","pwrite","deferred"]`
		for _, sid := range []string{"prop-whole", "prop-streamed"} {
			if r := s.do("POST", "/v1/sessions", `{"id":"`+sid+`","tools":`+grants+`}`); r.status != 201 {
				t.Fatalf("session: %d %s", r.status, r.body)
			}
		}
		rng := rand.New(rand.NewPCG(7, uint64(len(t.Name()))))
		var used []string // call ids of earlier turns
		var turns [][]streamfix.Call
		formats := []string{"ndjson", "openai.chat", "openai.responses", "anthropic.messages"}
		for k := range 16 {
			var calls []streamfix.Call
			if k == 0 {
				// One of each kind, so that every run has them all.
				calls = []streamfix.Call{
					{ID: "f0", Name: "pread", Arguments: `{"q":"a"}`}, {ID: "f1", Name: "phold", Arguments: `{}`},
					{ID: "f2", Name: "nosuch", Arguments: `{}`}, {ID: "f3", Name: "pread", Arguments: `{"nope":1}`},
					{ID: "f0", Name: "echo", Arguments: `{"text":"dup"}`}, {ID: "f5", Name: "pwrite", Arguments: `{}`},
					{ID: "f6", Name: "deferred", Arguments: `{"deadline":"1h"}`},
				}
			} else if len(turns) > 0 && rng.IntN(8) == 0 {
				calls = turns[rng.IntN(len(turns))] // a whole turn again
			} else {
				for j := range 1 + rng.IntN(6) {
					id := fmt.Sprintf("c%d_%d", k, j)
					var c streamfix.Call
					switch rng.IntN(10) {
					case 0, 1, 2:
						c = streamfix.Call{ID: id, Name: "pread", Arguments: fmt.Sprintf(`{"q":"%d"}`, rng.IntN(100))}
					case 3:
						c = streamfix.Call{ID: id, Name: "echo", Arguments: `{"text":"hi"}`}
					case 4:
						c = streamfix.Call{ID: id, Name: "sleep", Arguments: fmt.Sprintf(`{"ms":%d}`, rng.IntN(20))}
					case 5:
						c = streamfix.Call{ID: id, Name: "pwrite", Arguments: `{"n":1}`}
					case 6:
						c = streamfix.Call{ID: id, Name: "deferred", Arguments: `{"deadline":"1h"}`}
					case 7:
						refusals := []streamfix.Call{
							{ID: id, Name: "nosuch", Arguments: `{}`},
							{ID: id, Name: "pread", Arguments: `{"nope":1}`},
							{ID: id, Name: "phold", Arguments: `{}`}, // not granted
						}
						c = refusals[rng.IntN(len(refusals))]
					case 8:
						if len(used) > 0 {
							c = streamfix.Call{ID: used[rng.IntN(len(used))], Name: "pread", Arguments: `{"q":"again"}`}
						} else {
							c = streamfix.Call{ID: id, Name: "now", Arguments: `{}`}
						}
					case 9:
						if j > 0 {
							c = calls[rng.IntN(j)] // a repeated id
						} else {
							c = streamfix.Call{ID: id, Name: "now", Arguments: `{}`}
						}
					}
					calls = append(calls, c)
				}
			}
			turns = append(turns, calls)
			format := formats[rng.IntN(len(formats))]
			tid := fmt.Sprintf("turn%d", k)
			if format == "openai.chat" {
				tid = "chatcmpl-" + tid
			}

			whole := map[string]any{"id": tid, "calls": []any{}}
			for _, c := range calls {
				whole["calls"] = append(whole["calls"].([]any), map[string]any{"id": c.ID, "name": c.Name, "arguments": json.RawMessage(c.Arguments)})
			}
			wr := s.do("POST", "/v1/sessions/prop-whole/turns", whole)

			fx := fixture(format, tid, calls)
			path, ct := "/v1/sessions/prop-streamed/turns?turn_id="+tid+"&format="+format, "text/event-stream"
			if format == "ndjson" {
				path, ct = "/v1/sessions/prop-streamed/turns", "application/x-ndjson"
			}
			sp := s.stream(path, ct)
			for _, part := range fx.Parts {
				sp.writeChunked(part, func() int { return 1 + rng.IntN(200) })
			}
			sr := sp.end()
			if wr.status != sr.status && format == "ndjson" || (wr.status >= 300) != (sr.status >= 300) {
				t.Fatalf("turn %d (%s): whole %d %s, streamed %d %s", k, format, wr.status, wr.body, sr.status, sr.body)
			}
			if wr.header.Get("Turnd-Replayed") != sr.header.Get("Turnd-Replayed") {
				t.Fatalf("turn %d (%s): replayed whole %q, streamed %q", k, format, wr.header.Get("Turnd-Replayed"), sr.header.Get("Turnd-Replayed"))
			}
			for _, c := range calls {
				used = append(used, c.ID)
			}
		}
		w, st := ledgerOf(t, s, "prop-whole"), ledgerOf(t, s, "prop-streamed")
		for i := range max(len(w), len(st)) {
			var a, b string
			if i < len(w) {
				a = w[i]
			}
			if i < len(st) {
				b = st[i]
			}
			if a != b {
				t.Fatalf("ledgers differ at line %d:\n whole:    %s\n streamed: %s", i, a, b)
			}
		}
		if len(w) < 40 {
			t.Fatalf("only %d ledger lines", len(w))
		}
		if wm, _ := streamedMarks(t, s, "prop-whole"); wm != 0 {
			t.Errorf("%d turns posted whole are marked streamed", wm)
		}
		if sm, sw := streamedMarks(t, s, "prop-streamed"); sm == 0 || sw != 0 {
			t.Errorf("of the streamed turns, %d are marked streamed and %d not", sm, sw)
		}
		all := strings.Join(w, "\n")
		for _, kind := range []string{"call_replayed", "call_pending", "call_refused", "attempt_started", "duplicate_call_id", "tool_not_granted"} {
			if !strings.Contains(all, kind) {
				t.Fatalf("the mix had no %s:\n%s", kind, all)
			}
		}
	})
}
