package storetest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turnd/turnd/dispatch"
	"github.com/turnd/turnd/turn"
)

// keyHash is the key hash of call idx of turn sid/tid in these tests.
func keyHash(sid, tid string, idx int) [32]byte {
	return sha256.Sum256(fmt.Appendf(nil, "key/%s/%s/%d", sid, tid, idx))
}

// fingerprint is how the stores name a completion in their errors (as
// completion.Hash.Fingerprint does).
func fingerprint(h [32]byte) string { return hex.EncodeToString(h[:4]) }

// receiveCalls describes a new running turn like receive, with n calls.
func receiveCalls(sid, tid, owner string, n int) turn.Receive {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-c%d", tid, i)
	}
	r := receiveIDs(sid, tid, owner, ids...)
	for i := range r.Turn.Calls {
		r.Turn.Calls[i].Name = "approve"
	}
	return r
}

// completion is the issued completion of call idx of turn sid/tid.
func completion(sid, tid string, idx int) turn.Completion {
	return turn.Completion{
		KeyHash:   keyHash(sid, tid, idx),
		SessionID: sid,
		TurnID:    tid,
		CallIndex: idx,
		CallID:    fmt.Sprintf("%s-c%d", tid, idx),
		CallName:  "approve",
		Status:    turn.CompletionIssued,
		CreatedAt: base,
	}
}

// issue records the completion of call idx of turn sid/tid and returns it.
func issue(t *testing.T, s turn.Store, sid, tid string, idx int) turn.Completion {
	t.Helper()
	c := completion(sid, tid, idx)
	must(t, fmt.Sprintf("IssueCompletion %s/%s #%d", sid, tid, idx), s.IssueCompletion(ctx(t), c))
	return c
}

// parkOf returns a park of c with a deadline in an hour and a 30s
// heartbeat clock.
func parkOf(c turn.Completion) turn.Park {
	return turn.Park{
		KeyHash:           c.KeyHash,
		Deadline:          base.Add(time.Hour),
		HeartbeatTimeout:  30 * time.Second,
		HeartbeatDeadline: base.Add(30 * time.Second),
		OnTimeout:         "error_as_result",
		OnCancel:          "cancel_external_work",
		CancelURL:         "https://tool.test/cancel/" + c.CallID,
	}
}

// parked is what the store holds for c after p: an issued completion
// becomes pending, an early one stays early; both take p's clocks and
// options.
func parked(c turn.Completion, p turn.Park) turn.Completion {
	if c.Status == turn.CompletionIssued {
		c.Status = turn.CompletionPending
	}
	c.Deadline, c.HeartbeatTimeout, c.HeartbeatDeadline = p.Deadline, p.HeartbeatTimeout, p.HeartbeatDeadline
	c.OnTimeout, c.OnCancel, c.CancelURL = p.OnTimeout, p.OnCancel, p.CancelURL
	return c
}

func wantCompletion(c turn.Completion) turn.Completion {
	c.Deadline, c.HeartbeatDeadline = normTime(c.Deadline), normTime(c.HeartbeatDeadline)
	c.CreatedAt, c.ResolvedAt = normTime(c.CreatedAt), normTime(c.ResolvedAt)
	c.Payload = normJSON(c.Payload)
	return c
}

func getCompletion(t *testing.T, s turn.Store, h [32]byte) turn.Completion {
	t.Helper()
	c, err := s.GetCompletion(ctx(t), "s1", h)
	must(t, "GetCompletion "+fingerprint(h), err)
	return c
}

// checkCompletion fails unless the store holds want (normalised).
func checkCompletion(t *testing.T, s turn.Store, what string, want turn.Completion) {
	t.Helper()
	same(t, what, getCompletion(t, s, want.KeyHash), wantCompletion(want))
}

// pendingResult is the result of call idx of a turn parked on its key.
func pendingResult(tid string, idx int) turn.Result {
	r := result(tid, idx)
	r.CallID, r.Name = fmt.Sprintf("%s-c%d", tid, idx), "approve"
	r.Effect, r.Status, r.Output = dispatch.EffectWrite, turn.CallPending, nil
	r.OriginalBytes, r.OriginalLines, r.FinishedAt = 0, 0, time.Time{}
	return r
}

// answer is the result of call idx once delivered.
func answer(tid string, idx int, output string) turn.Result {
	r := pendingResult(tid, idx)
	r.Status, r.Output, r.FinishedAt = turn.CallOK, json.RawMessage(output), base.Add(time.Minute)
	return r
}

// parkCommit is the commit that parks calls of turn sid/tid with their
// call_pending lines and pending results, setting status (empty: the turn
// keeps running).
func parkCommit(sid, tid, owner string, status turn.Status, cs ...turn.Completion) turn.Commit {
	c := commit(sid, tid, owner)
	c.Status = status
	for _, x := range cs {
		c.Parks = append(c.Parks, parkOf(x))
		c.Lines = append(c.Lines, line(tid, x.CallID, turn.LineCallPending, fmt.Sprintf(`{"idx":%d}`, x.CallIndex)))
		c.Results = append(c.Results, pendingResult(tid, x.CallIndex))
	}
	return c
}

// waitingTurn records turn sid/tid with n calls, issues a key for each and
// commits the turn waiting with every call parked. It returns the
// completions as stored (pending).
func waitingTurn(t *testing.T, s turn.Store, sid, tid string, n int) []turn.Completion {
	t.Helper()
	mustReceive(t, s, receiveCalls(sid, tid, "owner-a", n))
	var cs []turn.Completion
	for i := range n {
		cs = append(cs, issue(t, s, sid, tid, i))
	}
	must(t, "Commit waiting "+tid, s.Commit(ctx(t), parkCommit(sid, tid, "owner-a", turn.StatusWaiting, cs...)))
	for i, c := range cs {
		cs[i] = parked(c, parkOf(c))
	}
	return cs
}

