package api_test

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/turnd/turnd/dispatch"
	"github.com/turnd/turnd/turn"
)

type wireLine struct {
	Seq    int64           `json:"seq"`
	TurnID string          `json:"turn_id"`
	Kind   string          `json:"kind"`
	Data   json.RawMessage `json:"data"`
}

type wireLedger struct {
	Lines     []wireLine `json:"lines"`
	NextAfter int64      `json:"next_after"`
}

// cancelledKey posts a turn with one deferred call to session sid (created
// with budget) and cancels it; it returns the call's key, now cancelled.
func cancelledKey(t *testing.T, s *stack, sid, budget string) string {
	t.Helper()
	if r := s.do("POST", "/v1/sessions", `{"id":"`+sid+`","budget":`+budget+`}`); r.status != 201 {
		t.Fatalf("create session: %d %s", r.status, r.body)
	}
	if r := s.do("POST", "/v1/sessions/"+sid+"/turns", `{"id":"t","calls":[{"id":"d","name":"deferred","arguments":{"on_cancel":"ignore"}}]}`); r.status != 202 {
		t.Fatalf("post: %d %s", r.status, r.body)
	}
	key := (<-s.tools.keys)[0]
	if r := s.do("POST", "/v1/sessions/"+sid+"/turns/t/cancel", nil); r.status != 200 {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	return key
}

// lateLines reads the whole ledger of sid page by page and returns its
// completion_late lines.
func lateLines(t *testing.T, s *stack, sid string) []wireLine {
	t.Helper()
	var late []wireLine
	after := int64(0)
	for {
		r := s.do("GET", "/v1/sessions/"+sid+"/ledger?limit=1000&after="+strconv.FormatInt(after, 10), nil)
		var page wireLedger
		r.json(t, &page)
		if r.status != 200 {
			t.Fatalf("ledger: %d %s", r.status, r.body)
		}
		if len(page.Lines) == 0 {
			return late
		}
		for _, l := range page.Lines {
			if l.Kind == string(turn.LineCompletionLate) {
				late = append(late, l)
			}
		}
		after = page.NextAfter
	}
}

// A late payload is recorded once per distinct body, projected by the
// session's budget, with its full copy kept as an output; at most
// turn.MaxLateLines distinct bodies of a key are recorded. Every late post
// answers 410 completion_gone all the same.
func TestLateDeliveriesRecordedOnce(t *testing.T) {
	t.Parallel()
	eachStack(t, func(t *testing.T, s *stack) {
		key := cancelledKey(t, s, "s", `{"limit":1024}`)
		big := strings.Repeat("x", 100_000)
		gone := func(body string) {
			t.Helper()
			r := s.do("POST", "/v1/complete/"+key, body)
			if r.status != 410 || r.code(t) != "completion_gone" || !strings.Contains(string(r.body), `"recorded_status":"cancelled"`) {
				t.Fatalf("late post: %d %s", r.status, r.body)
			}
		}
		for _, body := range []string{
			`{"output":"` + big + `"}`,
			`{"output":"` + big + `"}`,
			`{ "output" : "` + big + `" }`, // the same JSON, formatted otherwise
		} {
			gone(body)
		}
		late := lateLines(t, s, "s")
		if len(late) != 1 {
			t.Fatalf("%d completion_late lines after three posts of one body, want 1", len(late))
		}
		var data struct {
			Status        string          `json:"status"`
			Key           string          `json:"key"`
			Payload       json.RawMessage `json:"payload"`
			Truncated     bool            `json:"truncated"`
			OriginalBytes int64           `json:"original_bytes"`
			OutputID      string          `json:"output_id"`
		}
		if err := json.Unmarshal(late[0].Data, &data); err != nil {
			t.Fatal(err)
		}
		if data.Status != "cancelled" || data.Key == "" || !data.Truncated || data.OriginalBytes < int64(len(big)) || data.OutputID == "" {
			t.Fatalf("late line data: %.300s", late[0].Data)
		}
		if len(late[0].Data) > 4096 || !json.Valid(data.Payload) || !strings.Contains(string(data.Payload), "truncated") {
			t.Fatalf("late payload not projected to the session's budget (%d bytes): %.300s", len(late[0].Data), late[0].Data)
		}
		out := s.do("GET", "/v1/outputs/"+data.OutputID, nil)
		if out.status != 200 || string(out.body) != `{"output":"`+big+`"}` {
			t.Fatalf("full late payload: %d %.200s", out.status, out.body)
		}

		// Distinct bodies: at most turn.MaxLateLines lines in all.
		for i := range turn.MaxLateLines + 3 {
			gone(fmt.Sprintf(`{"output":{"n":%d}}`, i))
			gone(fmt.Sprintf(`{"output":{"n":%d}}`, i))
		}
		if n := len(lateLines(t, s, "s")); n != turn.MaxLateLines {
			t.Fatalf("%d completion_late lines after %d distinct bodies, want %d", n, turn.MaxLateLines+4, turn.MaxLateLines)
		}
	})
}

// A ledger page holds at most turn.MaxPageBytes of line data, unless it is
// a single line, and paging reads every line.
func TestLedgerPageBytes(t *testing.T) {
	t.Parallel()
	eachStack(t, func(t *testing.T, s *stack) {
		// A budget large enough that the late payloads are kept whole.
		key := cancelledKey(t, s, "s", `{"limit":4194304,"max_lines":100000}`)
		const n = 3
		for i := range n {
			body := fmt.Sprintf(`{"output":"%d%s"}`, i, strings.Repeat("y", 600_000))
			if r := s.do("POST", "/v1/complete/"+key, body); r.status != 410 {
				t.Fatalf("late post: %d %.200s", r.status, r.body)
			}
		}
		after, late, pages := int64(0), 0, 0
		for {
			r := s.do("GET", "/v1/sessions/s/ledger?limit=1000&after="+strconv.FormatInt(after, 10), nil)
			var page wireLedger
			r.json(t, &page)
			if len(page.Lines) == 0 {
				break
			}
			pages++
			size := 0
			for _, l := range page.Lines {
				size += len(l.Data)
				if l.Kind == string(turn.LineCompletionLate) {
					late++
				}
			}
			if len(page.Lines) > 1 && size > turn.MaxPageBytes {
				t.Errorf("a page of %d lines holds %d bytes of line data, more than %d", len(page.Lines), size, turn.MaxPageBytes)
			}
			after = page.NextAfter
		}
		if late != n || pages < n {
			t.Fatalf("read %d late lines in %d pages, want %d in at least %d", late, pages, n, n)
		}
	})
}

// A turn's event stream carries the turn's own lines up to turn_settled,
// not the completion_late lines of deliveries that came after.
func TestTurnEventsWithoutLateLines(t *testing.T) {
	t.Parallel()
	eachStack(t, func(t *testing.T, s *stack) {
		key := cancelledKey(t, s, "s", `{}`)
		if r := s.do("POST", "/v1/complete/"+key, `{"output":"late"}`); r.status != 410 {
			t.Fatalf("late post: %d %s", r.status, r.body)
		}
		// Another turn's lines interleave with t's.
		if r := s.do("POST", "/v1/sessions/s/turns", `{"id":"u","calls":[{"id":"e","name":"echo","arguments":{"x":1}}]}`); r.status != 200 {
			t.Fatalf("post u: %d %s", r.status, r.body)
		}
		events := make(chan sseEvent, 64)
		readEvents(t, s, "/v1/sessions/s/turns/t/events", "", events)
		var kinds []string
		for ev := range events {
			kinds = append(kinds, ev.kind)
			if !strings.Contains(ev.data, `"turn_id":"t"`) {
				t.Errorf("event of another turn: %s", ev.data)
			}
		}
		got := strings.Join(kinds, " ")
		if want := "turn_received call_admitted attempt_started call_pending call_answered turn_settled"; got != want {
			t.Fatalf("events\n got %s\nwant %s", got, want)
		}
	})
}

// A turn whose lines outgrow a page's byte bound streams every line: the
// stream reads page after page up to turn_settled.
func TestTurnEventsAcrossBytePages(t *testing.T) {
	t.Parallel()
	eachStack(t, func(t *testing.T, s *stack) {
		ctx := t.Context()
		now := time.Now().UTC()
		k := turn.TurnKey{SessionID: "s", TurnID: "big"}
		_, err := s.store.ReceiveTurn(ctx, turn.Receive{
			Session: turn.Session{ID: k.SessionID, CreatedAt: now},
			Turn: turn.Turn{SessionID: k.SessionID, ID: k.TurnID, Status: turn.StatusRunning, Mode: dispatch.ModeOrdered,
				FailurePolicy: dispatch.PolicyIsolate, Hash: "h", CreatedAt: now, Calls: []turn.Call{{ID: "c", Name: "echo"}}},
			Line:       turn.Line{Kind: turn.LineTurnReceived, At: now, Data: json.RawMessage(`{}`)},
			LeaseOwner: "elsewhere", LeaseUntil: now.Add(time.Hour),
		})
		if err != nil {
			t.Fatal(err)
		}
		const n = 4
		c := turn.Commit{Key: k, LeaseOwner: "elsewhere", Status: turn.StatusCompleted, SettledAt: now}
		for i := range n {
			c.Lines = append(c.Lines, turn.Line{CallID: "c", Kind: turn.LineAttemptStarted, At: now,
				Data: json.RawMessage(fmt.Sprintf(`{"attempt":%d,"pad":"%s"}`, i+1, strings.Repeat("z", turn.MaxPageBytes/3)))})
		}
		c.Lines = append(c.Lines, turn.Line{Kind: turn.LineTurnSettled, At: now, Data: json.RawMessage(`{"status":"completed"}`)})
		if err := s.store.Commit(ctx, c); err != nil {
			t.Fatal(err)
		}
		events := make(chan sseEvent, 16)
		readEvents(t, s, "/v1/sessions/s/turns/big/events", "", events)
		var kinds []string
		for ev := range events {
			kinds = append(kinds, ev.kind)
		}
		want := "turn_received" + strings.Repeat(" attempt_started", n) + " turn_settled"
		if got := strings.Join(kinds, " "); got != want {
			t.Fatalf("events\n got %s\nwant %s", got, want)
		}
	})
}
