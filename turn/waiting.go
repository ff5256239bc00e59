package turn

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"
)

// waitSet is the turns that WaitSettled waits on in this process, with
// how many waiters each has. One loop reads them together once a second
// (pollWaiting), in place of a read a second by each waiter: a thousand
// waiters cost one statement a second rather than a thousand round trips
// (ARCHITECTURE.md, "Deliveries"). A delivery here that settles a turn
// waited on leaves its waiters what it changed (settledHere), so that they
// answer without reading the turn again.
type waitSet struct {
	mu   sync.Mutex
	keys map[TurnKey]*waiters
}

// waiters are the waiters of one turn.
type waiters struct {
	n       int
	settled *settledHere // nil: no delivery here settled the turn
}

// settledHere is what a delivery that settled its turn changed: its
// call's result, recorded as the store holds it, and the turn's status and
// settled_at.
type settledHere struct {
	result Result
	status Status
	at     time.Time
}

// settledBy is what b, a batch that settled its turn, changed when it
// resolved one call and wrote its result: that result as stored, the
// status and settled_at; ok is false for any other batch.
func settledBy(b ResolveBatch) (h settledHere, ok bool) {
	if len(b.Items) != 1 || b.Items[0].KeepResult {
		return settledHere{}, false
	}
	return settledHere{result: b.Items[0].Result.stored(), status: b.SettleStatus, at: b.Now}, true
}

// add counts a waiter of k until the returned function is called.
func (w *waitSet) add(k TurnKey) (remove func()) {
	w.mu.Lock()
	if w.keys == nil {
		w.keys = make(map[TurnKey]*waiters)
	}
	e := w.keys[k]
	if e == nil {
		e = &waiters{}
		w.keys[k] = e
	}
	e.n++
	w.mu.Unlock()
	return func() {
		w.mu.Lock()
		if e.n--; e.n <= 0 && w.keys[k] == e {
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

// settle keeps what a delivery that settled k changed, when k is waited on
// here; call it after the write committed and before the waiters are woken.
func (w *waitSet) settle(k TurnKey, h settledHere) {
	w.mu.Lock()
	if e := w.keys[k]; e != nil {
		e.settled = &h
	}
	w.mu.Unlock()
}

// settledTurn is t, a waiter's last read of k, as the delivery here that
// settled k left it, when t is the turn as it was just before that
// delivery: waiting, the settled call its one call pending, every other
// call answered. Answered calls never change again, and the settling write
// saw no other call open, so t and the delivery's changes are then the
// whole settled turn; else (ok false) the waiter reads the turn.
func (w *waitSet) settledTurn(k TurnKey, t Turn) (Turn, bool) {
	w.mu.Lock()
	var h *settledHere
	if e := w.keys[k]; e != nil {
		h = e.settled
	}
	w.mu.Unlock()
	if h == nil || t.Status != StatusWaiting || !t.SettledAt.IsZero() || len(t.Results) != len(t.Calls) {
		return Turn{}, false
	}
	at := -1
	for j, r := range t.Results {
		switch {
		case r.Index == h.result.Index && r.CallID == h.result.CallID && r.Status == CallPending:
			at = j
		case r.Status == CallPending || !r.Status.Final():
			return Turn{}, false
		}
	}
	if at < 0 {
		return Turn{}, false
	}
	out := t
	out.Results = slices.Clone(t.Results)
	out.Results[at] = h.result
	out.Status, out.SettledAt = h.status, h.at
	return out, true
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
