package main

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
)

// The soft memory limit turnd serves under when GOMEMLIMIT is unset: after
// every collection, what turnd holds but garbage, plus room for garbage of
// the live heap's size, never below a floor plus the goroutine stacks
// (ARCHITECTURE.md, "The soft memory limit", says why a fixed limit was not
// enough, and why stacks are not charged to the floor).

// memSamples are the runtime/metrics the governor reads, in this order.
var memSamples = []string{
	"/memory/classes/total:bytes",
	"/memory/classes/heap/released:bytes",
	"/memory/classes/heap/free:bytes",
	"/memory/classes/heap/objects:bytes",
	"/gc/heap/live:bytes",
	"/memory/classes/heap/stacks:bytes",
}

// memoryLimitFor is the limit for memory held (mapped and not released to
// the OS, less garbage), of which live bytes of live heap and stacks bytes
// of goroutine stacks, at a floor that the stacks do not take from.
func memoryLimitFor(held, live, stacks, floor uint64) uint64 {
	return max(floor+stacks, held+max(live, floor/4))
}

// memoryGovernor sets the soft memory limit after every collection
// (memoryLimitFor) until stopped.
type memoryGovernor struct {
	floor   uint64
	samples []metrics.Sample // read by adjust: first in governMemory, then on the finalizer goroutine only
	stopped atomic.Bool
	limit   atomic.Uint64 // the last limit set, for tests and the log
}

// governMemory sets the soft memory limit to floor now and then after
// every collection as memoryLimitFor says, until stop is called.
func governMemory(floor uint64) (g *memoryGovernor, stop func()) {
	g = &memoryGovernor{floor: floor, samples: make([]metrics.Sample, len(memSamples))}
	for i, name := range memSamples {
		g.samples[i].Name = name
	}
	g.adjust()
	g.arm()
	return g, func() { g.stopped.Store(true) }
}

// adjust reads what the runtime holds and sets the limit.
func (g *memoryGovernor) adjust() {
	metrics.Read(g.samples)
	v := func(i int) uint64 {
		if g.samples[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return g.samples[i].Value.Uint64()
	}
	total, released, free, objects, live, stacks := v(0), v(1), v(2), v(3), v(4), v(5)
	// Free heap pages (released to the OS or not) are reused before the
	// heap grows, and heap objects not live are garbage (or not yet swept).
	held := total - min(total, released+free)
	held -= min(held, objects-min(objects, live))
	limit := memoryLimitFor(held, live, stacks, g.floor)
	debug.SetMemoryLimit(int64(min(limit, uint64(1)<<62)))
	g.limit.Store(limit)
}

// gcSentinel is arm's object: it holds a pointer, so it is never one of
// the tiny allocator's blocks, whose finalizers may never run.
type gcSentinel struct{ g *memoryGovernor }

// arm runs adjust after the next collection, and arms again after it: a
// finalizer runs once the collector found its object unreachable, that is
// after a cycle.
func (g *memoryGovernor) arm() {
	runtime.SetFinalizer(&gcSentinel{g}, func(*gcSentinel) {
		if g.stopped.Load() {
			return
		}
		g.adjust()
		g.arm()
	})
}
