package turn

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// liveSettles waits until w runs want goroutines.
func liveSettles(t *testing.T, w *workers, want int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for w.live.Load() != want {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines, want %d", w.live.Load(), want)
		}
		time.Sleep(time.Millisecond)
	}
}

// idleSettles waits until want goroutines of w wait for work.
func idleSettles(t *testing.T, w *workers, want int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		w.mu.Lock()
		n := len(w.idle)
		w.mu.Unlock()
		if n == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines wait, want %d", n, want)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestWorkersReuseAndClose(t *testing.T) {
	var w workers
	// One after another: one goroutine serves them all.
	for i := range 100 {
		done := make(chan int)
		w.run(func() { done <- i })
		if got := <-done; got != i {
			t.Fatalf("run %d ran %d", i, got)
		}
		idleSettles(t, &w, 1) // back in the pool before the next run
		if n := w.live.Load(); n != 1 {
			t.Fatalf("run %d: %d goroutines, want 1", i, n)
		}
	}
	// More at once than are kept: every one runs, then maxIdleWorkers wait.
	n := maxIdleWorkers + 20
	var started, release sync.WaitGroup
	started.Add(n)
	release.Add(1)
	ran := make(chan int, n)
	for i := range n {
		w.run(func() {
			started.Done()
			release.Wait()
			ran <- i
		})
	}
	started.Wait() // all n run at once: none waited for another
	release.Done()
	seen := map[int]bool{}
	for range n {
		seen[<-ran] = true
	}
	if len(seen) != n {
		t.Fatalf("%d distinct runs of %d", len(seen), n)
	}
	liveSettles(t, &w, maxIdleWorkers)
	w.close()
	liveSettles(t, &w, 0)
	// After close a run still runs, and its goroutine ends.
	done := make(chan struct{})
	w.run(func() { close(done) })
	<-done
	liveSettles(t, &w, 0)
}

// TestRunHerePanicEndsTheProcess: a wave run on the submitting goroutine
// that panics ends the process, as on a worker's goroutine, even when the
// caller would recover (as the HTTP server does). The test runs itself
// again as that process.
func TestRunHerePanicEndsTheProcess(t *testing.T) {
	if os.Getenv("TURND_TEST_RUNHERE_PANIC") == "1" {
		defer func() {
			if recover() != nil {
				fmt.Println("recovered by the caller")
				os.Exit(0)
			}
		}()
		runHere(func() { panic("boom in a wave") })
		fmt.Println("runHere returned")
		os.Exit(0)
	}
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^TestRunHerePanicEndsTheProcess$")
	cmd.Env = append(os.Environ(), "TURND_TEST_RUNHERE_PANIC=1")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Success() {
		t.Fatalf("the process went on (%v): %s", err, out)
	}
	if !strings.Contains(string(out), "a wave run inline panicked: boom in a wave") {
		t.Errorf("the crash does not name the wave's panic: %s", out)
	}
}