// resolution resolves c (expected pending) as completed with output.
func resolution(c turn.Completion, output string) turn.Resolution {
	payload := json.RawMessage(`{"output":` + output + `}`)
	return turn.Resolution{
		KeyHash:     c.KeyHash,
		Expect:      turn.CompletionPending,
		Status:      turn.CompletionCompleted,
		Payload:     payload,
		PayloadHash: sha256.Sum256(payload),
		Result:      answer(c.TurnID, c.CallIndex, output),
	}
}

// batch resolves items of turn sid/tid with one call_answered line per item
// and, should the turn settle, one turn_settled line.
func batch(sid, tid string, now time.Time, items ...turn.Resolution) turn.ResolveBatch {
	b := turn.ResolveBatch{
		Key:          turn.TurnKey{SessionID: sid, TurnID: tid},
		Items:        items,
		SettleStatus: turn.StatusCompleted,
		SettleLines:  []turn.Line{line(tid, "", turn.LineTurnSettled, `{"status":"completed"}`)},
		Now:          now,
	}
	for _, it := range items {
		b.Lines = append(b.Lines, line(tid, it.Result.CallID, turn.LineCallAnswered, fmt.Sprintf(`{"status":%q}`, it.Status)))
	}
	return b
}

// resolved is what the store holds for c after item of a batch at now.
func resolved(c turn.Completion, item turn.Resolution, now time.Time) turn.Completion {
	c.Status, c.Payload, c.PayloadHash, c.ResolvedAt = item.Status, item.Payload, item.PayloadHash, now
	return c
}

func getTurn(t *testing.T, s turn.Store, sid, tid string) turn.Turn {
	t.Helper()
	tu, err := s.GetTurn(ctx(t), turn.TurnKey{SessionID: sid, TurnID: tid})
	must(t, "GetTurn "+sid+"/"+tid, err)
	return tu
}

func testCompletionIssue(t *testing.T, s turn.Store) {
	mustReceive(t, s, receiveCalls("s1", "t1", "owner-a", 2))
	c1 := issue(t, s, "s1", "t1", 1)
	c0 := issue(t, s, "s1", "t1", 0)
	checkCompletion(t, s, "issued completion", c0)

	// Issuing again changes nothing, whatever it carries.
	again := c0
	again.CallName, again.Status, again.CreatedAt = "other", turn.CompletionEarly, base.Add(time.Hour)
	must(t, "IssueCompletion again", s.IssueCompletion(ctx(t), again))
	checkCompletion(t, s, "completion issued twice", c0)

	cs, err := s.TurnCompletions(ctx(t), turn.TurnKey{SessionID: "s1", TurnID: "t1"})
	must(t, "TurnCompletions", err)
	same(t, "turn completions (in call order)", cs, []turn.Completion{wantCompletion(c0), wantCompletion(c1)})
	cs, err = s.TurnCompletions(ctx(t), turn.TurnKey{SessionID: "s1", TurnID: "nope"})
	must(t, "TurnCompletions of an unknown turn", err)
	if cs == nil || len(cs) != 0 {
		t.Errorf("TurnCompletions of an unknown turn = %#v, want an empty slice", cs)
	}

	_, err = s.GetCompletion(ctx(t), "s1", keyHash("s1", "t1", 9))
	isErr(t, "GetCompletion of an unknown key", err, turn.ErrNotFound)
	err = s.IssueCompletion(ctx(t), completion("s1", "nope", 0))
	isErr(t, "IssueCompletion for an unknown turn", err, turn.ErrNotFound)
}

func testCompletionPark(t *testing.T, s turn.Store) {
	mustReceive(t, s, receiveCalls("s1", "t1", "owner-a", 4))
	mustReceive(t, s, receiveCalls("s1", "t2", "owner-a", 1))
	a, b, e, r := issue(t, s, "s1", "t1", 0), issue(t, s, "s1", "t1", 1), issue(t, s, "s1", "t1", 2), issue(t, s, "s1", "t1", 3)
	x := issue(t, s, "s1", "t2", 0) // another turn's
	payload := json.RawMessage(`{"output":"early"}`)
	early, err := s.DeliverEarly(ctx(t), e.SessionID, e.KeyHash, payload, sha256.Sum256(payload), base.Add(time.Second))
	must(t, "DeliverEarly", err)

	// A lost lease parks nothing.
	lost := parkCommit("s1", "t1", "owner-b", "", a, e)
	isErr(t, "Commit by another owner", s.Commit(ctx(t), lost), turn.ErrLeaseLost)
	checkCompletion(t, s, "a after a lost commit", a)
	checkCompletion(t, s, "e after a lost commit", early)

	c := parkCommit("s1", "t1", "owner-a", "", a, e, r)
	c.Parks = append(c.Parks, parkOf(x)) // not this turn's: ignored
	must(t, "Commit with parks", s.Commit(ctx(t), c))
	checkCompletion(t, s, "issued → pending", parked(a, parkOf(a)))
	checkCompletion(t, s, "early stays early, with its deadline", parked(early, parkOf(e)))
	checkCompletion(t, s, "not parked", b)
	checkCompletion(t, s, "another turn's key", x)

	// The turn is still running: resolving r does not settle it.
	rr := resolution(r, `"done"`)
	settled, err := s.Resolve(ctx(t), batch("s1", "t1", base.Add(time.Minute), rr))
	must(t, "Resolve r", err)
	if settled {
		t.Error("Resolve settled a running turn")
	}
	if got := getTurn(t, s, "s1", "t1").Status; got != turn.StatusRunning {
		t.Errorf("turn status %s after Resolve, want running", got)
	}

	// Parking again moves neither a pending nor a resolved completion.
	again := commit("s1", "t1", "owner-a")
	for _, k := range []turn.Completion{a, r} {
		p := parkOf(k)
		p.Deadline, p.OnTimeout = base.Add(2*time.Hour), "fail_turn"
		again.Parks = append(again.Parks, p)
	}
	must(t, "Commit parking again", s.Commit(ctx(t), again))
	checkCompletion(t, s, "pending parked again", parked(a, parkOf(a)))
	checkCompletion(t, s, "resolved parked again", resolved(parked(r, parkOf(r)), rr, base.Add(time.Minute)))
}

