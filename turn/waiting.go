package turn

import (
	"context"
	"maps"
	"slices"
	"sync"
)

// waitSet is the turns that WaitSettled waits on in this process, with
// how many waiters each has. One loop reads them together once a second
// (pollWaiting), in place of a read a second by each waiter: a thousand
// waiters cost one statement a second rather than a thousand round trips
// (ARCHITECTURE.md, "Deliveries").
type waitSet struct {
	mu   sync.Mutex
	keys map[TurnKey]int
}

// add counts a waiter of k until the returned function is called.
func (w *waitSet) add(k TurnKey) (remove func()) {
	w.mu.Lock()
	if w.keys == nil {
		w.keys = make(map[TurnKey]int)
	}
	w.keys[k]++
	w.mu.Unlock()
	return func() {
		w.mu.Lock()
		if w.keys[k]--; w.keys[k] <= 0 {
			delete(w.keys, k)
		}
		w.mu.Unlock()
	}
}

// list returns the turns waited on.
func (w *waitSet) list() []TurnKey {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Collect(maps.Keys(w.keys))
}

// pollChunk is the most turns one poll statement reads.
const pollChunk = 1000

// pollWaiting wakes the waiters of the turns waited on here that are no
// longer unsettled (settled, here or elsewhere, or gone), which then read
// their turn. When the store cannot tell, every waiter of the chunk reads
// its own turn, as it would have at its own poll.
func (s *Service) pollWaiting(ctx context.Context) {
	keys := s.waiting.list()
	for len(keys) > 0 {
		chunk := keys[:min(len(keys), pollChunk)]
		keys = keys[len(chunk):]
		unsettled, err := s.store.Unsettled(ctx, chunk)
		if err != nil {
			s.log.Warn("polling the turns waited on failed", "turns", len(chunk), "err", err)
			unsettled = nil
		}
		still := make(map[TurnKey]bool, len(unsettled))
		for _, k := range unsettled {
			still[k] = true
		}
		for _, k := range chunk {
			if !still[k] {
				s.note(k, false)
			}
		}
	}
}
