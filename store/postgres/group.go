package postgres

import (
	"context"
	"sync"
)

// group runs the calls of one kind that arrive while statements of that
// kind run as one statement, next: concurrent turns share the statement's
// round trip, its per-statement work in the server and, for writes, its
// commit and WAL flush. Up to par statements of a group run at a time
// (Options.GroupStatements): a lone call runs at once, but while one
// statement runs another starts only once wait calls wait (default a
// quarter of a full batch, max), and otherwise the waiting calls go with
// the running statement's next batch. The same holds for a statement that
// ends while another runs: its runner takes the next batch only when wait
// calls wait, and otherwise leaves them to the other statement's runner
// (or to the caller that makes them wait). Each statement has a fixed cost
// in the server besides its rows, so batches should be large; yet a
// statement waiting for its WAL flush should not hold up a queue that
// another could write meanwhile.
// (With 32 clients on 2 cores, starting a second recording statement at
// once made batches of 7 and cost a fifth more database CPU per turn than
// waiting for 16 calls, for fewer turns/s. Once the recording statement's
// fixed cost fell by about a third, waiting for 8 gave 0.308 of the INSERT
// rate against 0.293 for 16 over nine alternated runs, and waiting for 4
// less than 8. Once an ending statement's runner also waited instead of
// taking whatever waited, waiting for 12 made recordings grow from 8.2 to
// 10.6 turns a statement and workload 1 run 5% more turns/s than before
// (8 of 10 alternated runs higher); 16 gave 12.4 turns a statement and 4%
// more than 12 (6 of 8), 24 no more than 16 (2 of 8, more idle cores):
// see newRecorder.)
//
// A caller that may lead (see do) runs a batch (which holds its own call
// unless key kept it out) and, when more calls are queued, hands them to a
// goroutine that runs batches until none can be taken (or, beside another
// statement, until fewer than wait wait: see take), so that the leader
// is not kept waiting for calls that came after its own. exec must answer
// every call of its batch.
//
// The price of leaving calls to the other statement: they wait for it to
// end, however long it takes. A statement that fails as a whole and is
// retried call by call (recordBatch) holds them for all of its retries;
// and below wait waiting calls a second statement never starts, so that
// a light load runs one statement at a time.
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
// and wait calls wait. Statements run under ctx without its
// cancellation: once queued, a call is answered.
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
