package postgres

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
)

// TestGroupSecondStatementWaits: a lone call runs at once; while a
// statement runs, the next starts only when wait calls wait (by default a
// quarter of a full batch), and the running statement's runner takes what
// waits otherwise.
func TestGroupSecondStatementWaits(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ max, wait int }{{8, 0}, {16, 2}} {
		t.Run(fmt.Sprintf("max=%d,wait=%d", c.max, c.wait), func(t *testing.T) {
			t.Parallel()
			testSecondStatementWaitsForTwo(t, c.max, c.wait)
		})
	}
}

// testSecondStatementWaitsForTwo runs TestGroupSecondStatementWaits for a
// group whose second statement starts when two calls wait.
func testSecondStatementWaitsForTwo(t *testing.T, maxBatch, wait int) {
	synctest.Test(t, func(t *testing.T) {
		type call struct {
			id   int
			done chan struct{}
		}
		release := make(chan struct{})
		var mu sync.Mutex
		var batches [][]int
		g := &group[*call, struct{}]{max: maxBatch, par: 2, wait: wait, exec: func(_ context.Context, batch []*call) {
			ids := make([]int, len(batch))
			for i, c := range batch {
				ids[i] = c.id
			}
			mu.Lock()
			batches = append(batches, ids)
			first := len(batches) == 1
			mu.Unlock()
			if first {
				<-release // the first statement runs until released
			}
			for _, c := range batch {
				close(c.done)
			}
		}}
		statements := func() int {
			synctest.Wait() // every goroutine of the test is blocked
			mu.Lock()
			defer mu.Unlock()
			return len(batches)
		}
		submit := func(id int) *call {
			c := &call{id: id, done: make(chan struct{})}
			go g.do(context.Background(), c)
			return c
		}
		first := submit(1)
		if n := statements(); n != 1 {
			t.Fatalf("%d statements for a lone call, want 1", n)
		}
		second := submit(2) // one waits: fewer than two
		if n := statements(); n != 1 {
			t.Fatalf("%d statements with one call waiting, want still 1", n)
		}
		third := submit(3) // two wait: a second statement takes both
		<-second.done
		<-third.done
		close(release)
		<-first.done
		fourth := submit(4) // nothing runs: at once again
		<-fourth.done
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if fmt.Sprint(batches) != "[[1] [2 3] [4]]" {
			t.Errorf("batches %v, want [[1] [2 3] [4]]", batches)
		}
	})
}

// heldCall is a call of a heldGroup.
type heldCall struct {
	id, key int
	done    chan struct{}
}

// heldGroup is a group (max 8, par 2) whose statements note their batches
// and whose nth statement runs until hold[n] is closed.
type heldGroup struct {
	g       *group[*heldCall, int]
	hold    map[int]chan struct{}
	mu      sync.Mutex
	batches [][]int
	calls   []*heldCall
}

func newHeldGroup(wait int, keyed bool, held ...int) *heldGroup {
	h := &heldGroup{hold: map[int]chan struct{}{}}
	for _, n := range held {
		h.hold[n] = make(chan struct{})
	}
	h.g = &group[*heldCall, int]{max: 8, par: 2, wait: wait, exec: func(_ context.Context, batch []*heldCall) {
		ids := make([]int, len(batch))
		for i, c := range batch {
			ids[i] = c.id
		}
		h.mu.Lock()
		h.batches = append(h.batches, ids)
		release := h.hold[len(h.batches)]
		h.mu.Unlock()
		if release != nil {
			<-release
		}
		for _, c := range batch {
			close(c.done)
		}
	}}
	if keyed {
		h.g.key = func(c *heldCall) int { return c.key }
	}
	return h
}

// ran waits until every goroutine of the bubble is blocked and says which
// batches ran.
func (h *heldGroup) ran() string {
	synctest.Wait()
	h.mu.Lock()
	defer h.mu.Unlock()
	return fmt.Sprint(h.batches)
}

// wantRan checks that the batches run so far are want, ending the test
// when they are not; when is what the test did last, if it says more than
// the batches.
func (h *heldGroup) wantRan(t *testing.T, want, when string) {
	t.Helper()
	if got := h.ran(); got != want {
		if when != "" {
			t.Fatalf("%s: batches %s, want %s", when, got, want)
		}
		t.Fatalf("batches %s, want %s", got, want)
	}
}

