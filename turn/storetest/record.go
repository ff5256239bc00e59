package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/turnd/turnd/dispatch"
	"github.com/turnd/turnd/turn"
)

// record describes turn tid of session sid, of n read calls, run to
// completion before anything of it was stored: turn_received, then per call
// call_admitted and call_answered, then turn_settled; one ok result per call.
func record(sid, tid string, n int) turn.Record {
	r := turn.Record{Turn: turn.Turn{
		SessionID: sid, ID: tid, Status: turn.StatusCompleted,
		Mode: dispatch.ModeConcurrent, FailurePolicy: dispatch.PolicyIsolate,
		Hash: "hash-" + tid, CreatedAt: base, SettledAt: base.Add(3 * time.Second),
	}}
	r.Lines = append(r.Lines, line(tid, "", turn.LineTurnReceived, fmt.Sprintf(`{"calls":%d}`, n)))
	for i := range n {
		callID := fmt.Sprintf("%s-c%d", tid, i)
		r.Turn.Calls = append(r.Turn.Calls, turn.Call{ID: callID, Name: "read_file", Arguments: json.RawMessage(`{"path": "x"}`)})
		r.Lines = append(r.Lines,
			line(tid, callID, turn.LineCallAdmitted, fmt.Sprintf(`{"index":%d}`, i)),
			line(tid, callID, turn.LineCallAnswered, `{"status":"ok"}`))
		r.Results = append(r.Results, result(tid, i))
	}
	r.Lines = append(r.Lines, line(tid, "", turn.LineTurnSettled, `{"status":"completed"}`))
	return r
}

func testLookupTurn(t *testing.T, s turn.Store) {
	got, err := s.LookupTurn(ctx(t), "s1", "t1", []string{"x"})
	must(t, "LookupTurn of an unknown session", err)
	same(t, "lookup of an unknown session", got, turn.Lookup{Answered: map[string]turn.Result{}})

	sess := session("s1")
	must(t, "CreateSession", s.CreateSession(ctx(t), sess))
	got, err = s.LookupTurn(ctx(t), "s1", "t1", nil)
	must(t, "LookupTurn", err)
	same(t, "lookup of a new session", got, turn.Lookup{Session: wantSession(sess), SessionFound: true, Answered: map[string]turn.Result{}})

	// t1 answers x and only starts y; t2 answers x again, later, and z as a
	// replay (committed: RecordTurn refuses a turn with an answered call);
	// another session answers w.
	x1, y1 := result("t1", 0), result("t1", 1)
	x1.CallID, y1.CallID, y1.Status = "x", "y", turn.CallStarted
	receiveAndCommit(t, s, "s1", "t1", x1, y1)
	x2, z2 := result("t2", 0), result("t2", 1)
	x2.CallID, x2.FinishedAt = "x", base.Add(time.Hour)
	z2.CallID, z2.ReplayedFrom = "z", "t0"
	receiveAndCommit(t, s, "s1", "t2", x2, z2)
	w := withCalls("s2", "t3", "w")
	must(t, "CreateSession s2", s.CreateSession(ctx(t), session("s2")))
	must(t, "RecordTurn s2/t3", s.RecordTurn(ctx(t), w))

	ids := []string{"x", "y", "z", "w", "unknown"}
	want, err := s.Answered(ctx(t), "s1", ids)
	must(t, "Answered", err)
	if len(want) != 1 || want["x"].ReplayedFrom != "t1" {
		t.Fatalf("Answered = %+v, want x from t1 only", want)
	}
	for _, tc := range []struct {
		tid   string
		found bool
	}{{"t1", true}, {"t2", true}, {"t9", false}} {
		got, err = s.LookupTurn(ctx(t), "s1", tc.tid, ids)
		must(t, "LookupTurn "+tc.tid, err)
		same(t, "lookup of "+tc.tid, got, turn.Lookup{Session: wantSession(sess), SessionFound: true, TurnFound: tc.found, Answered: want})
	}
	// A turn id of another session is not this session's.
	got, err = s.LookupTurn(ctx(t), "s2", "t1", []string{"x", "w"})
	must(t, "LookupTurn s2", err)
	if got.TurnFound || len(got.Answered) != 1 || got.Answered["w"].ReplayedFrom != "t3" {
		t.Errorf("lookup in s2 = %+v, want t1 unknown and only w answered (by t3)", got)
	}
}

