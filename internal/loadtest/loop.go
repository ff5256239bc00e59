package loadtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"time"
)

// maxErrors stops a loop early: past this many failed operations the
// numbers mean nothing and a broken server would only be hammered.
const maxErrors = 100

// Loop runs op in a tight loop from clients goroutines for d and measures
// it: InsertBaseline and Turns are Loops, and a benchmark can measure any
// other operation the same way. Each client first runs warm once
// (connecting, preparing statements, creating its session); the window
// opens when every client has warmed up, so that no set-up cost is
// measured. A client starts no operation after the window closes; Elapsed
// runs until the last one in flight finishes. A failed operation counts in
// Result.Errors and the returned error describes the first; past 100
// failures the loop stops early.
func Loop(ctx context.Context, clients int, d time.Duration, warm, op func(ctx context.Context, client int) error) (Result, error) {
	if clients < 1 {
		return Result{}, fmt.Errorf("clients %d: must be at least 1", clients)
	}
	if d <= 0 {
		return Result{}, fmt.Errorf("duration %v: must be positive", d)
	}
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var (
		mu       sync.Mutex
		lat      []time.Duration
		errCount int
		firstErr error
		warmErr  error
		warmed   sync.WaitGroup
		done     sync.WaitGroup
		start    = make(chan struct{})
		deadline time.Time // written before start is closed
	)
	warmed.Add(clients)
	done.Add(clients)
	for c := range clients {
		go func() {
			defer done.Done()
			err := warm(ctx, c)
			if err != nil {
				mu.Lock()
				if warmErr == nil {
					warmErr = fmt.Errorf("warming up client %d: %w", c, err)
				}
				mu.Unlock()
				cancel()
			}
			warmed.Done()
			<-start
			if err != nil {
				return
			}
			mine := make([]time.Duration, 0, 4096)
			for ctx.Err() == nil {
				t0 := time.Now()
				if !t0.Before(deadline) {
					break
				}
				if err := op(ctx, c); err != nil {
					if ctx.Err() != nil {
						break // cancelled: not the operation's fault
					}
					mu.Lock()
					errCount++
					if firstErr == nil {
						firstErr = err
					}
					if errCount >= maxErrors {
						cancel()
					}
					mu.Unlock()
					continue
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	warmed.Wait()
	closeWindow := OpenWindow(parent)
	t0 := time.Now()
	deadline = t0.Add(d)
	close(start)
	done.Wait()
	elapsed := time.Since(t0)
	closeWindow()

	if warmErr != nil {
		return Result{}, warmErr
	}
	r := Summarize(lat, errCount, elapsed)
	if err := parent.Err(); err != nil {
		return r, err
	}
	if errCount > 0 {
		return r, fmt.Errorf("%d of %d operations failed; the first: %w", errCount, errCount+r.Ops, firstErr)
	}
	return r, nil
}

// randomID returns n random bytes in hex, to keep the names of one run
// (sessions, scratch schemas) apart from every other's.
func randomID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand panics instead)
	return hex.EncodeToString(b)
}
