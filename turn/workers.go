package turn

import (
	"sync"
	"sync/atomic"
)

// maxIdleWorkers bounds the goroutines kept waiting for a wave.
const maxIdleWorkers = 128

// workers runs waves on goroutines kept from one wave to the next. A wave's
// goroutine goes deep (the dispatcher, the budget, the recording), so a
// fresh goroutine grows its stack on every turn, copying it and adjusting
// every frame on the way; a kept one has grown already (until a garbage
// collection shrinks it while it waits). Up to maxIdleWorkers wait, the
// most recently used first; close ends them, and the busy ones as they
// finish.
type workers struct {
	mu     sync.Mutex
	idle   []chan func()
	closed bool
	live   atomic.Int64 // goroutines started and not ended
}

// run runs f on a kept goroutine, or on a new one when none waits.
func (w *workers) run(f func()) {
	w.mu.Lock()
	if n := len(w.idle); n > 0 {
		ch := w.idle[n-1]
		w.idle[n-1] = nil
		w.idle = w.idle[:n-1]
		w.mu.Unlock()
		ch <- f // buffered: the worker may not be receiving yet
		return
	}
	w.mu.Unlock()
	w.live.Add(1)
	go w.work(make(chan func(), 1), f)
}

func (w *workers) work(ch chan func(), f func()) {
	defer w.live.Add(-1)
	for {
		f()
		f = nil // keep nothing of the wave while waiting
		w.mu.Lock()
		if w.closed || len(w.idle) >= maxIdleWorkers {
			w.mu.Unlock()
			return
		}
		w.idle = append(w.idle, ch)
		w.mu.Unlock()
		var ok bool
		if f, ok = <-ch; !ok {
			return
		}
	}
}

// close ends the waiting goroutines and keeps no more. A run after close
// still runs, on a goroutine that then ends.
func (w *workers) close() {
	w.mu.Lock()
	w.closed = true
	idle := w.idle
	w.idle = nil
	w.mu.Unlock()
	for _, ch := range idle {
		close(ch)
	}
}
