package storetest

import (
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"

	"github.com/turnd/turnd/turn"
)

// bigLines returns n lines of turn tid whose data is size bytes each.
func bigLines(tid string, n, size int) []turn.Line {
	ls := make([]turn.Line, n)
	for i := range ls {
		d := fmt.Sprintf(`{"i":%d,"s":"`, i)
		d += strings.Repeat("x", size-len(d)-2) + `"}`
		ls[i] = line(tid, fmt.Sprintf("%s-c%d", tid, i%2), turn.LineCallAnswered, d)
	}
	return ls
}

func pageBytes(lines []turn.Line) int {
	n := 0
	for _, l := range lines {
		n += turn.LineBytes(l)
	}
	return n
}

// A page holds lines only while their LineBytes sum to at most maxBytes,
// but always one line; paging by the last seq reads every line once.
func testLedgerBytes(t *testing.T, s turn.Store) {
	r := receive("s1", "t1", "owner-a")
	mustReceive(t, s, r)
	c := commit("s1", "t1", "owner-a")
	c.Lines = bigLines("t1", 6, 1000)
	must(t, "Commit", s.Commit(ctx(t), c))
	want := []turn.Line{wantLine(r.Line, 1, "s1")}
	for i, l := range c.Lines {
		want = append(want, wantLine(l, int64(i+2), "s1"))
	}
	size := turn.LineBytes(want[1])

	tests := []struct {
		after      int64
		limit      int
		maxBytes   int
		start, end int // want[start:end]
	}{
		{1, 100, 1, 1, 2},               // one line, however large
		{1, 100, 2*size + size/2, 1, 3}, // two lines fit, not three
		{1, 100, 3 * size, 1, 4},        // exactly three
		{1, 2, 3 * size, 1, 3},          // the line limit binds first
		{0, 100, 1 << 30, 0, 7},         // everything
		{5, 100, size - 1, 5, 6},        // a line larger than the bound alone
		{7, 100, 1, 7, 7},               // nothing after the last line
		{0, 100, turn.LineBytes(want[0]), 0, 1},
	}
	for _, tt := range tests {
		what := fmt.Sprintf("Ledger after %d limit %d maxBytes %d", tt.after, tt.limit, tt.maxBytes)
		got, err := s.Ledger(ctx(t), "s1", tt.after, tt.limit, tt.maxBytes)
		must(t, what, err)
		same(t, what, got, append([]turn.Line{}, want[tt.start:tt.end]...))
		if n := pageBytes(got); len(got) > 1 && n > tt.maxBytes {
			t.Errorf("%s: %d lines of %d bytes", what, len(got), n)
		}
	}

	// Paging with a small bound reads every line once, in order.
	for _, maxBytes := range []int{1, size, 2 * size, 5000} {
		var all []turn.Line
		after := int64(0)
		for range 20 {
			page, err := s.Ledger(ctx(t), "s1", after, 100, maxBytes)
			must(t, "Ledger", err)
			if len(page) == 0 {
				break
			}
			if len(page) > 1 && pageBytes(page) > maxBytes {
				t.Errorf("maxBytes %d: a page of %d lines and %d bytes", maxBytes, len(page), pageBytes(page))
			}
			all = append(all, page...)
			after = page[len(page)-1].Seq
		}
		same(t, fmt.Sprintf("the ledger paged by %d bytes", maxBytes), all, want)
	}
}