func testCompletionDeliverEarly(t *testing.T, s turn.Store) {
	mustReceive(t, s, receiveCalls("s1", "t1", "owner-a", 2))
	a, b := issue(t, s, "s1", "t1", 0), issue(t, s, "s1", "t1", 1)

	p1 := json.RawMessage(` {"output": [1, 2.50]} `)
	h1 := sha256.Sum256(p1)
	at := base.Add(time.Second)
	got, err := s.DeliverEarly(ctx(t), a.SessionID, a.KeyHash, p1, h1, at)
	must(t, "DeliverEarly", err)
	want := a
	want.Status, want.Payload, want.PayloadHash, want.ResolvedAt = turn.CompletionEarly, p1, h1, at
	same(t, "early completion", got, wantCompletion(want))
	checkCompletion(t, s, "stored early completion", want)

	// A second delivery changes nothing and returns the completion as it is.
	p2 := json.RawMessage(`{"output":2}`)
	got, err = s.DeliverEarly(ctx(t), a.SessionID, a.KeyHash, p2, sha256.Sum256(p2), base.Add(2*time.Second))
	isErr(t, "DeliverEarly to an early completion", err, turn.ErrCompletionState)
	same(t, "early completion after a second delivery", got, wantCompletion(want))

	// Pending, then resolved: no early delivery.
	must(t, "Commit parking b", s.Commit(ctx(t), parkCommit("s1", "t1", "owner-a", "", b)))
	got, err = s.DeliverEarly(ctx(t), b.SessionID, b.KeyHash, p2, sha256.Sum256(p2), base.Add(2*time.Second))
	isErr(t, "DeliverEarly to a pending completion", err, turn.ErrCompletionState)
	same(t, "pending completion", got, wantCompletion(parked(b, parkOf(b))))
	item := resolution(parked(b, parkOf(b)), `"ok"`)
	_, err = s.Resolve(ctx(t), batch("s1", "t1", base.Add(time.Minute), item))
	must(t, "Resolve b", err)
	got, err = s.DeliverEarly(ctx(t), b.SessionID, b.KeyHash, p2, sha256.Sum256(p2), base.Add(2*time.Minute))
	isErr(t, "DeliverEarly to a completed completion", err, turn.ErrCompletionState)
	same(t, "completed completion", got.Status, turn.CompletionCompleted)

	_, err = s.DeliverEarly(ctx(t), "s1", keyHash("s1", "t1", 9), p2, sha256.Sum256(p2), base)
	isErr(t, "DeliverEarly to an unknown key", err, turn.ErrNotFound)
	if _, err := s.DeliverEarly(ctx(t), a.SessionID, a.KeyHash, json.RawMessage(`{"bad": `), [32]byte{}, base); err == nil {
		t.Error("DeliverEarly stored invalid JSON")
	}
}