func testRecordTurn(t *testing.T, s turn.Store) {
	must(t, "CreateSession", s.CreateSession(ctx(t), session("s1")))
	first := mustReceive(t, s, receive("s1", "t0", "owner-a"))
	rec := record("s1", "t1", 3)
	rec.Results[2].Status, rec.Results[2].Output = turn.CallFailed, nil
	rec.Results[2].Error = &turn.CallError{Code: "boom", Message: "it broke"}
	rec.Results[1].Truncated, rec.Results[1].OutputID = true, "out-1"
	rec.Outputs = []turn.Output{{ID: "out-1", CallID: "t1-c1", ContentType: "text/plain", Data: []byte("full"), CreatedAt: base, ExpiresAt: base.Add(time.Hour)}}
	rec.Webhook = hook("s1", "t1", base)
	must(t, "RecordTurn", s.RecordTurn(ctx(t), rec))

	want := rec.Turn
	want.Results = rec.Results
	same(t, "recorded turn", gotTurn(getTurn(t, s, "s1", "t1")), wantTurn(want))
	lines := readLedger(t, s, "s1", 4)
	checkSeqs(t, lines)
	wantLines := []turn.Line{}
	for i, l := range rec.Lines {
		wantLines = append(wantLines, wantLine(l, first+1+int64(i), "s1"))
	}
	same(t, "recorded lines", lines[first:], wantLines)
	out, err := s.GetOutput(ctx(t), "s1", "out-1")
	must(t, "GetOutput", err)
	wantOut := rec.Outputs[0]
	wantOut.SessionID, wantOut.TurnID = "s1", "t1"
	same(t, "kept output", gotOutput(out), wantOutput(wantOut))
	same(t, "webhooks of t1", turnWebhooks(t, s, "s1", "t1"), []turn.Webhook{stored(rec.Webhook, "s1", "t1")})

	// Recorded without a lease: nobody claims it, and its answers count.
	keys, err := claimKeys(s.ClaimTurns(ctx(t), "owner-b", base.Add(24*time.Hour), base.Add(25*time.Hour), 0, 10))
	must(t, "ClaimTurns", err)
	if len(keys) != 1 || keys[0].TurnID != "t0" {
		t.Errorf("ClaimTurns took %v, want only the running t0", keys)
	}
	answered, err := s.Answered(ctx(t), "s1", []string{"t1-c0", "t1-c2"})
	must(t, "Answered", err)
	if len(answered) != 2 || answered["t1-c2"].Error == nil || answered["t1-c0"].ReplayedFrom != "t1" {
		t.Errorf("Answered after RecordTurn = %+v", answered)
	}

	// Lines after it continue the sequence.
	c := commit("s1", "t0", "owner-b")
	c.LeaseEpoch = 1 // owner-b's claim
	c.Lines = []turn.Line{line("t0", "", turn.LineTurnSettled, "")}
	must(t, "Commit t0", s.Commit(ctx(t), c))
	checkSeqs(t, readLedger(t, s, "s1", 100))
}

func testRecordTurnRefused(t *testing.T, s turn.Store) {
	// No session: nothing is written.
	isErr(t, "RecordTurn without a session", s.RecordTurn(ctx(t), record("s1", "t1", 1)), turn.ErrNotFound)
	if _, err := s.GetTurn(ctx(t), turn.TurnKey{SessionID: "s1", TurnID: "t1"}); !errors.Is(err, turn.ErrNotFound) {
		t.Errorf("GetTurn after a refused RecordTurn: %v, want ErrNotFound", err)
	}

	must(t, "CreateSession", s.CreateSession(ctx(t), session("s1")))
	mustReceive(t, s, receive("s1", "t1", "owner-a"))
	must(t, "RecordTurn t2", s.RecordTurn(ctx(t), record("s1", "t2", 2)))
	before := readLedger(t, s, "s1", 100)
	// A turn id taken by a received turn or a recorded one: nothing written.
	for _, tid := range []string{"t1", "t2"} {
		again := record("s1", tid, 1)
		again.Webhook = hook("s1", tid, base)
		isErr(t, "RecordTurn of taken "+tid, s.RecordTurn(ctx(t), again), turn.ErrTurnExists)
		same(t, "webhooks of "+tid, turnWebhooks(t, s, "s1", tid), []turn.Webhook{})
	}
	same(t, "ledger after refused records", readLedger(t, s, "s1", 100), before)
	if tu := getTurn(t, s, "s1", "t1"); tu.Status != turn.StatusRunning || len(tu.Results) != 0 {
		t.Errorf("t1 after a refused RecordTurn: %s with %d results", tu.Status, len(tu.Results))
	}

	// Bad records are refused before anything is written.
	bad := map[string]func(r *turn.Record){
		"a running status":            func(r *turn.Record) { r.Turn.Status = turn.StatusRunning },
		"a waiting status":            func(r *turn.Record) { r.Turn.Status = turn.StatusWaiting },
		"no settlement time":          func(r *turn.Record) { r.Turn.SettledAt = time.Time{} },
		"no lines":                    func(r *turn.Record) { r.Lines = nil },
		"no turn_received first":      func(r *turn.Record) { r.Lines = r.Lines[1:] },
		"no turn id":                  func(r *turn.Record) { r.Turn.ID = "" },
		"invalid line data":           func(r *turn.Record) { r.Lines[1].Data = json.RawMessage(`{"a":`) },
		"invalid output":              func(r *turn.Record) { r.Results[0].Output = json.RawMessage(`nope`) },
		"invalid arguments":           func(r *turn.Record) { r.Turn.Calls[0].Arguments = json.RawMessage(`[`) },
		"a result of another call id": func(r *turn.Record) { r.Results[1].CallID = "elsewhere" },
		"a result past the calls":     func(r *turn.Record) { r.Results[1].Index = len(r.Turn.Calls) },
		"a result of index -1":        func(r *turn.Record) { r.Results[0].Index = -1 },
		"a line of another session": func(r *turn.Record) {
			r.Lines[1].SessionID = "s2"
		},
		"an output without id": func(r *turn.Record) {
			r.Outputs = []turn.Output{{CallID: "c", Data: []byte("x"), CreatedAt: base}}
		},
		"a webhook of another turn": func(r *turn.Record) {
			r.Webhook = hook("s1", "t9", base)
			r.Webhook.TurnID = "t9"
		},
	}
	for what, mutate := range bad {
		r := record("s1", "t3", 2)
		mutate(&r)
		err := s.RecordTurn(ctx(t), r)
		if err == nil || errors.Is(err, turn.ErrTurnExists) || errors.Is(err, turn.ErrNotFound) {
			t.Errorf("RecordTurn with %s: %v, want a refusal", what, err)
		}
	}
	if _, err := s.GetTurn(ctx(t), turn.TurnKey{SessionID: "s1", TurnID: "t3"}); !errors.Is(err, turn.ErrNotFound) {
		t.Errorf("GetTurn after bad records: %v, want ErrNotFound", err)
	}
	same(t, "ledger after bad records", readLedger(t, s, "s1", 100), before)
}