// TurnLedger reads one turn's lines, whatever lines of other turns of the
// session come between them, with Ledger's bounds.
func testTurnLedger(t *testing.T, s turn.Store) {
	r1, r2 := receive("s1", "t1", "owner-a"), receive("s1", "t2", "owner-a")
	mustReceive(t, s, r1)
	mustReceive(t, s, r2)
	mustReceive(t, s, receive("s2", "t1", "owner-a")) // the same turn id in another session
	c1 := commit("s1", "t1", "owner-a")
	c1.Lines = bigLines("t1", 3, 500)
	must(t, "Commit t1", s.Commit(ctx(t), c1))
	c2 := commit("s1", "t2", "owner-a")
	c2.Lines = bigLines("t2", 2, 500)
	must(t, "Commit t2", s.Commit(ctx(t), c2))
	c3 := commit("s1", "t1", "owner-a")
	c3.Lines = []turn.Line{line("", "", turn.LineTurnSettled, `{"status":"completed"}`)} // the turn id filled in
	must(t, "Commit t1 again", s.Commit(ctx(t), c3))
	other := commit("s2", "t1", "owner-a")
	other.Lines = bigLines("t1", 1, 100)
	must(t, "Commit s2/t1", s.Commit(ctx(t), other))

	// s1: 1 t1, 2 t2, 3-5 t1, 6-7 t2, 8 t1.
	t1 := []turn.Line{wantLine(r1.Line, 1, "s1")}
	for i, l := range c1.Lines {
		t1 = append(t1, wantLine(l, int64(3+i), "s1"))
	}
	settledLine := c3.Lines[0]
	settledLine.TurnID = "t1"
	t1 = append(t1, wantLine(settledLine, 8, "s1"))
	t2 := []turn.Line{wantLine(r2.Line, 2, "s1")}
	for i, l := range c2.Lines {
		t2 = append(t2, wantLine(l, int64(6+i), "s1"))
	}
	size := turn.LineBytes(t1[1])

	tests := []struct {
		tid        string
		after      int64
		limit      int
		maxBytes   int
		want       []turn.Line
		start, end int
	}{
		{"t1", 0, 100, 1 << 30, t1, 0, 5},
		{"t2", 0, 100, 1 << 30, t2, 0, 3},
		{"t1", 1, 100, 1 << 30, t1, 1, 5},
		{"t1", 2, 100, 1 << 30, t1, 1, 5}, // after a seq of another turn
		{"t1", 3, 2, 1 << 30, t1, 2, 4},
		{"t1", 4, 100, 1 << 30, t1, 3, 5},
		{"t1", 5, 100, 1 << 30, t1, 4, 5}, // across t2's lines
		{"t1", 8, 100, 1 << 30, t1, 5, 5},
		{"t1", 2, 100, size, t1, 1, 2},
		{"t1", 2, 100, 2*size + 1, t1, 1, 3},
		{"t1", 0, 100, 1, t1, 0, 1},
		{"nope", 0, 100, 1 << 30, nil, 0, 0},
	}
	for _, tt := range tests {
		what := fmt.Sprintf("TurnLedger %s after %d limit %d maxBytes %d", tt.tid, tt.after, tt.limit, tt.maxBytes)
		got, err := s.TurnLedger(ctx(t), "s1", tt.tid, tt.after, tt.limit, tt.maxBytes)
		must(t, what, err)
		if got == nil {
			t.Errorf("%s: nil, want a non-nil (possibly empty) slice", what)
		}
		same(t, what, got, append([]turn.Line{}, tt.want[tt.start:tt.end]...))
	}
	got, err := s.TurnLedger(ctx(t), "nope", "t1", 0, 100, 1<<30)
	must(t, "TurnLedger of an unknown session", err)
	if got == nil || len(got) != 0 {
		t.Errorf("TurnLedger of an unknown session = %#v, want an empty slice", got)
	}
	got, err = s.TurnLedger(ctx(t), "s2", "t1", 0, 100, 1<<30)
	must(t, "TurnLedger s2/t1", err)
	if len(got) != 2 || got[0].SessionID != "s2" || got[1].Seq != 2 {
		t.Errorf("TurnLedger s2/t1 = %+v, want its two lines", got)
	}
}

// A line naming another turn than the one it is written under is refused:
// a ledger row holds the lines of one turn.
func testLinesOfOneTurn(t *testing.T, s turn.Store) {
	mustReceive(t, s, receive("s1", "t1", "owner-a"))
	mustReceive(t, s, receive("s1", "t2", "owner-a"))
	c := commit("s1", "t1", "owner-a")
	c.Lines = []turn.Line{line("t1", "", turn.LineCallAdmitted, ""), line("t2", "", turn.LineCallAdmitted, "")}
	if err := s.Commit(ctx(t), c); err == nil {
		t.Error("Commit of t1 wrote a line of t2")
	}
	if got := readLedger(t, s, "s1", 100); len(got) != 2 {
		t.Errorf("%d lines after a refused commit, want 2", len(got))
	}
}

// late returns a late delivery to c with payload p: its line, an output
// named id when id is not empty, and a cap of max payloads.
func late(c turn.Completion, p string, id string, max int) turn.Late {
	l := turn.Late{KeyHash: c.KeyHash, PayloadHash: sha256.Sum256([]byte(p)), Max: max,
		Line: line(c.TurnID, c.CallID, turn.LineCompletionLate, fmt.Sprintf(`{"status":"timed_out","payload":%q}`, p))}
	if id != "" {
		l.Outputs = []turn.Output{{ID: id, CallID: c.CallID, ContentType: "application/json", Data: []byte(p), CreatedAt: base}}
	}
	return l
}

