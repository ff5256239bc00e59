package storetest

import (
	"testing"
	"time"

	"github.com/turnd/turnd/turn"
)

// GetOutput judges expiry by the wall clock, so this test's times are
// relative to now rather than to base.
func testOutputExpiry(t *testing.T, s turn.Store) {
	mustReceive(t, s, receive("s1", "t1", "owner-a"))
	now := time.Now()
	out := func(id string, expires time.Time) turn.Output {
		return turn.Output{ID: id, CallID: "t1-c0", ContentType: "text/plain", Data: []byte(id), CreatedAt: now.Add(-2 * time.Hour), ExpiresAt: expires}
	}
	c := commit("s1", "t1", "owner-a")
	c.Outputs = []turn.Output{
		out("expired", now.Add(-time.Hour)),
		out("expired-just", now.Add(-time.Millisecond)),
		out("live", now.Add(time.Hour)),
		out("forever", time.Time{}),
	}
	must(t, "Commit", s.Commit(ctx(t), c))

	for _, id := range []string{"expired", "expired-just", "unknown"} {
		_, err := s.GetOutput(ctx(t), "s1", id)
		isErr(t, "GetOutput "+id, err, turn.ErrNotFound)
	}
	for _, id := range []string{"live", "forever"} {
		_, err := s.GetOutput(ctx(t), "s1", id)
		must(t, "GetOutput "+id, err)
	}

	n, err := s.DeleteExpiredOutputs(ctx(t), now.Add(-30*time.Minute))
	must(t, "DeleteExpiredOutputs", err)
	if n != 1 {
		t.Errorf("DeleteExpiredOutputs deleted %d, want 1 (only the output expired before now-30m)", n)
	}
	n, err = s.DeleteExpiredOutputs(ctx(t), now.Add(2*time.Hour))
	must(t, "DeleteExpiredOutputs later", err)
	if n != 2 {
		t.Errorf("DeleteExpiredOutputs later deleted %d, want 2", n)
	}
	_, err = s.GetOutput(ctx(t), "s1", "live")
	isErr(t, "GetOutput of a deleted output", err, turn.ErrNotFound)
	got, err := s.GetOutput(ctx(t), "s1", "forever")
	must(t, "GetOutput forever", err)
	if !got.ExpiresAt.IsZero() {
		t.Errorf("ExpiresAt = %v, want zero", got.ExpiresAt)
	}
}