// testRecordTurnConcurrent records many turns at once, in few sessions and
// with every turn id posted twice: each id is recorded once, the other
// call gets ErrTurnExists, and every session's ledger is gap-free with each
// turn's lines together and in order.
func testRecordTurnConcurrent(t *testing.T, s turn.Store) {
	const sessions, turns = 3, 12
	for i := range sessions {
		must(t, "CreateSession", s.CreateSession(ctx(t), session(fmt.Sprintf("s%d", i))))
	}
	type outcome struct {
		key turn.TurnKey
		err error
	}
	outcomes := make(chan outcome, 2*sessions*turns)
	together(2*sessions*turns, func(k int) {
		i, j := k/(2*turns), k/2%turns // each turn of each session twice
		sid, tid := fmt.Sprintf("s%d", i), fmt.Sprintf("t%d", j)
		outcomes <- outcome{turn.TurnKey{SessionID: sid, TurnID: tid}, s.RecordTurn(ctx(t), record(sid, tid, 1+j%3))}
	})
	close(outcomes)
	recorded := map[turn.TurnKey]int{}
	for o := range outcomes {
		switch {
		case o.err == nil:
			recorded[o.key]++
		case errors.Is(o.err, turn.ErrTurnExists):
		default:
			t.Errorf("RecordTurn %v: %v", o.key, o.err)
		}
	}
	if len(recorded) != sessions*turns {
		t.Errorf("%d turns recorded, want %d", len(recorded), sessions*turns)
	}
	for k, n := range recorded {
		if n != 1 {
			t.Errorf("turn %v recorded %d times", k, n)
		}
	}
	for i := range sessions {
		sid := fmt.Sprintf("s%d", i)
		lines := readLedger(t, s, sid, 7)
		checkSeqs(t, lines)
		for k := 0; k < len(lines); {
			tid := lines[k].TurnID
			var j int
			if _, err := fmt.Sscanf(tid, "t%d", &j); err != nil {
				t.Fatalf("line %d of %s: turn %q", k, sid, tid)
			}
			want := record(sid, tid, 1+j%3).Lines
			if k+len(want) > len(lines) {
				t.Fatalf("%s: turn %s has %d lines left, want %d", sid, tid, len(lines)-k, len(want))
			}
			for n, l := range want {
				got := lines[k+n]
				if got.TurnID != tid || got.Kind != l.Kind || got.CallID != l.CallID {
					t.Fatalf("%s seq %d: %s/%s/%s, want %s/%s/%s (a turn's lines together, in order)",
						sid, got.Seq, got.TurnID, got.Kind, got.CallID, tid, l.Kind, l.CallID)
				}
			}
			k += len(want)
		}
	}
}

// WholeTurn is a turn tid of session sid with n read calls, recorded whole
// (see record): the fixture of the store benchmarks.
func WholeTurn(sid, tid string, n int) turn.Record { return record(sid, tid, n) }

// WholeTurnWithCalls is WholeTurn with one call per id, named ids (a
// call id answered elsewhere, say).
func WholeTurnWithCalls(sid, tid string, ids ...string) turn.Record {
	return withCalls(sid, tid, ids...)
}
