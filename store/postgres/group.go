package postgres

import (
	"context"
	"sync"
)

// group runs the calls of one kind that arrive while a statement of that
// kind runs as one statement, next: concurrent turns share the statement's
// round trip, its per-statement work in the server and, for writes, its
// commit and WAL flush. At most one statement of a group runs at a time, so
// a batch forms while the previous statement runs; a lone call runs at once.
//
// The caller that finds no statement running leads: it runs the first batch
// (which holds its own call) and, when more calls queued meanwhile, hands
// them to a goroutine that runs batches until the queue is empty, so that
// the leader is not kept waiting for calls that came after its own. exec
// must answer every call of its batch.
type group[C any] struct {
	max int
	// distinct, when set, keys calls that must not share a statement (a
	// repeat waits for the next one).
	distinct func(C) any
	exec     func(ctx context.Context, batch []C)

	mu      sync.Mutex
	queue   []C
	running bool
}

// do queues c and, when no statement runs, leads. Statements run under
// ctx without its cancellation: once queued, a call is answered.
func (g *group[C]) do(ctx context.Context, c C) {
	g.mu.Lock()
	g.queue = append(g.queue, c)
	lead := !g.running
	g.running = true
	g.mu.Unlock()
	if !lead {
		return
	}
	ctx = context.WithoutCancel(ctx)
	g.exec(ctx, g.take())
	if next := g.take(); next != nil {
		go func() {
			for b := next; b != nil; b = g.take() {
				g.exec(ctx, b)
			}
		}()
	}
}

// take takes up to max queued calls, or returns nil and marks the group
// idle when none is queued.
func (g *group[C]) take() []C {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.queue) == 0 {
		g.running = false
		return nil
	}
	batch := make([]C, 0, min(len(g.queue), g.max))
	var seen map[any]bool
	if g.distinct != nil {
		seen = make(map[any]bool, cap(batch))
	}
	rest := g.queue[:0]
	for _, c := range g.queue {
		if len(batch) < g.max {
			if g.distinct == nil {
				batch = append(batch, c)
				continue
			}
			if k := g.distinct(c); !seen[k] {
				seen[k] = true
				batch = append(batch, c)
				continue
			}
		}
		rest = append(rest, c)
	}
	clear(g.queue[len(rest):])
	g.queue = rest
	return batch
}
