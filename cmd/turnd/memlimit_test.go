package main

import (
	"math"
	"runtime"
	"runtime/debug"
	"sync"
	"testing"
	"time"
)

func TestMemoryLimitFor(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		name                      string
		held, live, stacks, floor uint64
		want                      uint64
	}{
		{"idle: the floor", 20 * mib, 5 * mib, 1 * mib, 192 * mib, 193 * mib},
		{"stacks of many waiters: held plus a quarter of the floor", 300 * mib, 40 * mib, 200 * mib, 192 * mib, 392 * mib},
		{"stacks of waiters below the floor: the floor above them", 130 * mib, 45 * mib, 66 * mib, 192 * mib, 258 * mib},
		{"a large live heap: held plus the live heap again", 400 * mib, 300 * mib, 2 * mib, 192 * mib, 700 * mib},
		{"just under the floor", 150 * mib, 10 * mib, 0, 192 * mib, 198 * mib},
	} {
		if got := memoryLimitFor(c.held, c.live, c.stacks, c.floor); got != c.want {
			t.Errorf("%s: memoryLimitFor(%d MiB, %d MiB, %d MiB, %d MiB) = %d MiB, want %d MiB",
				c.name, c.held/mib, c.live/mib, c.stacks/mib, c.floor/mib, got/mib, c.want/mib)
		}
	}
}

// The governor raises the limit after a collection that found more live
// than the floor leaves room for, and stops adjusting once stopped.
func TestMemoryGovernorFollowsLiveHeap(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(prev)
	const floor = 32 << 20
	g, stop := governMemory(floor)
	if got := g.limit.Load(); got < floor {
		t.Fatalf("limit at start = %d, below the floor %d", got, floor)
	}
	if got := debug.SetMemoryLimit(-1); got != int64(g.limit.Load()) {
		t.Fatalf("runtime limit %d, governor says %d", got, g.limit.Load())
	}
	live := make([][]byte, 64)
	for i := range live {
		live[i] = make([]byte, 1<<20) // 64 MiB live, twice the floor
		live[i][0] = 1
	}
	waitLimit(t, g, func(l uint64) bool { return l >= 128<<20 }, "at least twice the 64 MiB live")
	runtime.KeepAlive(live)
	live = nil
	waitLimit(t, g, func(l uint64) bool { return l < 96<<20 }, "back near the floor once the 64 MiB are garbage")
	stop()
	runtime.GC()
	runtime.GC()
	set := g.limit.Load()
	debug.SetMemoryLimit(math.MaxInt64)
	runtime.GC()
	runtime.GC()
	if got := g.limit.Load(); got != set {
		t.Errorf("limit changed from %d to %d after stop", set, got)
	}
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("a stopped governor set the runtime's limit to %d", got)
	}
}

// The goroutine stacks that held answers keep are added to the floor, not
// taken from it: goroutines holding 32 MiB of stacks raise the limit by
// about that much, and once they end it falls back (most of the way).
func TestMemoryGovernorAddsStacksToFloor(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(prev)
	const floor = 32 << 20
	g, stop := governMemory(floor)
	defer stop()
	release := make(chan struct{})
	var grown sync.WaitGroup
	var ended sync.WaitGroup
	for range 512 {
		grown.Add(1)
		ended.Add(1)
		go func() {
			defer ended.Done()
			deepen(64, func() { grown.Done(); <-release }) // about 64 KiB of stack each
		}()
	}
	grown.Wait()
	waitLimit(t, g, func(l uint64) bool { return l >= floor+24<<20 }, "the floor plus the goroutines' 32 MiB of stacks")
	close(release)
	ended.Wait()
	// Exited goroutines' stacks go back to the heap at a later collection,
	// but for those the runtime keeps for goroutines to come.
	waitLimit(t, g, func(l uint64) bool { return l < floor+16<<20 }, "back near the floor once the goroutines ended")
}

// deepen calls itself depth times, each frame holding 1 KiB, then calls at.
//
//go:noinline
func deepen(depth int, at func()) byte {
	var frame [1 << 10]byte
	frame[depth%len(frame)] = byte(depth)
	if depth == 0 {
		at()
		return frame[0]
	}
	return deepen(depth-1, at) + frame[depth%len(frame)]
}

// waitLimit collects until the governor's limit satisfies ok (the finalizer
// that adjusts it runs on its own goroutine, shortly after a cycle).
func waitLimit(t *testing.T, g *memoryGovernor, ok func(uint64) bool, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok(g.limit.Load()) {
		if time.Now().After(deadline) {
			t.Fatalf("limit %d MiB: want %s", g.limit.Load()>>20, want)
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}
