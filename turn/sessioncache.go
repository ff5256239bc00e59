package turn

import (
	"container/list"
	"sync"
)

// sessionCacheSize bounds the sessions a Service keeps in memory.
const sessionCacheSize = 4096

// sessionCache keeps recently used sessions, least recently used evicted
// first, so that a turn of reads needs no read of the store to know its
// session's grants, budget and callback URL (see submitReads).
//
// No invalidation is needed, in this process or across replicas sharing a
// store: a session is immutable once created — only its ledger sequence
// (sessions.last_seq, not part of Session) moves, and nothing deletes a
// session or a turn. A cached Session is therefore the stored one for as
// long as the process lives. Only values read from the store (or returned
// by it as stored) are put in, never a session as requested.
type sessionCache struct {
	mu    sync.Mutex
	max   int
	order *list.List // of Session, most recently used first
	byID  map[string]*list.Element
}

func newSessionCache(max int) *sessionCache {
	return &sessionCache{max: max, order: list.New(), byID: make(map[string]*list.Element)}
}

// get returns the cached session id, if any.
func (c *sessionCache) get(id string) (Session, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byID[id]
	if !ok {
		return Session{}, false
	}
	c.order.MoveToFront(e)
	return e.Value.(Session), true
}

// put caches sess, evicting the least recently used session when full.
func (c *sessionCache) put(sess Session) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byID[sess.ID]; ok {
		e.Value = sess
		c.order.MoveToFront(e)
		return
	}
	c.byID[sess.ID] = c.order.PushFront(sess)
	for c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.byID, last.Value.(Session).ID)
	}
}

// forget drops id (a store that no longer has it: a cache is only ever
// a shortcut, never the authority on whether a session exists).
func (c *sessionCache) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byID[id]; ok {
		c.order.Remove(e)
		delete(c.byID, id)
	}
}

func (c *sessionCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
