package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/turnd/turnd/turn"
)

func testReceiveTurnCreatesSession(t *testing.T, s turn.Store) {
	r := receive("s1", "t1", "owner-a")
	res, err := s.ReceiveTurn(ctx(t), r)
	must(t, "ReceiveTurn", err)
	if res.Seq != 1 {
		t.Errorf("turn_received seq %d, want 1 (first line of a new session)", res.Seq)
	}
	same(t, "returned session", res.Session, wantSession(r.Session))

	got, err := s.GetSession(ctx(t), "s1")
	must(t, "GetSession", err)
	same(t, "stored session", got, wantSession(r.Session))

	tu, err := s.GetTurn(ctx(t), turn.TurnKey{SessionID: "s1", TurnID: "t1"})
	must(t, "GetTurn", err)
	same(t, "turn", gotTurn(tu), wantTurn(r.Turn))

	lines := readLedger(t, s, "s1", 10)
	same(t, "ledger", lines, []turn.Line{wantLine(r.Line, 1, "s1")})
}

func testReceiveTurnExistingSession(t *testing.T, s turn.Store) {
	created := session("s1")
	created.Tools = nil
	created.CallbackURL = ""
	must(t, "CreateSession", s.CreateSession(ctx(t), created))

	// The Receive's session values are ignored for an existing session.
	r := receive("s1", "t1", "owner-a")
	res, err := s.ReceiveTurn(ctx(t), r)
	must(t, "ReceiveTurn", err)
	same(t, "returned session", res.Session, wantSession(created))
	if res.Seq != 1 {
		t.Errorf("seq %d, want 1", res.Seq)
	}
	res, err = s.ReceiveTurn(ctx(t), receive("s1", "t2", "owner-a"))
	must(t, "ReceiveTurn t2", err)
	if res.Seq != 2 {
		t.Errorf("second turn's seq %d, want 2", res.Seq)
	}
	same(t, "returned session", res.Session, wantSession(created))
	got, err := s.GetSession(ctx(t), "s1")
	must(t, "GetSession", err)
	same(t, "stored session", got, wantSession(created))
}

func testReceiveTurnDuplicate(t *testing.T, s turn.Store) {
	r := receive("s1", "t1", "owner-a")
	mustReceive(t, s, r)
	c := commit("s1", "t1", "owner-a")
	c.Lines = []turn.Line{line("t1", "t1-c0", turn.LineCallAnswered, `{"ok":true}`)}
	c.Results = []turn.Result{result("t1", 0)}
	must(t, "Commit", s.Commit(ctx(t), c))
	before := readLedger(t, s, "s1", 100)

	again := receive("s1", "t1", "owner-b")
	again.Turn.Hash = "another hash"
	again.Session.CallbackURL = "https://changed.test/"
	res, err := s.ReceiveTurn(ctx(t), again)
	isErr(t, "ReceiveTurn again", err, turn.ErrTurnExists)
	want := r.Turn
	want.Results = []turn.Result{result("t1", 0)}
	same(t, "existing turn", gotTurn(res.Existing), wantTurn(want))

	same(t, "ledger after the duplicate", readLedger(t, s, "s1", 100), before)
	// The duplicate took no lease: the first owner still commits.
	must(t, "Commit by the first owner", s.Commit(ctx(t), commit("s1", "t1", "owner-a")))
	got, err := s.GetSession(ctx(t), "s1")
	must(t, "GetSession", err)
	same(t, "session", got, wantSession(r.Session))
}

// Turns arriving together for a session that does not exist yet: exactly one
// creates it, every turn is recorded and the seqs stay gap-free.
func testReceiveTurnConcurrentNewSession(t *testing.T, s turn.Store) {
	const n = 12
	seqs := make([]int64, n)
	together(n, func(i int) {
		r := receive("s1", fmt.Sprintf("t%02d", i), "owner-a")
		r.Session.CallbackURL = fmt.Sprintf("https://frontend.test/%d", i)
		res, err := s.ReceiveTurn(ctx(t), r)
		if err != nil {
			t.Errorf("ReceiveTurn %d: %v", i, err)
			return
		}
		seqs[i] = res.Seq
	})
	if t.Failed() {
		return
	}
	seen := make(map[int64]bool)
	for i, seq := range seqs {
		if seq < 1 || seq > n || seen[seq] {
			t.Errorf("turn %d got seq %d (seqs %v)", i, seq, seqs)
		}
		seen[seq] = true
	}
	checkSeqs(t, readLedger(t, s, "s1", 5))
}

