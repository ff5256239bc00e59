package dispatch

import (
	"context"
	"sync"
)

// Gate bounds how many runs hold it at once, across every wave that uses
// it: a tool's max_concurrency. Places are taken in the order Reserve is
// called, and a wave reserves its calls' first gate in call order, so the
// calls waiting for a gate start in call order.
type Gate interface {
	// Reserve takes a place in the gate's queue at once, without waiting.
	Reserve() Ticket
}

// Ticket is one reserved place in a Gate's queue.
type Ticket interface {
	// Wait blocks until the place is granted or ctx is done (then it
	// returns the context's cause and the place is given up).
	Wait(ctx context.Context) error
	// Release gives the place back, granted or not. It is idempotent.
	Release()
}

// fifo is the queue behind a gate: at most limit tickets granted, the rest
// waiting in reservation order. Its fields are under mu, which a LimitSet
// shares among the gates of its keys.
type fifo struct {
	mu      *sync.Mutex
	limit   int
	active  int
	waiting []*ticket
	// refs counts the tickets not yet released (LimitSet only: at zero the
	// key's queue is dropped).
	refs int
	set  *LimitSet
	key  string
}

type ticket struct {
	q        *fifo
	granted  bool
	released bool
	ready    chan struct{} // closed when granted
}

// reserve queues a ticket, granting it at once when there is room. It
// needs q.mu.
func (q *fifo) reserve() *ticket {
	t := &ticket{q: q}
	q.refs++
	if q.active < q.limit && len(q.waiting) == 0 {
		q.active++
		t.granted = true
		return t
	}
	t.ready = make(chan struct{})
	q.waiting = append(q.waiting, t)
	return t
}

// Wait implements Ticket.
func (t *ticket) Wait(ctx context.Context) error {
	t.q.mu.Lock()
	granted, ready := t.granted, t.ready
	t.q.mu.Unlock()
	if granted {
		return nil
	}
	select {
	case <-ready:
		return nil
	case <-ctx.Done():
		t.q.mu.Lock()
		granted = t.granted
		t.q.mu.Unlock()
		if granted {
			// Granted as the context ended: the run may go on, the caller
			// chooses; report the grant so the place is not lost.
			return nil
		}
		t.Release()
		return context.Cause(ctx)
	}
}

// Release implements Ticket.
func (t *ticket) Release() {
	q := t.q
	q.mu.Lock()
	defer q.mu.Unlock()
	if t.released {
		return
	}
	t.released = true
	q.refs--
	if t.granted {
		q.active--
		for q.active < q.limit && len(q.waiting) > 0 {
			next := q.waiting[0]
			q.waiting[0] = nil
			q.waiting = q.waiting[1:]
			q.active++
			next.granted = true
			close(next.ready)
		}
	} else {
		for i, w := range q.waiting {
			if w == t {
				q.waiting = append(q.waiting[:i], q.waiting[i+1:]...)
				break
			}
		}
	}
	if q.set != nil && q.refs == 0 {
		delete(q.set.queues, q.key)
	}
}

// Limit is a Gate of its own: a process-wide cap. The zero value is not
// usable; see NewLimit.
type Limit struct {
	mu sync.Mutex
	q  fifo
}

// NewLimit returns a gate that n runs may hold at once (n < 1 counts as 1).
func NewLimit(n int) *Limit {
	l := &Limit{}
	l.q = fifo{mu: &l.mu, limit: max(n, 1)}
	return l
}

// Reserve implements Gate.
func (l *Limit) Reserve() Ticket {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.q.reserve()
}

// Cap is the number of runs that may hold the gate at once.
func (l *Limit) Cap() int { return l.q.limit }

// LimitSet is a cap per key (a session id): each key's runs are bounded
// by it alone. A key's queue lives while a ticket of it is held, so idle
// keys cost nothing.
type LimitSet struct {
	mu     sync.Mutex
	limit  int
	queues map[string]*fifo
}

// NewLimitSet returns a set whose every key admits n runs at once (n < 1
// counts as 1).
func NewLimitSet(n int) *LimitSet {
	return &LimitSet{limit: max(n, 1), queues: make(map[string]*fifo)}
}

// For returns the gate of key.
func (s *LimitSet) For(key string) Gate { return keyGate{s, key} }

// Cap is the number of runs of one key that may hold it at once.
func (s *LimitSet) Cap() int { return s.limit }

// keys reports how many keys have a queue (for tests: idle keys must not).
func (s *LimitSet) keys() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queues)
}

type keyGate struct {
	s   *LimitSet
	key string
}

// Reserve implements Gate.
func (g keyGate) Reserve() Ticket {
	s := g.s
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queues[g.key]
	if q == nil {
		q = &fifo{mu: &s.mu, limit: s.limit, set: s, key: g.key}
		s.queues[g.key] = q
	}
	return q.reserve()
}
