package postgres

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestGroupSecondStatementWaitsForAQuarter: a lone call runs at once; while
// a statement runs, the next starts only when a quarter of a full batch
// waits, and the running statement's runner takes what waits otherwise.
func TestGroupSecondStatementWaitsForAQuarter(t *testing.T) {
	t.Parallel()
	type call struct {
		id   int
		done chan struct{}
	}
	release := make(chan struct{})
	var mu sync.Mutex
	var batches [][]int
	started := make(chan int, 16)
	g := &group[*call]{max: 8, par: 2, exec: func(_ context.Context, batch []*call) {
		ids := make([]int, len(batch))
		for i, c := range batch {
			ids[i] = c.id
		}
		mu.Lock()
		batches = append(batches, ids)
		n := len(batches)
		mu.Unlock()
		started <- n
		if n == 1 {
			<-release // the first statement runs until released
		}
		for _, c := range batch {
			close(c.done)
		}
	}}
	var wg sync.WaitGroup
	submit := func(id int) *call {
		c := &call{id: id, done: make(chan struct{})}
		wg.Go(func() { g.do(context.Background(), c) })
		return c
	}
	wait := func(what string) int {
		t.Helper()
		select {
		case n := <-started:
			return n
		case <-time.After(10 * time.Second):
			t.Fatalf("no statement started: %s", what)
			return 0
		}
	}
	first := submit(1)
	wait("a lone call")
	// One call waits: fewer than a quarter of 8, no second statement.
	second := submit(2)
	select {
	case <-started:
		t.Fatal("a second statement started for one waiting call")
	case <-time.After(50 * time.Millisecond):
	}
	// Two wait: a second statement takes both.
	third := submit(3)
	wait("two waiting calls")
	<-second.done
	<-third.done
	close(release)
	<-first.done
	// With nothing running, a lone call runs at once again.
	fourth := submit(4)
	wait("a lone call after the others")
	<-fourth.done
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(batches) != 3 || len(batches[1]) != 2 || batches[2][0] != 4 {
		t.Errorf("batches %v, want [[1] [2 3] [4]]", batches)
	}
}
