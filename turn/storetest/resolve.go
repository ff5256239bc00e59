package storetest

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turnd/turnd/turn"
)

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