func testCommitSeqs(t *testing.T, s turn.Store) {
	mustReceive(t, s, receive("s1", "t1", "owner-a"))
	mustReceive(t, s, receive("other", "t1", "owner-a")) // another session's seqs are its own
	want := readLedger(t, s, "s1", 10)
	for i, n := range []int{3, 0, 1, 5} {
		c := commit("s1", "t1", "owner-a")
		for j := range n {
			l := line("t1", fmt.Sprintf("t1-c%d", j), turn.LineCallAdmitted, fmt.Sprintf(`{"commit":%d,"line":%d}`, i, j))
			c.Lines = append(c.Lines, l)
			want = append(want, wantLine(l, int64(len(want)+1), "s1"))
		}
		must(t, fmt.Sprintf("Commit %d", i), s.Commit(ctx(t), c))
	}
	got := readLedger(t, s, "s1", 4)
	checkSeqs(t, got)
	same(t, "ledger", got, want)
	other := readLedger(t, s, "other", 10)
	if len(other) != 1 || other[0].Seq != 1 {
		t.Errorf("other session's ledger %+v, want its one line at seq 1", other)
	}
}

// Many writers on separate turns of one session: the session's seqs stay
// unique and gap-free, and each turn's lines keep their commit order.
func testCommitConcurrent(t *testing.T, s turn.Store) {
	const writers, commits = 16, 20
	together(writers, func(w int) {
		tid := fmt.Sprintf("t%02d", w)
		// A call per commit: each commit writes the result of its own.
		if _, err := s.ReceiveTurn(ctx(t), receiveCalls("s1", tid, "owner-a", commits)); err != nil {
			t.Errorf("ReceiveTurn %s: %v", tid, err)
			return
		}
		for i := range commits {
			c := commit("s1", tid, "owner-a")
			for j := range i%3 + 1 {
				c.Lines = append(c.Lines, line(tid, "", turn.LineCallAdmitted, fmt.Sprintf(`{"commit":%d,"line":%d}`, i, j)))
			}
			c.Results = []turn.Result{result(tid, i)}
			if err := s.Commit(ctx(t), c); err != nil {
				t.Errorf("Commit %s #%d: %v", tid, i, err)
				return
			}
		}
	})
	if t.Failed() {
		return
	}
	lines := readLedger(t, s, "s1", 97)
	perWriter := 1 // the turn_received line
	for i := range commits {
		perWriter += i%3 + 1
	}
	if len(lines) != writers*perWriter {
		t.Fatalf("ledger has %d lines, want %d", len(lines), writers*perWriter)
	}
	checkSeqs(t, lines)
	next := make(map[string]string) // turn → data of the line expected next
	for _, l := range lines {
		if l.Kind == turn.LineTurnReceived {
			next[l.TurnID] = `{"commit":0,"line":0}`
			continue
		}
		if string(l.Data) != next[l.TurnID] {
			t.Fatalf("turn %s: line %d has data %s, want %s", l.TurnID, l.Seq, l.Data, next[l.TurnID])
		}
		var i, j int
		fmt.Sscanf(string(l.Data), `{"commit":%d,"line":%d}`, &i, &j)
		if j+1 < i%3+1 {
			next[l.TurnID] = fmt.Sprintf(`{"commit":%d,"line":%d}`, i, j+1)
		} else {
			next[l.TurnID] = fmt.Sprintf(`{"commit":%d,"line":%d}`, i+1, 0)
		}
	}
	tu, err := s.GetTurn(ctx(t), turn.TurnKey{SessionID: "s1", TurnID: "t07"})
	must(t, "GetTurn", err)
	if len(tu.Results) != commits {
		t.Errorf("turn t07 has %d results, want %d", len(tu.Results), commits)
	}
}

