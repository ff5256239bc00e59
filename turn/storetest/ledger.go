package storetest

import (
	"fmt"
	"testing"

	"github.com/turnd/turnd/turn"
)

func testLedgerPaging(t *testing.T, s turn.Store) {
	r := receive("s1", "t1", "owner-a")
	mustReceive(t, s, r)
	want := []turn.Line{wantLine(r.Line, 1, "s1")}
	c := commit("s1", "t1", "owner-a")
	for i := range 9 {
		l := line("t1", fmt.Sprintf("t1-c%d", i%2), turn.LineCallAdmitted, fmt.Sprintf(`{"i":%d}`, i))
		c.Lines = append(c.Lines, l)
		want = append(want, wantLine(l, int64(i+2), "s1"))
	}
	must(t, "Commit", s.Commit(ctx(t), c))

	tests := []struct {
		after      int64
		limit      int
		start, end int // want[start:end]
	}{
		{0, 4, 0, 4},
		{4, 4, 4, 8},
		{8, 4, 8, 10},
		{0, 100, 0, 10},
		{3, 1, 3, 4},
		{10, 4, 10, 10},
		{99, 4, 10, 10},
		{-5, 2, 0, 2},
	}
	for _, tt := range tests {
		got, err := s.Ledger(ctx(t), "s1", tt.after, tt.limit, turn.MaxPageBytes)
		must(t, fmt.Sprintf("Ledger after %d limit %d", tt.after, tt.limit), err)
		if got == nil {
			t.Errorf("Ledger after %d limit %d: nil, want a non-nil (possibly empty) slice", tt.after, tt.limit)
		}
		same(t, fmt.Sprintf("Ledger after %d limit %d", tt.after, tt.limit), got, append([]turn.Line{}, want[tt.start:tt.end]...))
	}
}

func testLedgerNotFound(t *testing.T, s turn.Store) {
	_, err := s.Ledger(ctx(t), "nope", 0, 10, turn.MaxPageBytes)
	isErr(t, "Ledger of an unknown session", err, turn.ErrNotFound)

	// A session without lines is found and empty.
	must(t, "CreateSession", s.CreateSession(ctx(t), session("empty")))
	lines, err := s.Ledger(ctx(t), "empty", 0, 10, turn.MaxPageBytes)
	must(t, "Ledger of an empty session", err)
	if len(lines) != 0 || lines == nil {
		t.Errorf("Ledger of an empty session = %#v, want an empty slice", lines)
	}
}