// Resolving the last open completion of a waiting turn settles it; the
// lines of Commit, Resolve and RecordLate share one gap-free sequence.
func testResolveSettles(t *testing.T, s turn.Store) {
	r := receiveCalls("s1", "t1", "owner-a", 2)
	mustReceive(t, s, r)
	a, b := issue(t, s, "s1", "t1", 0), issue(t, s, "s1", "t1", 1)
	park := parkCommit("s1", "t1", "owner-a", turn.StatusWaiting, a, b)
	must(t, "Commit waiting", s.Commit(ctx(t), park))
	a, b = parked(a, parkOf(a)), parked(b, parkOf(b))
	wantLines := []turn.Line{wantLine(r.Line, 1, "s1")}
	for _, l := range park.Lines {
		wantLines = append(wantLines, wantLine(l, int64(len(wantLines)+1), "s1"))
	}

	// a completes with a kept output: the turn still waits for b.
	now1 := base.Add(time.Minute)
	ia := resolution(a, `"approved"`)
	ia.Outputs = []turn.Output{{ID: "out-a", CallID: a.CallID, ContentType: "application/json", Data: []byte(`"approved"`), CreatedAt: now1}}
	ba := batch("s1", "t1", now1, ia)
	settled, err := s.Resolve(ctx(t), ba)
	must(t, "Resolve a", err)
	if settled {
		t.Error("Resolve a settled the turn; b is still pending")
	}
	wantLines = append(wantLines, wantLine(ba.Lines[0], int64(len(wantLines)+1), "s1"))
	checkCompletion(t, s, "a resolved", resolved(a, ia, now1))
	checkCompletion(t, s, "b still pending", b)
	tu := getTurn(t, s, "s1", "t1")
	if tu.Status != turn.StatusWaiting || !tu.SettledAt.IsZero() {
		t.Errorf("turn %s settled at %v, want waiting", tu.Status, tu.SettledAt)
	}
	same(t, "results after a", tu.Results, []turn.Result{wantResult(ia.Result), wantResult(pendingResult("t1", 1))})
	out, err := s.GetOutput(ctx(t), "s1", "out-a")
	must(t, "GetOutput out-a", err)
	same(t, "kept output", out.TurnID+" "+string(out.Data), `t1 "approved"`)

	late := turn.Late{KeyHash: a.KeyHash, PayloadHash: sha256.Sum256([]byte("late")), Max: turn.MaxLateLines,
		Line: line("t1", a.CallID, "completion_late", `{"status":"timed_out"}`)}
	outcome, err := s.RecordLate(ctx(t), turn.TurnKey{SessionID: "s1", TurnID: "t1"}, late)
	must(t, "RecordLate", err)
	same(t, "RecordLate's outcome", outcome, turn.LateRecorded)
	wantLines = append(wantLines, wantLine(late.Line, int64(len(wantLines)+1), "s1"))

	// b times out (no payload): the turn settles.
	now2 := base.Add(time.Hour)
	ib := turn.Resolution{KeyHash: b.KeyHash, Expect: turn.CompletionPending, Status: turn.CompletionTimedOut, Result: pendingResult("t1", 1)}
	ib.Result.Status, ib.Result.Error = turn.CallTimedOut, &turn.CallError{Code: "completion_timeout", Message: "deadline passed"}
	bb := batch("s1", "t1", now2, ib)
	settled, err = s.Resolve(ctx(t), bb)
	must(t, "Resolve b", err)
	if !settled {
		t.Error("Resolve b did not settle the turn")
	}
	for _, l := range append(bb.Lines, bb.SettleLines...) {
		wantLines = append(wantLines, wantLine(l, int64(len(wantLines)+1), "s1"))
	}
	checkCompletion(t, s, "b timed out", resolved(b, ib, now2))
	want := r.Turn
	want.Status, want.SettledAt = turn.StatusCompleted, now2
	want.Results = []turn.Result{ia.Result, ib.Result}
	same(t, "settled turn", getTurn(t, s, "s1", "t1"), wantTurn(want))

	got := readLedger(t, s, "s1", 3)
	checkSeqs(t, got)
	same(t, "ledger", got, wantLines)

	// b is resolved for good.
	_, err = s.Resolve(ctx(t), batch("s1", "t1", now2, ib))
	isErr(t, "Resolve b again", err, turn.ErrCompletionState)
	same(t, "ledger after resolving again", readLedger(t, s, "s1", 100), wantLines)

	late.PayloadHash, late.Line.TurnID = sha256.Sum256([]byte("another")), ""
	_, err = s.RecordLate(ctx(t), turn.TurnKey{SessionID: "s1", TurnID: "nope"}, late)
	isErr(t, "RecordLate for an unknown turn", err, turn.ErrNotFound)
	same(t, "ledger after RecordLate for an unknown turn", readLedger(t, s, "s1", 100), wantLines)
}

// An early completion keeps its turn waiting until it is applied; an empty
// batch settles a waiting turn with nothing open, and only a waiting one.
func testResolveEarlyAndEmpty(t *testing.T, s turn.Store) {
	mustReceive(t, s, receiveCalls("s1", "t1", "owner-a", 2))
	a, e := issue(t, s, "s1", "t1", 0), issue(t, s, "s1", "t1", 1)
	payload := json.RawMessage(`{"output":"early"}`)
	_, err := s.DeliverEarly(ctx(t), e.SessionID, e.KeyHash, payload, sha256.Sum256(payload), base)
	must(t, "DeliverEarly", err)
	must(t, "Commit waiting", s.Commit(ctx(t), parkCommit("s1", "t1", "owner-a", turn.StatusWaiting, a, e)))

	settled, err := s.Resolve(ctx(t), batch("s1", "t1", base.Add(time.Minute), resolution(a, `1`)))
	must(t, "Resolve a", err)
	if settled {
		t.Error("Resolve a settled the turn; e is early, not applied")
	}
	ie := resolution(e, `"early"`)
	ie.Expect = turn.CompletionEarly
	settled, err = s.Resolve(ctx(t), batch("s1", "t1", base.Add(2*time.Minute), ie))
	must(t, "Resolve e", err)
	if !settled {
		t.Error("Resolve e did not settle the turn")
	}

	// An empty batch settles a waiting turn with no open completion.
	mustReceive(t, s, receiveCalls("s1", "t2", "owner-a", 1))
	empty := batch("s1", "t2", base.Add(time.Hour))
	empty.SettleStatus = turn.StatusCancelled
	settled, err = s.Resolve(ctx(t), empty)
	must(t, "Resolve nothing of a running turn", err)
	if settled {
		t.Error("an empty batch settled a running turn")
	}
	c := commit("s1", "t2", "owner-a")
	c.Status = turn.StatusWaiting
	must(t, "Commit waiting t2", s.Commit(ctx(t), c))
	settled, err = s.Resolve(ctx(t), empty)
	must(t, "Resolve nothing of a waiting turn", err)
	if !settled {
		t.Error("an empty batch did not settle a waiting turn without open completions")
	}
	tu := getTurn(t, s, "s1", "t2")
	if tu.Status != turn.StatusCancelled || !tu.SettledAt.Equal(normTime(base.Add(time.Hour))) {
		t.Errorf("turn t2 is %s settled at %v, want cancelled at %v", tu.Status, tu.SettledAt, normTime(base.Add(time.Hour)))
	}
	checkSeqs(t, readLedger(t, s, "s1", 100))
}

