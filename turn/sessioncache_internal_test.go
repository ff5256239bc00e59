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
