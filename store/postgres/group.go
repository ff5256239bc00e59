package postgres

import (
	"context"
	"sync"
)

// group runs the calls of one kind that arrive while statements of that
// kind run as one statement, next, up to par statements at a time: a lone
// call runs at once, a second statement starts only once wait calls wait,
// and otherwise the waiting calls go with a running statement's next
// batch. exec must answer every call of its batch; ARCHITECTURE.md
// ("store/postgres: statements") gives the reasons and the measurements.
type group[C any, K comparable] struct {
	max, par int
	// wait is how many calls must wait before a statement starts beside
	// a running one, and before a runner whose statement ended beside
	// another takes the next batch; 0 means max/4.
	wait int
	// key, when set, keys calls that must not be in two statements running
	// at once, nor twice in one: a call whose key is busy waits for the
	// statement holding it, whose runner takes it next.
	key  func(C) K
	exec func(ctx context.Context, batch []C)

	mu      sync.Mutex
	queue   []C
	running int
	busy    map[K]bool // keys of the calls in running statements
}

// do queues c and leads when no statement runs, or when fewer than par do
// and wait calls wait: a leader runs a batch, then hands the calls queued
// meanwhile to a goroutine that runs batches until none can be taken.
// Statements run under ctx without its cancellation: once queued, a call is
// answered.
func (g *group[C, K]) do(ctx context.Context, c C) {
	g.mu.Lock()
	g.queue = append(g.queue, c)
	lead := g.running == 0 || (g.running < g.par && len(g.queue) >= g.threshold())
	if lead {
		g.running++
	}
	g.mu.Unlock()
	if !lead {
		return
	}
	ctx = context.WithoutCancel(ctx)
	b := g.take(false)
	if b == nil {
		return
	}
	g.run(ctx, b)
	if next := g.take(true); next != nil {
		go func() {
			for b := next; b != nil; b = g.take(true) {
				g.run(ctx, b)
			}
		}()
	}
}

func (g *group[C, K]) threshold() int {
	if g.wait == 0 {
		return max(1, g.max/4)
	}
	return g.wait
}

func (g *group[C, K]) run(ctx context.Context, batch []C) {
	g.exec(ctx, batch)
	if g.key == nil {
		return
	}
	g.mu.Lock()
	for _, c := range batch {
		delete(g.busy, g.key(c))
	}
	g.mu.Unlock()
}

// take takes up to max queued calls whose keys are free, marking the keys
// busy, or returns nil and gives up the caller's running slot when it
// takes none. Calls it leaves keep their order. ended: the caller's
// statement just ended; while another statement runs, it then leaves fewer
// than wait queued calls to that statement's runner (or to a caller that
// finds wait calls queued) and gives up its slot, as a caller would not
// start a statement for them.
func (g *group[C, K]) take(ended bool) []C {
	g.mu.Lock()
	defer g.mu.Unlock()
	if ended && g.running > 1 && len(g.queue) < g.threshold() {
		g.running--
		return nil
	}
	var batch []C
	rest := g.queue[:0]
	for _, c := range g.queue {
		if len(batch) == g.max {
			rest = append(rest, c)
			continue
		}
		if g.key != nil {
			k := g.key(c)
			if g.busy[k] {
				rest = append(rest, c)
				continue
			}
			if g.busy == nil {
				g.busy = make(map[K]bool)
			}
			g.busy[k] = true
		}
		batch = append(batch, c)
	}
	clear(g.queue[len(rest):])
	g.queue = rest
	if len(batch) == 0 {
		g.running--
		return nil
	}
	return batch
}

// eachAlone runs exec for each call of batch alone when err, batch's
// failure as a whole (a deadlock with another writer, say), is set and
// batch holds several calls, so that one call's failure is not everyone's;
// it reports whether it did (the caller then answers nothing itself).
func eachAlone[C any](ctx context.Context, batch []C, err error, exec func(context.Context, []C)) bool {
	if err == nil || len(batch) < 2 {
		return false
	}
	for _, c := range batch {
		exec(ctx, []C{c})
	}
	return true
}