func testCommitResultsUpsert(t *testing.T, s turn.Store) {
	r := receive("s1", "t1", "owner-a")
	r.Turn.Calls = append(r.Turn.Calls, r.Turn.Calls[1])
	r.Turn.Calls[2].ID = "t1-c2"
	mustReceive(t, s, r)
	k := turn.TurnKey{SessionID: "s1", TurnID: "t1"}

	// Call 2 is accounted first, then call 1 starts: results come back in
	// call order, not commit order.
	c := commit("s1", "t1", "owner-a")
	c.Results = []turn.Result{result("t1", 2)}
	must(t, "Commit call 2", s.Commit(ctx(t), c))
	started := turn.Result{
		Index: 1, CallID: "t1-c1", Name: "write_file", Effect: "write",
		Status: turn.CallStarted, Attempts: 1, StartedAt: base.Add(time.Second),
	}
	c = commit("s1", "t1", "owner-a")
	c.Lines = []turn.Line{line("t1", "t1-c1", turn.LineAttemptStarted, "")}
	c.Results = []turn.Result{started}
	must(t, "Commit call 1 started", s.Commit(ctx(t), c))
	tu, err := s.GetTurn(ctx(t), k)
	must(t, "GetTurn", err)
	same(t, "results with a started call", tu.Results, []turn.Result{wantResult(started), wantResult(result("t1", 2))})

	// The outcome replaces the started row.
	final := started
	final.Status = turn.CallFailed
	final.Error = &turn.CallError{Code: "tool_failed", Message: "disk full"}
	final.Truncated = true
	final.OriginalBytes, final.OriginalLines = 1<<40, 12345
	final.OutputID = "out-1"
	final.Attempts = 2
	final.FinishedAt = base.Add(3 * time.Second)
	c = commit("s1", "t1", "owner-a")
	c.Results = []turn.Result{final}
	must(t, "Commit call 1 outcome", s.Commit(ctx(t), c))

	// The same index twice in one commit: the last one wins.
	first, second := result("t1", 0), result("t1", 0)
	first.Status = turn.CallStarted
	second.Output = nil
	second.Error = &turn.CallError{Code: "empty", Message: ""}
	c = commit("s1", "t1", "owner-a")
	c.Results = []turn.Result{first, second}
	must(t, "Commit call 0 twice", s.Commit(ctx(t), c))

	tu, err = s.GetTurn(ctx(t), k)
	must(t, "GetTurn", err)
	same(t, "results", tu.Results, []turn.Result{wantResult(second), wantResult(final), wantResult(result("t1", 2))})
}

func testCommitOutputs(t *testing.T, s turn.Store) {
	mustReceive(t, s, receive("s1", "t1", "owner-a"))
	now := time.Now()
	outs := []turn.Output{
		{ID: "o1", SessionID: "s1", TurnID: "t1", CallID: "t1-c0", ContentType: "text/plain",
			Data: []byte("line 1\nline 2\n"), CreatedAt: now, ExpiresAt: now.Add(time.Hour)},
		{ID: "o2", CallID: "t1-c1", ContentType: "application/octet-stream",
			Data: []byte{0, 1, 2, 0xff, 0xfe}, CreatedAt: now}, // ids filled in; never expires
		{ID: "o3", SessionID: "s1", TurnID: "t1", CallID: "t1-c1", Data: nil, CreatedAt: now},
	}
	c := commit("s1", "t1", "owner-a")
	c.Outputs = outs
	must(t, "Commit", s.Commit(ctx(t), c))
	for _, o := range outs {
		got, err := s.GetOutput(ctx(t), "s1", o.ID)
		must(t, "GetOutput "+o.ID, err)
		want := o
		want.SessionID, want.TurnID = "s1", "t1"
		same(t, "output "+o.ID, gotOutput(got), wantOutput(want))
	}
	if outs[1].SessionID != "" || outs[1].TurnID != "" {
		t.Error("Commit modified the caller's outputs")
	}
}

