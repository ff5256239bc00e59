package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/turnd/turnd/turn"
)

// pageAll reads a listing to its end, limit rows a page, and returns the
// rows' ids in order; it fails on a page longer than limit or a listing
// that does not end.
func pageAll[T any](t *testing.T, what string, limit int, list func(turn.Cursor) ([]T, error), pos func(T) (turn.Cursor, string)) []string {
	t.Helper()
	var ids []string
	var after turn.Cursor
	for range 100 {
		page, err := list(after)
		must(t, what, err)
		if len(page) > limit {
			t.Fatalf("%s: a page of %d rows, limit %d", what, len(page), limit)
		}
		if len(page) == 0 {
			return ids
		}
		for _, row := range page {
			c, id := pos(row)
			ids = append(ids, id)
			after = c
		}
		// The cursor survives its token form.
		parsed, err := turn.ParseCursor(after.String())
		must(t, "ParseCursor", err)
		after = parsed
	}
	t.Fatalf("%s: the listing did not end", what)
	return nil
}

func testListSessions(t *testing.T, s turn.Store) {
	// Sessions created at distinct times and two at the same time (the id
	// breaks the tie), listed newest first.
	created := map[string]time.Duration{"s-a": 0, "s-b": time.Minute, "s-c": 2 * time.Minute, "s-d": 2 * time.Minute, "s-e": 3 * time.Minute}
	for id, d := range created {
		sess := session(id)
		sess.CreatedAt = base.Add(d)
		must(t, "CreateSession "+id, s.CreateSession(ctx(t), sess))
	}
	want := []string{"s-e", "s-d", "s-c", "s-b", "s-a"}
	for _, limit := range []int{1, 2, 5, 10} {
		got := pageAll(t, "ListSessions", limit, func(c turn.Cursor) ([]turn.SessionSummary, error) {
			return s.ListSessions(ctx(t), c, limit)
		}, func(r turn.SessionSummary) (turn.Cursor, string) {
			return turn.Cursor{At: r.CreatedAt, ID: r.ID}, r.ID
		})
		same(t, fmt.Sprintf("sessions by pages of %d", limit), got, want)
	}

	// s-b gets a settled turn and a waiting one with two parked calls.
	r := receive("s-b", "t1", "owner-a")
	r.Line.At = base.Add(10 * time.Minute)
	mustReceive(t, s, r)
	waitingTurn(t, s, "s-b", "t2", 2) // its last line is at base+1s
	page, err := s.ListSessions(ctx(t), turn.Cursor{}, 10)
	must(t, "ListSessions", err)
	for _, sum := range page {
		switch sum.ID {
		case "s-b":
			same(t, "s-b turns", sum.Turns, int64(2))
			same(t, "s-b pending", sum.Pending, int64(2))
			same(t, "s-b last activity", sum.LastActivity, normTime(base.Add(time.Second)))
			want := session("s-b")
			want.CreatedAt = base.Add(time.Minute)
			same(t, "s-b session", sum.Session, wantSession(want))
		case "s-a":
			same(t, "s-a counts", [2]int64{sum.Turns, sum.Pending}, [2]int64{0, 0})
			same(t, "s-a last activity (its creation)", sum.LastActivity, normTime(base))
		}
	}
}

func testListTurns(t *testing.T, s turn.Store) {
	// Turns received at distinct times and two at the same time; one left
	// running, the others waiting with one parked call each.
	created := []struct {
		id string
		d  time.Duration
	}{{"t-a", 0}, {"t-b", time.Second}, {"t-c", time.Second}, {"t-d", 2 * time.Second}}
	for i, c := range created {
		r := receiveCalls("s", c.id, "owner-a", 3)
		r.Turn.CreatedAt = base.Add(c.d)
		mustReceive(t, s, r)
		if i > 0 {
			k := issue(t, s, "s", c.id, 1)
			must(t, "Commit waiting "+c.id, s.Commit(ctx(t), parkCommit("s", c.id, "owner-a", turn.StatusWaiting, k)))
		}
	}
	mustReceive(t, s, receive("other", "t-z", "owner-a"))

	list := func(limit int, status turn.Status) []string {
		return pageAll(t, "ListTurns", limit, func(c turn.Cursor) ([]turn.TurnSummary, error) {
			return s.ListTurns(ctx(t), "s", c, limit, status)
		}, func(r turn.TurnSummary) (turn.Cursor, string) {
			return turn.Cursor{At: r.CreatedAt, ID: r.ID}, r.ID
		})
	}
	for _, limit := range []int{1, 3, 10} {
		same(t, fmt.Sprintf("turns by pages of %d", limit), list(limit, ""), []string{"t-d", "t-c", "t-b", "t-a"})
	}
	same(t, "waiting turns", list(2, turn.StatusWaiting), []string{"t-d", "t-c", "t-b"})
	same(t, "running turns", list(2, turn.StatusRunning), []string{"t-a"})
	same(t, "completed turns", list(2, turn.StatusCompleted), []string(nil))

	page, err := s.ListTurns(ctx(t), "s", turn.Cursor{}, 1, "")
	must(t, "ListTurns", err)
	same(t, "newest turn", page, []turn.TurnSummary{{
		SessionID: "s", ID: "t-d", Status: turn.StatusWaiting, Calls: 3, Pending: 1, CreatedAt: normTime(base.Add(2 * time.Second)),
	}})
	none, err := s.ListTurns(ctx(t), "nobody", turn.Cursor{}, 10, "")
	must(t, "ListTurns of an unknown session", err)
	same(t, "turns of an unknown session", len(none), 0)
}

func testListParked(t *testing.T, s turn.Store) {
	waitingTurn(t, s, "s-1", "t-1", 2)
	waitingTurn(t, s, "s-2", "t-2", 1)
	// An issued key (its call not parked yet) is not listed.
	mustReceive(t, s, receiveCalls("s-3", "t-3", "owner-a", 1))
	issue(t, s, "s-3", "t-3", 0)

	want := []string{"s-2/t-2/0", "s-1/t-1/1", "s-1/t-1/0"}
	for _, limit := range []int{1, 2, 5} {
		got := pageAll(t, "ListParked", limit, func(c turn.Cursor) ([]turn.ParkedCall, error) {
			return s.ListParked(ctx(t), c, limit)
		}, func(p turn.ParkedCall) (turn.Cursor, string) {
			return p.Cursor(), fmt.Sprintf("%s/%s/%d", p.SessionID, p.TurnID, p.CallIndex)
		})
		same(t, fmt.Sprintf("parked calls by pages of %d", limit), got, want)
	}
	page, err := s.ListParked(ctx(t), turn.Cursor{}, 1)
	must(t, "ListParked", err)
	c := parked(completion("s-2", "t-2", 0), parkOf(completion("s-2", "t-2", 0)))
	same(t, "parked call", page, []turn.ParkedCall{{
		SessionID: "s-2", TurnID: "t-2", CallIndex: 0, CallID: c.CallID, CallName: c.CallName,
		Deadline: normTime(c.Deadline), HeartbeatTimeout: c.HeartbeatTimeout, HeartbeatDeadline: normTime(c.HeartbeatDeadline),
		OnTimeout: c.OnTimeout, OnCancel: c.OnCancel, CreatedAt: normTime(base),
	}})
}
