package turn

import (
	"container/list"
	"hash/maphash"
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

// recentIDsSize bounds the ids recentIDs remembers: the last second or so
// of turns at full load, well over a minute at a few turns per second; under
// 1 MB. A repost after that reruns its reads once (see submitReads).
const recentIDsSize = 8192

// recentIDs remembers, first in first out, turn ids recorded and call ids
// answered in their sessions, as this process saw them written. It is a
// hint, never the authority: an id once taken or answered stays so (nothing
// deletes turns or results), so a remembered id is certainly taken; one not
// remembered may be too (written by another replica, or forgotten), which
// RecordTurn's own check catches. submitReads sends a turn with a
// remembered id the ordinary way at once, so that a repost or a repeated
// call id seen here runs no tool again.
type recentIDs struct {
	mu   sync.Mutex
	seed maphash.Seed
	// The ids' hashes, not the ids: a map of integers is cheaper to keep
	// and probe. Two ids with one hash would make one look remembered when
	// only the other is, sending its turn the ordinary way: slower, never
	// wrong. 0 marks an empty slot of ring.
	set  map[uint64]struct{}
	ring []uint64
	next int
}

type recentID struct {
	session string
	call    bool // a call id; else a turn id
	id      string
}

func newRecentIDs(size int) *recentIDs {
	return &recentIDs{seed: maphash.MakeSeed(), set: make(map[uint64]struct{}, size), ring: make([]uint64, size)}
}

func (r *recentIDs) hash(id recentID) uint64 {
	return max(maphash.Comparable(r.seed, id), 1)
}

// add remembers ids, forgetting the oldest when full.
func (r *recentIDs) add(ids ...recentID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range ids {
		h := r.hash(id)
		if _, ok := r.set[h]; ok {
			continue
		}
		if old := r.ring[r.next]; old != 0 {
			delete(r.set, old)
		}
		r.ring[r.next] = h
		r.set[h] = struct{}{}
		r.next = (r.next + 1) % len(r.ring)
	}
}

// known reports whether turn t's id, or one of its call ids, is remembered.
func (r *recentIDs) known(t Turn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.set[r.hash(recentID{session: t.SessionID, id: t.ID})]; ok {
		return true
	}
	for _, c := range t.Calls {
		if _, ok := r.set[r.hash(recentID{session: t.SessionID, call: true, id: c.ID})]; ok {
			return true
		}
	}
	return false
}

// answeredIDs lists the call ids that results answer (Answered's
// predicate: a final status; a replay's call id is answered by the turn it
// replays).
func answeredIDs(session string, results []Result) []recentID {
	var ids []recentID
	for _, res := range results {
		if res.Status.Final() {
			ids = append(ids, recentID{session: session, call: true, id: res.CallID})
		}
	}
	return ids
}