// A batch that fails its checks writes nothing at all.
func testResolveMismatch(t *testing.T, s turn.Store) {
	cs := waitingTurn(t, s, "s1", "t1", 2)
	a, b := cs[0], cs[1]
	mustReceive(t, s, receiveCalls("s1", "t2", "owner-a", 1))
	x := issue(t, s, "s1", "t2", 0)
	ledger := readLedger(t, s, "s1", 100)
	tu := getTurn(t, s, "s1", "t1")

	ia := resolution(a, `"a"`)
	ia.Outputs = []turn.Output{{ID: "out-a", CallID: a.CallID, Data: []byte("a"), CreatedAt: base}}
	ib := resolution(b, `"b"`)
	ib.Expect = turn.CompletionEarly
	_, err := s.Resolve(ctx(t), batch("s1", "t1", base.Add(time.Minute), ia, ib))
	isErr(t, "Resolve expecting early of a pending completion", err, turn.ErrCompletionState)
	if msg := err.Error(); !strings.Contains(msg, fingerprint(b.KeyHash)) || !strings.Contains(msg, string(turn.CompletionPending)) {
		t.Errorf("error %q does not name completion %s and its status pending", msg, fingerprint(b.KeyHash))
	}

	tests := []struct {
		name string
		b    turn.ResolveBatch
	}{
		{"an unknown key", batch("s1", "t1", base, ia, resolution(completion("s1", "t1", 7), `"x"`))},
		{"another turn's key", batch("s1", "t1", base, ia, resolution(x, `"x"`))},
		{"an unknown turn", batch("s1", "nope", base, ia)},
	}
	for _, tt := range tests {
		_, err := s.Resolve(ctx(t), tt.b)
		isErr(t, "Resolve with "+tt.name, err, turn.ErrNotFound)
	}

	same(t, "ledger", readLedger(t, s, "s1", 100), ledger)
	same(t, "turn", getTurn(t, s, "s1", "t1"), tu)
	checkCompletion(t, s, "a", a)
	checkCompletion(t, s, "b", b)
	checkCompletion(t, s, "x", x)
	_, err = s.GetOutput(ctx(t), "s1", "out-a")
	isErr(t, "GetOutput of a rolled back output", err, turn.ErrNotFound)
}

