package storetest

import (
	"sync"
	"testing"
	"time"

	"github.com/turnd/turnd/turn"
)

// testCancelRequests: RequestCancel marks running turns only, keeps the
// first request, and changes neither the turn's state nor its lease;
// CancelRequested lists the requested running turns among the keys given,
// in their order.
func testCancelRequests(t *testing.T, s turn.Store) {
	now := base.Add(time.Hour)
	a := receiveLeased(t, s, "s1", "a", "owner-a", now.Add(time.Minute))
	b := receiveLeased(t, s, "s1", "b", "owner-a", now.Add(time.Minute))
	c := receiveLeased(t, s, "s2", "c", "owner-b", now.Add(time.Minute))
	unknown := turn.TurnKey{SessionID: "s1", TurnID: "nope"}

	got, err := s.CancelRequested(ctx(t), []turn.TurnKey{a, b, c})
	must(t, "CancelRequested before any request", err)
	if len(got) != 0 {
		t.Errorf("CancelRequested before any request = %v", got)
	}
	got, err = s.CancelRequested(ctx(t), nil)
	must(t, "CancelRequested of no keys", err)
	if len(got) != 0 {
		t.Errorf("CancelRequested of no keys = %v", got)
	}

	isErr(t, "RequestCancel of an unknown turn", s.RequestCancel(ctx(t), unknown, now), turn.ErrNotFound)
	isErr(t, "RequestCancel in an unknown session", s.RequestCancel(ctx(t), turn.TurnKey{SessionID: "nope", TurnID: "a"}, now), turn.ErrNotFound)

	before, err := s.GetTurn(ctx(t), c)
	must(t, "GetTurn", err)
	must(t, "RequestCancel c", s.RequestCancel(ctx(t), c, now))
	must(t, "RequestCancel a", s.RequestCancel(ctx(t), a, now))
	must(t, "RequestCancel a again", s.RequestCancel(ctx(t), a, now.Add(time.Second)))

	got, err = s.CancelRequested(ctx(t), []turn.TurnKey{c, unknown, b, a, c})
	must(t, "CancelRequested", err)
	same(t, "CancelRequested (in the order given, once each)", got, []turn.TurnKey{c, a})

	// The request changes neither the turn nor its lease.
	after, err := s.GetTurn(ctx(t), c)
	must(t, "GetTurn after the request", err)
	same(t, "turn after the request", gotTurn(after), gotTurn(before))
	lost, err := s.RenewLeases(ctx(t), "owner-a", now.Add(2*time.Minute), []turn.TurnKey{a, b})
	must(t, "RenewLeases", err)
	if len(lost) != 0 {
		t.Errorf("RenewLeases after a cancel request lost %v", lost)
	}
	must(t, "Commit by the owner after the request", s.Commit(ctx(t), commit("s1", "a", "owner-a")))

	// A turn that leaves status running is no longer listed: the owner
	// settled it (cancelled, or finished first), or it parked its calls.
	settle := commit("s1", "a", "owner-a")
	settle.Status, settle.SettledAt = turn.StatusCancelled, now
	must(t, "Commit cancelled", s.Commit(ctx(t), settle))
	wait := commit("s2", "c", "owner-b")
	wait.Status = turn.StatusWaiting
	must(t, "Commit waiting", s.Commit(ctx(t), wait))
	got, err = s.CancelRequested(ctx(t), []turn.TurnKey{a, b, c})
	must(t, "CancelRequested after the turns left running", err)
	if len(got) != 0 {
		t.Errorf("CancelRequested after the turns left running = %v", got)
	}

	// A request for a turn not running is no error and records nothing.
	must(t, "RequestCancel of a settled turn", s.RequestCancel(ctx(t), a, now))
	must(t, "RequestCancel of a waiting turn", s.RequestCancel(ctx(t), c, now))
	st, err := s.GetTurn(ctx(t), a)
	must(t, "GetTurn a", err)
	if st.Status != turn.StatusCancelled {
		t.Errorf("turn a is %s after a request on it settled, want cancelled", st.Status)
	}
}

// testCancelRequestsConcurrent: requests racing each other and the owner's
// commits all succeed, and the turn is listed once.
func testCancelRequestsConcurrent(t *testing.T, s turn.Store) {
	now := base.Add(time.Hour)
	k := receiveLeased(t, s, "s1", "t", "owner", now.Add(time.Minute))
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 8 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			errs <- s.RequestCancel(ctx(t), k, now.Add(time.Duration(i)*time.Millisecond))
		}()
		go func() {
			defer wg.Done()
			errs <- s.Commit(ctx(t), commit("s1", "t", "owner"))
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		must(t, "RequestCancel or Commit", err)
	}
	got, err := s.CancelRequested(ctx(t), []turn.TurnKey{k})
	must(t, "CancelRequested", err)
	same(t, "CancelRequested", got, []turn.TurnKey{k})
}

// testUnsettled: Unsettled lists the running and waiting turns among the
// keys given, in their order; settled and unknown turns are left out.
func testUnsettled(t *testing.T, s turn.Store) {
	running := receiveLeased(t, s, "s1", "run", "owner-a", base.Add(time.Hour))
	waitingTurn(t, s, "s1", "wait", 1)
	waiting := turn.TurnKey{SessionID: "s1", TurnID: "wait"}
	must(t, "RecordTurn", s.RecordTurn(ctx(t), record("s1", "done", 1)))
	settled := turn.TurnKey{SessionID: "s1", TurnID: "done"}
	unknown := turn.TurnKey{SessionID: "s9", TurnID: "run"}

	got, err := s.Unsettled(ctx(t), []turn.TurnKey{settled, waiting, unknown, running})
	must(t, "Unsettled", err)
	same(t, "Unsettled", got, []turn.TurnKey{waiting, running})
	got, err = s.Unsettled(ctx(t), nil)
	must(t, "Unsettled of no keys", err)
	if len(got) != 0 {
		t.Errorf("Unsettled of no keys = %v", got)
	}
}