func testCommitStatus(t *testing.T, s turn.Store) {
	tests := []struct {
		name     string
		status   turn.Status
		settled  bool
		released bool
	}{
		{"unchanged", "", false, false},
		{"running", turn.StatusRunning, false, false},
		{"waiting", turn.StatusWaiting, false, true},
		{"completed", turn.StatusCompleted, true, true},
		{"failed", turn.StatusFailed, true, true},
		{"cancelled", turn.StatusCancelled, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sid := "s-" + tt.name
			r := receive(sid, "t1", "owner-a")
			mustReceive(t, s, r)
			k := turn.TurnKey{SessionID: sid, TurnID: "t1"}
			c := commit(sid, "t1", "owner-a")
			c.Status = tt.status
			if tt.settled {
				c.SettledAt = base.Add(time.Hour)
			}
			c.Lines = []turn.Line{line("t1", "", turn.LineTurnSettled, "")}
			must(t, "Commit", s.Commit(ctx(t), c))

			want := r.Turn
			if tt.status != "" {
				want.Status = tt.status
			}
			want.SettledAt = c.SettledAt
			tu, err := s.GetTurn(ctx(t), k)
			must(t, "GetTurn", err)
			same(t, "turn", gotTurn(tu), wantTurn(want))

			lost, err := s.RenewLeases(ctx(t), "owner-a", base.Add(time.Hour), []turn.TurnKey{k})
			must(t, "RenewLeases", err)
			if got := len(lost) == 1; got != tt.released {
				t.Errorf("lease released = %v, want %v", got, tt.released)
			}
			err = s.Commit(ctx(t), commit(sid, "t1", "owner-a"))
			if tt.released {
				isErr(t, "Commit after release", err, turn.ErrLeaseLost)
			} else {
				must(t, "Commit while held", err)
			}
		})
	}
}

func testCommitLeaseLost(t *testing.T, s turn.Store) {
	r := receive("s1", "t1", "owner-a")
	mustReceive(t, s, r)
	k := turn.TurnKey{SessionID: "s1", TurnID: "t1"}
	before := readLedger(t, s, "s1", 10)

	c := commit("s1", "t1", "owner-b")
	c.Lines = []turn.Line{line("t1", "t1-c0", turn.LineCallAnswered, `{}`), line("t1", "", turn.LineTurnSettled, "")}
	c.Results = []turn.Result{result("t1", 0)}
	c.Outputs = []turn.Output{{ID: "o1", CallID: "t1-c0", Data: []byte("x"), CreatedAt: time.Now()}}
	c.Status, c.SettledAt = turn.StatusCompleted, base.Add(time.Hour)
	isErr(t, "Commit by another owner", s.Commit(ctx(t), c), turn.ErrLeaseLost)

	same(t, "ledger", readLedger(t, s, "s1", 10), before)
	tu, err := s.GetTurn(ctx(t), k)
	must(t, "GetTurn", err)
	same(t, "turn", gotTurn(tu), wantTurn(r.Turn))
	_, err = s.GetOutput(ctx(t), "s1", "o1")
	isErr(t, "GetOutput", err, turn.ErrNotFound)
	// The owner's lease is untouched.
	lost, err := s.RenewLeases(ctx(t), "owner-a", base.Add(time.Hour), []turn.TurnKey{k})
	must(t, "RenewLeases", err)
	if len(lost) != 0 {
		t.Errorf("owner-a lost %v", lost)
	}
	// Committing a turn that does not exist is a lost lease too.
	isErr(t, "Commit unknown turn", s.Commit(ctx(t), commit("s1", "t9", "owner-a")), turn.ErrLeaseLost)
	same(t, "ledger", readLedger(t, s, "s1", 10), before)
}

func testGetTurnNotFound(t *testing.T, s turn.Store) {
	mustReceive(t, s, receive("s1", "t1", "owner-a"))
	for _, k := range []turn.TurnKey{{SessionID: "s1", TurnID: "t2"}, {SessionID: "s2", TurnID: "t1"}} {
		_, err := s.GetTurn(ctx(t), k)
		isErr(t, fmt.Sprintf("GetTurn %v", k), err, turn.ErrNotFound)
	}
}