// submit queues a call on a goroutine of its own and waits until it
// blocks, so that calls queue in the order submitted.
func (h *heldGroup) submit(id, key int) {
	c := &heldCall{id: id, key: key, done: make(chan struct{})}
	h.calls = append(h.calls, c)
	go h.g.do(context.Background(), c)
	h.ran()
}

// finish waits for every call and checks that the group ended idle.
func (h *heldGroup) finish(t *testing.T) {
	t.Helper()
	for _, c := range h.calls {
		<-c.done
	}
	synctest.Wait()
	h.g.mu.Lock()
	defer h.g.mu.Unlock()
	if len(h.g.queue) != 0 || h.g.running != 0 || len(h.g.busy) != 0 {
		t.Errorf("after: %d queued, %d running, %d busy keys", len(h.g.queue), h.g.running, len(h.g.busy))
	}
}

// TestGroupEndedStatementLeavesFewCalls: when a statement ends while
// another runs, its runner leaves fewer than wait waiting calls to the
// other statement's runner instead of starting a statement for them; a
// runner that ends alone takes what waits.
func TestGroupEndedStatementLeavesFewCalls(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h := newHeldGroup(2, false, 1, 2)
		h.submit(1, 0)
		h.submit(2, 0)
		h.submit(3, 0) // two wait: a second statement
		h.wantRan(t, "[[1] [2 3]]", "")
		h.submit(4, 0) // one waits beside two statements
		close(h.hold[2])
		h.wantRan(t, "[[1] [2 3]]", "the second statement's runner took a lone waiting call")
		close(h.hold[1])
		h.finish(t)
		h.wantRan(t, "[[1] [2 3] [4]]", "")
	})
}

// TestGroupEndedStatementSkipsBusyKeys: a runner whose statement ended
// beside another takes the waiting calls whose keys are free when wait of
// them wait, and leaves a call whose key the other statement holds to that
// statement's runner.
func TestGroupEndedStatementSkipsBusyKeys(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h := newHeldGroup(2, true, 1, 2)
		h.submit(1, 1)
		h.submit(2, 2)
		h.submit(3, 3) // two wait: the second statement
		h.submit(4, 1) // key 1 is the first statement's
		h.submit(5, 4)
		h.wantRan(t, "[[1] [2 3]]", "")
		close(h.hold[2]) // two wait: its runner takes 5, not 4, then leaves
		h.wantRan(t, "[[1] [2 3] [5]]", "after the second statement")
		close(h.hold[1])
		h.finish(t)
		h.wantRan(t, "[[1] [2 3] [5] [4]]", "")
	})
}

// TestGroupKeyedCallsUnderLoad: with keyed calls and up to par statements,
// every call is answered once, no key is in two running statements or
// twice in one, and the group ends idle.
func TestGroupKeyedCallsUnderLoad(t *testing.T) {
	t.Parallel()
	for par := 1; par <= 3; par++ {
		t.Run(fmt.Sprint("par ", par), func(t *testing.T) {
			t.Parallel()
			type call struct {
				key  int
				done chan struct{}
			}
			var mu sync.Mutex
			busy := map[int]bool{}
			g := &group[*call, int]{max: 8, par: par, key: func(c *call) int { return c.key }}
			g.exec = func(_ context.Context, batch []*call) {
				mu.Lock()
				mine := map[int]bool{}
				for _, c := range batch {
					if busy[c.key] || mine[c.key] {
						t.Errorf("key %d in two statements at once or twice in one", c.key)
					}
					mine[c.key] = true
				}
				for k := range mine {
					busy[k] = true
				}
				mu.Unlock()
				mu.Lock()
				for k := range mine {
					delete(busy, k)
				}
				mu.Unlock()
				for _, c := range batch {
					close(c.done)
				}
			}
			var wg sync.WaitGroup
			for w := range 32 {
				wg.Go(func() {
					for i := range 100 {
						c := &call{key: (w + i) % 3, done: make(chan struct{})}
						g.do(context.Background(), c)
						<-c.done
					}
				})
			}
			wg.Wait()
			g.mu.Lock()
			defer g.mu.Unlock()
			if len(g.queue) != 0 || g.running != 0 || len(g.busy) != 0 {
				t.Errorf("after the load: %d queued, %d running, %d busy keys", len(g.queue), g.running, len(g.busy))
			}
		})
	}
}