// RecordLate records a payload hash once per key, at most Max hashes per
// key; a repeat and a payload past the cap write nothing.
func testRecordLate(t *testing.T, s turn.Store) {
	k := turn.TurnKey{SessionID: "s1", TurnID: "t1"}
	mustReceive(t, s, receiveCalls("s1", "t1", "owner-a", 2))
	a, b := issue(t, s, "s1", "t1", 0), issue(t, s, "s1", "t1", 1)
	want := readLedger(t, s, "s1", 100)
	record := func(what string, l turn.Late, outcome turn.LateOutcome) {
		t.Helper()
		got, err := s.RecordLate(ctx(t), k, l)
		must(t, what, err)
		same(t, what+": outcome", got, outcome)
		if outcome == turn.LateRecorded {
			want = append(want, wantLine(l.Line, int64(len(want)+1), "s1"))
		}
		same(t, what+": ledger", readLedger(t, s, "s1", 100), want)
		for _, o := range l.Outputs {
			_, err := s.GetOutput(ctx(t), "s1", o.ID)
			if outcome == turn.LateRecorded {
				must(t, what+": GetOutput", err)
			} else {
				isErr(t, what+": GetOutput", err, turn.ErrNotFound)
			}
		}
	}
	record("a first payload", late(a, `"p0"`, "out-0", 3), turn.LateRecorded)
	out, err := s.GetOutput(ctx(t), "s1", "out-0")
	must(t, "GetOutput out-0", err)
	same(t, "the late payload's output", out.TurnID+" "+out.CallID+" "+string(out.Data), `t1 t1-c0 "p0"`)
	record("the same payload", late(a, `"p0"`, "out-0b", 3), turn.LateRepeated)
	record("a second payload", late(a, `"p1"`, "", 3), turn.LateRecorded)
	record("a third payload", late(a, `"p2"`, "", 3), turn.LateRecorded)
	record("a fourth payload, past the cap", late(a, `"p3"`, "out-3", 3), turn.LateDropped)
	record("the first again", late(a, `"p0"`, "", 3), turn.LateRepeated)
	record("the third again", late(a, `"p2"`, "", 3), turn.LateRepeated)
	// Another key of the turn keeps its own hashes.
	record("the first payload to another key", late(b, `"p0"`, "", 3), turn.LateRecorded)

	_, err = s.RecordLate(ctx(t), k, late(completion("s1", "t1", 7), `"x"`, "", 3))
	isErr(t, "RecordLate to an unknown key", err, turn.ErrNotFound)
	l := late(a, `"y"`, "", 3)
	l.Line.TurnID = ""
	_, err = s.RecordLate(ctx(t), turn.TurnKey{SessionID: "s1", TurnID: "t2"}, l)
	isErr(t, "RecordLate under another turn than the key's", err, turn.ErrNotFound)
	same(t, "ledger after refused late deliveries", readLedger(t, s, "s1", 100), want)
}

// Concurrent deliveries of one payload record it once.
func testRecordLateConcurrent(t *testing.T, s turn.Store) {
	k := turn.TurnKey{SessionID: "s1", TurnID: "t1"}
	mustReceive(t, s, receiveCalls("s1", "t1", "owner-a", 1))
	a := issue(t, s, "s1", "t1", 0)
	before := len(readLedger(t, s, "s1", 100))
	const n = 8
	outcomes := make(chan turn.LateOutcome, n)
	together(n, func(i int) {
		o, err := s.RecordLate(ctx(t), k, late(a, `"same"`, fmt.Sprintf("out-%d", i), turn.MaxLateLines))
		if err != nil {
			t.Errorf("RecordLate: %v", err)
		}
		outcomes <- o
	})
	close(outcomes)
	recorded := 0
	for o := range outcomes {
		if o == turn.LateRecorded {
			recorded++
		}
	}
	if recorded != 1 {
		t.Errorf("%d of %d concurrent deliveries of one payload recorded, want 1", recorded, n)
	}
	if got := len(readLedger(t, s, "s1", 100)); got != before+1 {
		t.Errorf("%d lines after the deliveries, want %d", got, before+1)
	}
}
