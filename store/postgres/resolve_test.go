package postgres_test

import (
	"errors"
	"testing"
	"time"

	"github.com/turnd/turnd/internal/pgtest"
	"github.com/turnd/turnd/turn"
	"github.com/turnd/turnd/turn/storetest"
)

// TestResolveTogether: resolutions of several sessions' turns in one
// transaction (the resolver's group commit) each get their own answer: a
// mismatch and an unknown turn among them write nothing and fail alone,
// the others resolve and settle their turns.
func TestResolveTogether(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t)
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Microsecond)
	var cs []turn.Completion
	for _, sid := range []string{"s1", "s2", "s3"} {
		cs = append(cs, storetest.WaitingTurn(t, s, sid, "t1", 1)[0])
	}
	two := storetest.WaitingTurn(t, s, "s4", "t1", 2)
	bs := []turn.ResolveBatch{
		storetest.Delivered(cs[0], `"a"`, now),
		storetest.Delivered(cs[1], `"b"`, now),
		storetest.Delivered(cs[2], `"c"`, now),
		storetest.Delivered(two[0], `"d"`, now),
	}
	bs[1].Items[0].Expect = turn.CompletionEarly // it is pending
	bs[2].Key.TurnID = "nope"
	settled, errs := s.ResolveTogether(ctx, bs)
	if errs[0] != nil || !settled[0] {
		t.Errorf("the first: settled %v, %v", settled[0], errs[0])
	}
	if !errors.Is(errs[1], turn.ErrCompletionState) {
		t.Errorf("a mismatch: %v, want ErrCompletionState", errs[1])
	}
	if !errors.Is(errs[2], turn.ErrNotFound) {
		t.Errorf("an unknown turn: %v, want ErrNotFound", errs[2])
	}
	if errs[3] != nil || settled[3] {
		t.Errorf("one of two parked calls: settled %v, %v; want resolved, not settled", settled[3], errs[3])
	}
	for i, want := range []turn.Status{turn.StatusCompleted, turn.StatusWaiting, turn.StatusWaiting, turn.StatusWaiting} {
		got, err := s.GetTurn(ctx, turn.TurnKey{SessionID: cs[0].SessionID[:1] + string(rune('1'+i)), TurnID: "t1"})
		if err != nil || got.Status != want {
			t.Errorf("turn s%d/t1: %v %v, want %s", i+1, got.Status, err, want)
		}
	}
	c, err := s.GetCompletion(ctx, "s2", cs[1].KeyHash)
	if err != nil || c.Status != turn.CompletionPending {
		t.Errorf("the mismatched completion: %v %v, want pending", c.Status, err)
	}
	// The second call of s4's turn settles it, alone.
	settled, errs = s.ResolveTogether(ctx, []turn.ResolveBatch{storetest.Delivered(two[1], `"e"`, now)})
	if errs[0] != nil || !settled[0] {
		t.Errorf("the last parked call: settled %v, %v", settled[0], errs[0])
	}
}
