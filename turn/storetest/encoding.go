package storetest

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/turnd/turnd/turn"
)

// Times come back in UTC, truncated (not rounded) to the microsecond, from
// any location.
func testTimes(t *testing.T, s turn.Store) {
	loc := time.FixedZone("UTC-7", -7*60*60)
	at := time.Date(2029, 12, 31, 23, 59, 59, 999999999, loc) // rounding would carry into 2030 (UTC)
	r := receive("s1", "t1", "owner-a")
	r.Session.CreatedAt, r.Turn.CreatedAt, r.Line.At = at, at, at
	mustReceive(t, s, r)
	c := commit("s1", "t1", "owner-a")
	res := result("t1", 0)
	res.StartedAt, res.FinishedAt = at, at
	c.Results = []turn.Result{res}
	c.Status, c.SettledAt = turn.StatusCompleted, at
	must(t, "Commit", s.Commit(ctx(t), c))

	want := time.Date(2030, 1, 1, 6, 59, 59, 999999000, time.UTC)
	check := func(what string, got time.Time) {
		t.Helper()
		if !got.Equal(want) || got.Location() != time.UTC {
			t.Errorf("%s = %v (%v), want %v", what, got, got.Location(), want)
		}
	}
	sess, err := s.GetSession(ctx(t), "s1")
	must(t, "GetSession", err)
	check("session CreatedAt", sess.CreatedAt)
	tu, err := s.GetTurn(ctx(t), turn.TurnKey{SessionID: "s1", TurnID: "t1"})
	must(t, "GetTurn", err)
	check("turn CreatedAt", tu.CreatedAt)
	check("turn SettledAt", tu.SettledAt)
	check("result StartedAt", tu.Results[0].StartedAt)
	check("result FinishedAt", tu.Results[0].FinishedAt)
	lines := readLedger(t, s, "s1", 10)
	check("line At", lines[0].At)
}

// JSON values come back exactly as written: the stores neither re-encode nor
// reorder them.
func testJSONByteExact(t *testing.T, s turn.Store) {
	odd := func(s string) json.RawMessage { return json.RawMessage(s) }
	meta := odd(`{ "z": 1,  "a": [ 1.50, 2e3 ], "html": "<b>&amp;</b>", "dup": 1, "dup": 2 }`)
	args := odd("{\n  \"query\": \"a < b && c\",\n  \"n\": 10.0\n}")
	output := odd(`"text with \u00e9, \ud83d\ude00 and <tags>"`)
	data := odd(` {"spaced" : true} `)

	r := receive("s1", "t1", "owner-a")
	r.Session.Metadata = meta
	r.Turn.Calls[0].Arguments = args
	r.Line.Data = data
	mustReceive(t, s, r)
	c := commit("s1", "t1", "owner-a")
	res := result("t1", 0)
	res.Output = output
	c.Results = []turn.Result{res}
	must(t, "Commit", s.Commit(ctx(t), c))

	check := func(what string, got, want []byte) {
		t.Helper()
		if !bytes.Equal(got, want) {
			t.Errorf("%s = %q, want %q byte for byte", what, got, want)
		}
	}
	sess, err := s.GetSession(ctx(t), "s1")
	must(t, "GetSession", err)
	check("metadata", sess.Metadata, meta)
	tu, err := s.GetTurn(ctx(t), turn.TurnKey{SessionID: "s1", TurnID: "t1"})
	must(t, "GetTurn", err)
	check("call arguments", tu.Calls[0].Arguments, args)
	check("result output", tu.Results[0].Output, output)
	lines := readLedger(t, s, "s1", 10)
	check("line data", lines[0].Data, data)

	// Invalid JSON is refused, not stored.
	bad := receive("s1", "t2", "owner-a")
	bad.Line.Data = odd(`{"unterminated": `)
	if _, err := s.ReceiveTurn(ctx(t), bad); err == nil {
		t.Error("ReceiveTurn stored invalid line data")
	}
}