// Resolvers racing on one key with different outcomes: exactly one wins;
// the ledger holds its lines only.
func testResolveRace(t *testing.T, s turn.Store) {
	const resolvers = 8
	a := waitingTurn(t, s, "s1", "t1", 1)[0]
	before := readLedger(t, s, "s1", 100)

	items := make([]turn.Resolution, resolvers)
	batches := make([]turn.ResolveBatch, resolvers)
	for i := range resolvers {
		items[i] = resolution(a, fmt.Sprintf(`{"by":%d}`, i))
		if i%2 == 1 {
			items[i].Status, items[i].Payload, items[i].PayloadHash = turn.CompletionTimedOut, nil, [32]byte{}
			items[i].Result.Status, items[i].Result.Output = turn.CallTimedOut, nil
			items[i].Result.Error = &turn.CallError{Code: "completion_timeout", Message: fmt.Sprint(i)}
		}
		batches[i] = batch("s1", "t1", base.Add(time.Duration(i+1)*time.Minute), items[i])
		batches[i].Lines[0].Data = json.RawMessage(fmt.Sprintf(`{"by":%d}`, i))
		batches[i].SettleLines[0].Data = json.RawMessage(fmt.Sprintf(`{"settled_by":%d}`, i))
	}
	errs := make([]error, resolvers)
	settled := make([]bool, resolvers)
	together(resolvers, func(i int) {
		settled[i], errs[i] = s.Resolve(ctx(t), batches[i])
	})

	winner := -1
	for i, err := range errs {
		switch {
		case err == nil:
			if winner >= 0 {
				t.Fatalf("resolvers %d and %d both resolved the key", winner, i)
			}
			winner = i
		case !errors.Is(err, turn.ErrCompletionState):
			t.Errorf("resolver %d: %v, want nil or ErrCompletionState", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no resolver resolved the key")
	}
	if !settled[winner] {
		t.Error("the winner did not settle the turn")
	}
	checkCompletion(t, s, "completion", resolved(a, items[winner], batches[winner].Now))
	tu := getTurn(t, s, "s1", "t1")
	same(t, "result", tu.Results, []turn.Result{wantResult(items[winner].Result)})
	want := before
	for _, l := range append(batches[winner].Lines, batches[winner].SettleLines...) {
		want = append(want, wantLine(l, int64(len(want)+1), "s1"))
	}
	same(t, "ledger", readLedger(t, s, "s1", 100), want)
}

// Many keys of two turns of one session, each raced by every resolver:
// each key resolves once, each turn settles once, the seqs stay gap-free.
func testResolveManyKeys(t *testing.T, s turn.Store) {
	const perTurn, resolvers = 8, 4
	turns := []string{"t1", "t2"}
	var all []turn.Completion
	for _, tid := range turns {
		all = append(all, waitingTurn(t, s, "s1", tid, perTurn)...)
	}
	var mu sync.Mutex
	wins := make(map[[32]byte][]int)
	settles := make(map[string]int)
	together(resolvers, func(w int) {
		for j := range all {
			c := all[(j+w*len(all)/resolvers)%len(all)] // each starts elsewhere
			settled, err := s.Resolve(ctx(t), batch("s1", c.TurnID, base.Add(time.Minute), resolution(c, fmt.Sprint(w))))
			if errors.Is(err, turn.ErrCompletionState) {
				continue
			}
			if err != nil {
				t.Errorf("resolver %d, key %d of %s: %v", w, c.CallIndex, c.TurnID, err)
				return
			}
			mu.Lock()
			wins[c.KeyHash] = append(wins[c.KeyHash], w)
			if settled {
				settles[c.TurnID]++
			}
			mu.Unlock()
		}
	})
	for _, c := range all {
		if n := len(wins[c.KeyHash]); n != 1 {
			t.Errorf("key %d of %s resolved %d times", c.CallIndex, c.TurnID, n)
		}
	}
	for _, tid := range turns {
		if settles[tid] != 1 {
			t.Errorf("turn %s settled %d times, want once", tid, settles[tid])
		}
		if st := getTurn(t, s, "s1", tid).Status; st != turn.StatusCompleted {
			t.Errorf("turn %s is %s, want completed", tid, st)
		}
	}
	lines := readLedger(t, s, "s1", 50)
	checkSeqs(t, lines)
	// Per turn: received, the pending lines, one answer per key, settled.
	if want := len(turns) * (1 + 2*perTurn + 1); len(lines) != want {
		t.Errorf("ledger has %d lines, want %d", len(lines), want)
	}
}

// A running turn keeps committing (and parking more calls) while
// deliveries resolve the calls it parked: commits and resolutions of one
// turn neither deadlock nor break the session's sequence.
func testResolveWhileCommitting(t *testing.T, s turn.Store) {
	const n, resolvers = 16, 3
	mustReceive(t, s, receiveCalls("s1", "t1", "owner-a", n))
	var cs []turn.Completion
	for i := range n {
		cs = append(cs, issue(t, s, "s1", "t1", i))
	}
	must(t, "Commit parking the first half", s.Commit(ctx(t), parkCommit("s1", "t1", "owner-a", "", cs[:n/2]...)))

	start := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := make(map[[32]byte]int)
	resolveAll := func(w int) {
		for j := range n {
			c := cs[(j+w*n/resolvers)%n]
			_, err := s.Resolve(ctx(t), batch("s1", "t1", base.Add(time.Minute), resolution(c, fmt.Sprint(w))))
			if errors.Is(err, turn.ErrCompletionState) {
				continue // resolved by another, or not parked yet
			}
			if err != nil {
				t.Errorf("resolver %d, key %d: %v", w, c.CallIndex, err)
				return
			}
			mu.Lock()
			wins[c.KeyHash]++
			mu.Unlock()
		}
	}
	wg.Go(func() {
		<-start
		for _, c := range cs[n/2:] {
			if err := s.Commit(ctx(t), parkCommit("s1", "t1", "owner-a", "", c)); err != nil {
				t.Errorf("Commit parking key %d: %v", c.CallIndex, err)
				return
			}
		}
	})
	for w := range resolvers {
		wg.Go(func() {
			<-start
			for range 3 {
				resolveAll(w)
			}
		})
	}
	close(start)
	wg.Wait()
	resolveAll(0) // whatever was parked after the resolvers passed it
	for _, c := range cs {
		if wins[c.KeyHash] != 1 {
			t.Errorf("key %d resolved %d times", c.CallIndex, wins[c.KeyHash])
		}
	}
	lines := readLedger(t, s, "s1", 50)
	checkSeqs(t, lines)
	if want := 1 + 2*n; len(lines) != want { // received, pending and answered per call
		t.Errorf("ledger has %d lines, want %d", len(lines), want)
	}
}

func testHeartbeat(t *testing.T, s turn.Store) {
	mustReceive(t, s, receiveCalls("s1", "t1", "owner-a", 5))
	a, n, i, e, r := issue(t, s, "s1", "t1", 0), issue(t, s, "s1", "t1", 1), issue(t, s, "s1", "t1", 2), issue(t, s, "s1", "t1", 3), issue(t, s, "s1", "t1", 4)
	payload := json.RawMessage(`{"output":1}`)
	_, err := s.DeliverEarly(ctx(t), e.SessionID, e.KeyHash, payload, sha256.Sum256(payload), base)
	must(t, "DeliverEarly", err)
	c := parkCommit("s1", "t1", "owner-a", "", a, n, e, r)
	c.Parks[1].HeartbeatTimeout, c.Parks[1].HeartbeatDeadline = 0, time.Time{} // n: no heartbeat clock
	must(t, "Commit parks", s.Commit(ctx(t), c))
	_, err = s.Resolve(ctx(t), batch("s1", "t1", base.Add(time.Second), resolution(parked(r, parkOf(r)), "1")))
	must(t, "Resolve r", err)
	a = parked(a, parkOf(a))
	n = parked(n, c.Parks[1])

	steps := []struct {
		name string
		now  time.Time
		want time.Time // a's heartbeat deadline afterwards
	}{
		{"extends to now + timeout", base.Add(10 * time.Second), base.Add(40 * time.Second)},
		{"never moves back", base.Add(5 * time.Second), base.Add(40 * time.Second)},
		{"extends again", base.Add(20 * time.Minute), base.Add(20*time.Minute + 30*time.Second)},
		{"never past the deadline", base.Add(59*time.Minute + 45*time.Second), base.Add(time.Hour)},
	}
	for _, st := range steps {
		got, err := s.Heartbeat(ctx(t), a.SessionID, a.KeyHash, st.now)
		must(t, "Heartbeat: "+st.name, err)
		a.HeartbeatDeadline = st.want
		same(t, "Heartbeat: "+st.name, got, wantCompletion(a))
		checkCompletion(t, s, "after Heartbeat: "+st.name, a)
	}

	got, err := s.Heartbeat(ctx(t), n.SessionID, n.KeyHash, base.Add(time.Minute))
	must(t, "Heartbeat without a heartbeat clock", err)
	same(t, "completion without a heartbeat clock", got, wantCompletion(n))

	for _, x := range []struct {
		name string
		key  [32]byte
		want turn.CompletionStatus
	}{{"issued", i.KeyHash, turn.CompletionIssued}, {"early", e.KeyHash, turn.CompletionEarly}, {"resolved", r.KeyHash, turn.CompletionCompleted}} {
		before := getCompletion(t, s, x.key)
		got, err := s.Heartbeat(ctx(t), "s1", x.key, base.Add(time.Minute))
		isErr(t, "Heartbeat of an "+x.name+" completion", err, turn.ErrCompletionState)
		same(t, "Heartbeat of an "+x.name+" completion returns it", got, before)
		same(t, x.name+" status", got.Status, x.want)
		checkCompletion(t, s, x.name+" completion after Heartbeat", before)
	}
	_, err = s.Heartbeat(ctx(t), "s1", keyHash("s1", "t1", 9), base)
	isErr(t, "Heartbeat of an unknown key", err, turn.ErrNotFound)
}

func testDueCompletions(t *testing.T, s turn.Store) {
	const n = 8
	mustReceive(t, s, receiveCalls("s1", "t1", "owner-a", n))
	var cs []turn.Completion
	for i := range n {
		cs = append(cs, issue(t, s, "s1", "t1", i))
	}
	payload := json.RawMessage(`{"output":1}`)
	early, err := s.DeliverEarly(ctx(t), cs[5].SessionID, cs[5].KeyHash, payload, sha256.Sum256(payload), base)
	must(t, "DeliverEarly", err)
	cs[5] = early
	clocks := []struct{ deadline, heartbeat time.Time }{
		{base.Add(time.Minute), time.Time{}},                     // 0: due at +1m by its deadline
		{base.Add(10 * time.Minute), base.Add(30 * time.Second)}, // 1: due at +30s by its heartbeat
		{base.Add(5 * time.Minute), base.Add(5 * time.Minute)},   // 2: due at +5m by both
		{base.Add(2 * time.Hour), base.Add(time.Hour)},           // 3: not due
		{base.Add(10 * time.Minute), time.Time{}},                // 4: due at exactly now
		{base, time.Time{}},                                      // 5: early: never due
		{base, base},                                             // 6: resolved: never due
		{time.Time{}, time.Time{}},                               // 7: issued only
	}
	c := commit("s1", "t1", "owner-a")
	for i, k := range clocks[:7] {
		p := parkOf(cs[i])
		p.Deadline, p.HeartbeatDeadline = k.deadline, k.heartbeat
		if k.heartbeat.IsZero() {
			p.HeartbeatTimeout = 0
		}
		c.Parks = append(c.Parks, p)
		cs[i] = parked(cs[i], p)
	}
	must(t, "Commit parks", s.Commit(ctx(t), c))
	_, err = s.Resolve(ctx(t), batch("s1", "t1", base, resolution(cs[6], "1")))
	must(t, "Resolve 6", err)

	due := func(now time.Time, limit int, want ...int) {
		t.Helper()
		got, err := s.DueCompletions(ctx(t), now, limit)
		must(t, "DueCompletions", err)
		if got == nil {
			t.Errorf("DueCompletions at %v: nil, want a non-nil (possibly empty) slice", now)
		}
		ws := []turn.Completion{}
		for _, i := range want {
			ws = append(ws, wantCompletion(cs[i]))
		}
		same(t, fmt.Sprintf("DueCompletions at +%v limit %d", now.Sub(base), limit), got, ws)
	}
	now := base.Add(10 * time.Minute)
	due(now, 10, 1, 0, 2, 4)
	due(now, 2, 1, 0)
	due(now, 0)
	due(base.Add(30*time.Second), 10, 1) // at exactly the heartbeat deadline
	due(base, 10)

	// A heartbeat takes 1 off the list until its new heartbeat deadline.
	hb, err := s.Heartbeat(ctx(t), cs[1].SessionID, cs[1].KeyHash, base.Add(time.Minute))
	must(t, "Heartbeat", err)
	cs[1] = hb
	due(base.Add(time.Minute), 10, 0)
	due(base.Add(time.Minute+30*time.Second), 10, 0, 1)
}

func testSecret(t *testing.T, s turn.Store) {
	boom := errors.New("no entropy")
	_, err := s.Secret(ctx(t), func() (string, error) { return "", boom })
	isErr(t, "Secret with a failing generator", err, boom)
	if _, err := s.Secret(ctx(t), func() (string, error) { return "", nil }); err == nil {
		t.Error("Secret stored an empty secret")
	}
	got, err := s.Secret(ctx(t), func() (string, error) { return "first", nil })
	must(t, "Secret", err)
	same(t, "secret", got, "first")
	got, err = s.Secret(ctx(t), func() (string, error) {
		t.Error("Secret generated a second secret")
		return "second", nil
	})
	must(t, "Secret again", err)
	same(t, "secret read again", got, "first")
}

// Replicas starting together on a new database agree on one secret.
func testSecretConcurrent(t *testing.T, s turn.Store) {
	const callers = 8
	got := make([]string, callers)
	together(callers, func(i int) {
		v, err := s.Secret(ctx(t), func() (string, error) { return fmt.Sprintf("secret-%d", i), nil })
		if err != nil {
			t.Errorf("Secret %d: %v", i, err)
		}
		got[i] = v
	})
	for i, v := range got {
		if v != got[0] || !strings.HasPrefix(v, "secret-") {
			t.Fatalf("callers got %q (caller %d differs), want one secret", got, i)
		}
	}
}

// Completion times come back in UTC truncated to the microsecond, payloads
// byte for byte, durations to the microsecond.
func testCompletionRoundTrip(t *testing.T, s turn.Store) {
	loc := time.FixedZone("UTC-7", -7*60*60)
	at := time.Date(2029, 12, 31, 23, 59, 59, 999999999, loc)
	utc := time.Date(2030, 1, 1, 6, 59, 59, 999999000, time.UTC)
	mustReceive(t, s, receiveCalls("s1", "t1", "owner-a", 2))
	a, e := completion("s1", "t1", 0), completion("s1", "t1", 1)
	a.CreatedAt, e.CreatedAt = at, at
	must(t, "IssueCompletion a", s.IssueCompletion(ctx(t), a))
	must(t, "IssueCompletion e", s.IssueCompletion(ctx(t), e))

	early := json.RawMessage("{ \"output\" : \"caf\\u00e9 <b>&amp;</b>\",\n \"n\": 1.50, \"n\": 2 }")
	_, err := s.DeliverEarly(ctx(t), e.SessionID, e.KeyHash, early, sha256.Sum256(early), at)
	must(t, "DeliverEarly", err)
	c := commit("s1", "t1", "owner-a")
	for _, k := range []turn.Completion{a, e} {
		p := parkOf(k)
		p.Deadline, p.HeartbeatDeadline = at.Add(time.Hour), at
		p.HeartbeatTimeout = 90*time.Second + 1500*time.Nanosecond // kept to the microsecond
		c.Parks = append(c.Parks, p)
	}
	must(t, "Commit parks", s.Commit(ctx(t), c))
	final := json.RawMessage(` {"output": [ "\ud83d\ude00", 1e3 ]} `)
	ia := resolution(a, "1")
	ia.Payload, ia.PayloadHash = final, sha256.Sum256(final)
	_, err = s.Resolve(ctx(t), batch("s1", "t1", at, ia))
	must(t, "Resolve", err)

	checkTime := func(what string, got, want time.Time) {
		t.Helper()
		if !got.Equal(want) || got.Location() != time.UTC {
			t.Errorf("%s = %v (%v), want %v", what, got, got.Location(), want)
		}
	}
	ga, ge := getCompletion(t, s, a.KeyHash), getCompletion(t, s, e.KeyHash)
	for _, g := range []turn.Completion{ga, ge} {
		checkTime("CreatedAt", g.CreatedAt, utc)
		checkTime("Deadline", g.Deadline, utc.Add(time.Hour))
		checkTime("HeartbeatDeadline", g.HeartbeatDeadline, utc)
		checkTime("ResolvedAt", g.ResolvedAt, utc)
		if g.HeartbeatTimeout != 90*time.Second+time.Microsecond {
			t.Errorf("HeartbeatTimeout = %v, want 1m30.000001s", g.HeartbeatTimeout)
		}
	}
	if !bytes.Equal(ge.Payload, early) || ge.PayloadHash != sha256.Sum256(early) {
		t.Errorf("early payload = %q (hash %x), want %q byte for byte", ge.Payload, ge.PayloadHash, early)
	}
	if !bytes.Equal(ga.Payload, final) || ga.PayloadHash != sha256.Sum256(final) {
		t.Errorf("final payload = %q (hash %x), want %q byte for byte", ga.Payload, ga.PayloadHash, final)
	}
}

// testPendingCount: only completions parked and unresolved count; issued,
// early and resolved ones do not.
func testPendingCount(t *testing.T, s turn.Store) {
	count := func(what string, want int64) {
		t.Helper()
		n, err := s.PendingCount(ctx(t))
		must(t, "PendingCount "+what, err)
		if n != want {
			t.Errorf("PendingCount %s = %d, want %d", what, n, want)
		}
	}
	count("of an empty store", 0)
	mustReceive(t, s, receiveCalls("s1", "t0", "owner-a", 2))
	issue(t, s, "s1", "t0", 0)
	e := issue(t, s, "s1", "t0", 1)
	payload := json.RawMessage(`{"output":"early"}`)
	_, err := s.DeliverEarly(ctx(t), e.SessionID, e.KeyHash, payload, sha256.Sum256(payload), base)
	must(t, "DeliverEarly", err)
	count("with an issued and an early key", 0)

	cs := waitingTurn(t, s, "s1", "t1", 3)
	waitingTurn(t, s, "s2", "t1", 2)
	count("with five parked calls in two sessions", 5)

	_, err = s.Resolve(ctx(t), batch("s1", "t1", base.Add(time.Minute), resolution(cs[0], `"a"`), resolution(cs[2], `"c"`)))
	must(t, "Resolve", err)
	count("after two were resolved", 3)
	timedOut := resolution(cs[1], `null`)
	timedOut.Status = turn.CompletionTimedOut
	_, err = s.Resolve(ctx(t), batch("s1", "t1", base.Add(2*time.Minute), timedOut))
	must(t, "Resolve timed out", err)
	count("after the third timed out", 2)
}
