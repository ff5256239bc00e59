package turn

import (
	"fmt"
	"testing"
)

func TestSessionCacheEvictsLeastRecentlyUsed(t *testing.T) {
	t.Parallel()
	c := newSessionCache(3)
	for i := range 3 {
		c.put(Session{ID: fmt.Sprintf("s%d", i), CallbackURL: fmt.Sprintf("https://cb/%d", i)})
	}
	if _, ok := c.get("s0"); !ok { // s0 becomes the most recently used
		t.Fatal("s0 not cached")
	}
	c.put(Session{ID: "s3"}) // evicts s1, the least recently used
	if _, ok := c.get("s1"); ok {
		t.Error("s1 still cached after an eviction")
	}
	for _, id := range []string{"s0", "s2", "s3"} {
		if got, ok := c.get(id); !ok || got.ID != id {
			t.Errorf("get(%s) = %+v, %v", id, got, ok)
		}
	}
	if got, _ := c.get("s0"); got.CallbackURL != "https://cb/0" {
		t.Errorf("s0 cached as %+v", got)
	}
	// Putting a cached id again replaces it without growing.
	c.put(Session{ID: "s2", CallbackURL: "https://cb/again"})
	if got, _ := c.get("s2"); got.CallbackURL != "https://cb/again" || c.len() != 3 {
		t.Errorf("after a second put: %+v, %d cached", got, c.len())
	}
	c.forget("s2")
	c.forget("unknown")
	if _, ok := c.get("s2"); ok || c.len() != 2 {
		t.Errorf("after forget: s2 cached %v, %d cached", ok, c.len())
	}
}

func TestRecentIDsForgetsOldestFirst(t *testing.T) {
	t.Parallel()
	r := newRecentIDs(3)
	tu := func(sid, tid string, callIDs ...string) Turn {
		t := Turn{SessionID: sid, ID: tid}
		for _, id := range callIDs {
			t.Calls = append(t.Calls, Call{ID: id})
		}
		return t
	}
	r.add(recentID{session: "s1", id: "t1"})
	r.add(answeredIDs("s1", []Result{
		{CallID: "a", Status: CallOK},
		{CallID: "started", Status: CallStarted}, // not an answer
		{CallID: "p", Status: CallPending},
	})...)
	for _, tc := range []struct {
		turn Turn
		want bool
	}{
		{tu("s1", "t1"), true},             // turn id taken
		{tu("s1", "t2", "x", "a"), true},   // a call id answered
		{tu("s1", "t2", "p"), true},        // pending counts
		{tu("s1", "t2", "started"), false}, // only started
		{tu("s2", "t1", "a"), false},       // another session's
		{tu("s1", "a"), false},             // a call id is not a turn id
	} {
		if got := r.known(tc.turn); got != tc.want {
			t.Errorf("known(%+v) = %v, want %v", tc.turn, got, tc.want)
		}
	}
	// Full (t1, a, p): adding again changes nothing; one more forgets t1.
	r.add(recentID{session: "s1", call: true, id: "a"})
	if !r.known(tu("s1", "t1")) {
		t.Error("t1 forgotten by re-adding a remembered id")
	}
	r.add(recentID{session: "s1", id: "t9"})
	if r.known(tu("s1", "t1")) || !r.known(tu("s1", "t9")) || !r.known(tu("s1", "x", "a")) {
		t.Error("not first in, first out")
	}
}

// len returns how many sessions c holds.
func (c *sessionCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
