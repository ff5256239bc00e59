package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/turnd/turnd/turn"
)

// withCalls returns record(sid, tid, len(ids)) with its calls (and their
// results and lines) renamed to ids.
func withCalls(sid, tid string, ids ...string) turn.Record {
	r := record(sid, tid, len(ids))
	for i, id := range ids {
		r.Turn.Calls[i].ID = id
		r.Results[i].CallID = id
		r.Lines[1+2*i].CallID, r.Lines[2+2*i].CallID = id, id
	}
	return r
}

// testRecordTurnCallsAnswered: RecordTurn refuses, writing nothing, a turn
// one of whose call ids has an answer in the session (Answered's
// predicate: final, not a replay); a taken turn id and a missing session
// are reported before it.
func testRecordTurnCallsAnswered(t *testing.T, s turn.Store) {
	must(t, "CreateSession s1", s.CreateSession(ctx(t), session("s1")))
	must(t, "CreateSession s2", s.CreateSession(ctx(t), session("s2")))
	// t0 (received, committed): x answered, y only started, z a replay,
	// p pending. t1 (recorded whole): a and b answered.
	res := func(idx int, id string, status turn.CallStatus) turn.Result {
		r := result("t0", idx)
		r.CallID, r.Status = id, status
		return r
	}
	x, y, z, p := res(0, "x", turn.CallOK), res(1, "y", turn.CallStarted), res(2, "z", turn.CallOK), res(3, "p", turn.CallPending)
	y.FinishedAt, z.ReplayedFrom = time.Time{}, "t-1"
	receiveAndCommit(t, s, "s1", "t0", x, y, z, p)
	must(t, "RecordTurn t1", s.RecordTurn(ctx(t), withCalls("s1", "t1", "a", "b")))
	before := readLedger(t, s, "s1", 100)

	for _, tc := range []struct {
		tid string
		ids []string
	}{
		{"t2", []string{"new", "a"}},      // answered by a recorded turn
		{"t3", []string{"x"}},             // answered by a committed one
		{"t4", []string{"p", "q"}},        // pending counts as answered (the ordinary path refuses it)
		{"t5", []string{"b", "b", "new"}}, // a call id twice in the turn
	} {
		r := withCalls("s1", tc.tid, tc.ids...)
		r.Webhook = hook("s1", tc.tid, base)
		isErr(t, "RecordTurn "+tc.tid, s.RecordTurn(ctx(t), r), turn.ErrCallsAnswered)
		if _, err := s.GetTurn(ctx(t), turn.TurnKey{SessionID: "s1", TurnID: tc.tid}); !errors.Is(err, turn.ErrNotFound) {
			t.Errorf("GetTurn %s after a refused record: %v, want ErrNotFound", tc.tid, err)
		}
		same(t, "webhooks of "+tc.tid, turnWebhooks(t, s, "s1", tc.tid), []turn.Webhook{})
	}
	same(t, "ledger after refused records", readLedger(t, s, "s1", 100), before)
	if got, err := s.Answered(ctx(t), "s1", []string{"new", "q"}); err != nil || len(got) != 0 {
		t.Errorf("Answered of the refused turns' new calls = %v, %v; want none", got, err)
	}

	// Precedence: a taken turn id (whose calls are its own answers) is
	// ErrTurnExists; a missing session, ErrNotFound.
	isErr(t, "RecordTurn of taken t1", s.RecordTurn(ctx(t), withCalls("s1", "t1", "a", "b")), turn.ErrTurnExists)
	isErr(t, "RecordTurn of taken t0", s.RecordTurn(ctx(t), withCalls("s1", "t0", "x")), turn.ErrTurnExists)
	isErr(t, "RecordTurn without a session", s.RecordTurn(ctx(t), withCalls("s9", "t1", "a")), turn.ErrNotFound)

	// Not answers: a started call, a replay, another session's answer.
	must(t, "RecordTurn t6 of y and z", s.RecordTurn(ctx(t), withCalls("s1", "t6", "y", "z")))
	must(t, "RecordTurn s2/t2 of a and x", s.RecordTurn(ctx(t), withCalls("s2", "t2", "a", "x")))
	got, err := s.Answered(ctx(t), "s1", []string{"y", "z"})
	must(t, "Answered of y and z", err)
	if len(got) != 2 || got["y"].ReplayedFrom != "t6" || got["z"].ReplayedFrom != "t6" {
		t.Errorf("Answered of y and z = %+v, want both from t6", got)
	}
	// And now they are.
	isErr(t, "RecordTurn t7 of z", s.RecordTurn(ctx(t), withCalls("s1", "t7", "z")), turn.ErrCallsAnswered)
	checkSeqs(t, readLedger(t, s, "s1", 100))
}

// testRecordTurnCallsAnsweredConcurrent records, at once, turns of several
// sessions of which every other one repeats an answered call id: each
// refused turn writes nothing and the others are recorded whole, whatever
// statement or transaction they share.
func testRecordTurnCallsAnsweredConcurrent(t *testing.T, s turn.Store) {
	const sessions, rounds = 8, 4
	for i := range sessions {
		sid := fmt.Sprintf("s%d", i)
		must(t, "CreateSession", s.CreateSession(ctx(t), session(sid)))
		must(t, "RecordTurn first", s.RecordTurn(ctx(t), withCalls(sid, "first", "old")))
	}
	type outcome struct {
		key     turn.TurnKey
		repeats bool
		err     error
	}
	outcomes := make(chan outcome, sessions*rounds)
	together(sessions*rounds, func(k int) {
		i, j := k/rounds, k%rounds
		sid, tid := fmt.Sprintf("s%d", i), fmt.Sprintf("t%d", j)
		repeats := (i+j)%2 == 0
		ids := []string{tid + "-new"}
		if repeats {
			ids = append(ids, "old")
		}
		outcomes <- outcome{turn.TurnKey{SessionID: sid, TurnID: tid}, repeats, s.RecordTurn(ctx(t), withCalls(sid, tid, ids...))}
	})
	close(outcomes)
	recorded := map[string]int{}
	for o := range outcomes {
		_, gerr := s.GetTurn(ctx(t), o.key)
		switch {
		case o.repeats:
			isErr(t, fmt.Sprintf("RecordTurn %v", o.key), o.err, turn.ErrCallsAnswered)
			if !errors.Is(gerr, turn.ErrNotFound) {
				t.Errorf("GetTurn %v after a refused record: %v", o.key, gerr)
			}
		default:
			must(t, fmt.Sprintf("RecordTurn %v", o.key), o.err)
			must(t, fmt.Sprintf("GetTurn %v", o.key), gerr)
			recorded[o.key.SessionID]++
		}
	}
	for i := range sessions {
		sid := fmt.Sprintf("s%d", i)
		lines := readLedger(t, s, sid, 100)
		checkSeqs(t, lines)
		// first (1 call: 4 lines) and the turns of this session not
		// repeating old (1 call each: 4 lines).
		if want := 4 * (1 + recorded[sid]); len(lines) != want || recorded[sid] != rounds/2 {
			t.Errorf("%s: %d lines for %d recorded turns, want %d lines for %d", sid, len(lines), recorded[sid], want, rounds/2)
		}
	}
}
