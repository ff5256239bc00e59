package storetest

import (
	"testing"
	"time"

	"github.com/turnd/turnd/turn"
)

func testAnswered(t *testing.T, s turn.Store) {
	// In session s1: t1 answers x and only starts y; t2 answers x again,
	// later, and replays z; t4 answers w twice, the earlier-finished result
	// under the higher index. In session s2, t3 answers z.
	res := func(tid string, idx int, callID string, status turn.CallStatus, finished time.Duration) turn.Result {
		r := result(tid, idx)
		r.CallID, r.Status = callID, status
		r.FinishedAt = base.Add(finished)
		return r
	}
	x1 := res("t1", 0, "x", turn.CallOK, 10*time.Second)
	y1 := res("t1", 1, "y", turn.CallStarted, 0)
	y1.FinishedAt = time.Time{}
	x2 := res("t2", 0, "x", turn.CallOK, 20*time.Second)
	x2.Output = []byte(`"second answer"`)
	z2 := res("t2", 1, "z", turn.CallOK, 20*time.Second)
	z2.ReplayedFrom = "t0"
	zOther := res("t3", 0, "z", turn.CallOK, 5*time.Second)
	wLate := res("t4", 0, "w", turn.CallFailed, 40*time.Second)
	wLate.Error = &turn.CallError{Code: "boom", Message: "late"}
	wEarly := res("t4", 1, "w", turn.CallPending, 30*time.Second)
	receiveAndCommit(t, s, "s1", "t1", x1, y1)
	receiveAndCommit(t, s, "s1", "t2", x2, z2)
	receiveAndCommit(t, s, "s2", "t3", zOther)
	receiveAndCommit(t, s, "s1", "t4", wLate, wEarly)

	got, err := s.Answered(ctx(t), "s1", []string{"x", "y", "z", "w", "unknown"})
	must(t, "Answered", err)
	answered := func(r turn.Result, tid string) turn.Result {
		r = wantResult(r)
		r.ReplayedFrom = tid
		return r
	}
	same(t, "answered", got, map[string]turn.Result{
		"x": answered(x1, "t1"),
		"w": answered(wEarly, "t4"),
	})

	got, err = s.Answered(ctx(t), "s2", []string{"z", "x"})
	must(t, "Answered s2", err)
	same(t, "answered in s2", got, map[string]turn.Result{"z": answered(zOther, "t3")})

	for _, ids := range [][]string{nil, {}} {
		got, err = s.Answered(ctx(t), "s1", ids)
		must(t, "Answered of no ids", err)
		if len(got) != 0 {
			t.Errorf("Answered of no ids = %v", got)
		}
	}
	got, err = s.Answered(ctx(t), "nope", []string{"x"})
	must(t, "Answered in an unknown session", err)
	if len(got) != 0 {
		t.Errorf("Answered in an unknown session = %v", got)
	}

	// A turn reads as its own results, in call order, whatever other turns
	// answered the same call ids, and a call id twice in one turn reads as
	// both of its results.
	for tid, want := range map[string][]turn.Result{"t1": {x1, y1}, "t2": {x2, z2}, "t4": {wLate, wEarly}} {
		tu, err := s.GetTurn(ctx(t), turn.TurnKey{SessionID: "s1", TurnID: tid})
		must(t, "GetTurn "+tid, err)
		for i := range want {
			want[i] = wantResult(want[i])
		}
		same(t, "results of "+tid, tu.Results, want)
	}
}
