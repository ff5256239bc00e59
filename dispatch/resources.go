package dispatch

import (
	"slices"
	"time"
)

// The per-resource scheduling of an ordered wave: a call with resources
// starts once every earlier call it conflicts with has answered (sharing a
// resource where either writes; for a write, a resource-less leading
// read), and a parked one holds them until Wave.Released names it. The
// whole rule is in ARCHITECTURE.md, "Per-resource scheduling".

// lockTable is the state of a wave's keyed calls: nil until the first.
type lockTable struct {
	// queues holds, per resource, the keyed calls not yet released, in
	// call order.
	queues map[string][]int
	// calls holds the footprint of every keyed call not yet released.
	calls map[int]*footprint
	// blocked are keyed calls admitted to run that wait for a conflicting
	// call, in call order.
	blocked []int
	// holding counts the parked calls that hold their resources.
	holding int
}

// gating is a run's gates, its places in them (the first reserved at
// launch on the driving goroutine, so in call order), and when it was
// cleared to start.
type gating struct {
	gates   []Gate
	tickets []Ticket
	ready   time.Time
	entered time.Time
}

// footprint is what a keyed call touches.
type footprint struct {
	res   []string
	write bool
	held  bool
}

// locksFor returns the wave's lock table, making it on first use.
func (d *dispatcher) locksFor() *lockTable {
	if d.locks == nil {
		d.locks = &lockTable{queues: make(map[string][]int), calls: make(map[int]*footprint)}
	}
	return d.locks
}

// register enters keyed call k in the queues of its resources.
func (d *dispatcher) register(k int, res []string, write bool) *footprint {
	t := d.locksFor()
	f := &footprint{write: write}
	for _, r := range res {
		if slices.Contains(f.res, r) {
			continue
		}
		f.res = append(f.res, r)
		t.queues[r] = append(t.queues[r], k)
	}
	t.calls[k] = f
	return f
}

// clear reports whether keyed call k conflicts with no earlier call that
// has not answered (or still holds its resources).
func (d *dispatcher) clear(k int) bool {
	t := d.locks
	f := t.calls[k]
	if f.write && d.anonOpen > 0 {
		return false
	}
	for _, r := range f.res {
		for _, j := range t.queues[r] {
			if j == k {
				break
			}
			if f.write || t.calls[j].write {
				return false
			}
		}
	}
	return true
}

// scheduleKeyed queues keyed call k, or blocks it behind its conflicts.
func (d *dispatcher) scheduleKeyed(k int, res []string, write bool) {
	d.register(k, res, write)
	if write {
		// No read may start ahead of admission past a write.
		d.serial = true
	}
	if d.clear(k) {
		d.enqueue(k)
		return
	}
	d.locks.blocked = append(d.locks.blocked, k)
}

// enqueue adds call k to the queue of runs waiting for a goroutine,
// keeping the waiting part in call order.
func (d *dispatcher) enqueue(k int) {
	d.slots[k].run.gated.ready = d.now()
	i := len(d.queue)
	for i > d.qhead && d.queue[i-1] > k {
		i--
	}
	d.queue = slices.Insert(d.queue, i, k)
}

// answered frees what call k held once it has answered with outcome o:
// a keyed call's resources, unless it parked holding them.
func (d *dispatcher) answered(k int, o Outcome) {
	if d.locks == nil {
		return
	}
	f := d.locks.calls[k]
	if f == nil {
		return
	}
	if o.Status == StatusPending && d.released != nil {
		f.held = true
		d.locks.holding++
		return
	}
	d.release(k)
}

// leave takes an answered leading read out of the open reads that keyed
// writes wait for.
func (d *dispatcher) leave(s *slot) {
	if !s.anon {
		return
	}
	s.anon = false
	d.anonOpen--
	if d.anonOpen == 0 && d.locks != nil {
		d.recheck()
	}
}

// hold enters call k, replayed as still pending, as holding res.
func (d *dispatcher) hold(k int, res []string, write bool) {
	if d.released == nil {
		return
	}
	f := d.register(k, res, write)
	f.held = true
	d.locks.holding++
	if write {
		d.serial = true // as when it parked: later plain calls wait for it
	}
}

// unhold frees the resources of parked call k (from Wave.Released).
func (d *dispatcher) unhold(k int) {
	if d.locks == nil {
		return
	}
	if f := d.locks.calls[k]; f != nil && f.held {
		d.locks.holding--
		d.release(k)
	}
}

// release takes keyed call k out of its queues and starts the blocked
// calls that no longer conflict.
func (d *dispatcher) release(k int) {
	t := d.locks
	f := t.calls[k]
	if f == nil {
		return
	}
	delete(t.calls, k)
	for _, r := range f.res {
		q := t.queues[r]
		if i := slices.Index(q, k); i >= 0 {
			q = slices.Delete(q, i, i+1)
		}
		if len(q) == 0 {
			delete(t.queues, r)
		} else {
			t.queues[r] = q
		}
	}
	if i := slices.Index(t.blocked, k); i >= 0 {
		t.blocked = slices.Delete(t.blocked, i, i+1)
	}
	d.recheck()
}

// recheck queues the blocked calls that no longer conflict, in call order.
// During a sweep it waits for the sweep's end.
func (d *dispatcher) recheck() {
	if d.sweeping {
		return
	}
	t := d.locks
	kept := t.blocked[:0]
	for _, k := range t.blocked {
		if d.clear(k) {
			d.enqueue(k)
		} else {
			kept = append(kept, k)
		}
	}
	clear(t.blocked[len(kept):])
	t.blocked = kept
}

// settleBlocked settles the blocked calls that match pick with outcome o,
// freeing their resources. They leave the blocked list first, so that a
// release cannot queue one of them.
func (d *dispatcher) settleBlocked(pick func(k int) bool, o Outcome) {
	if d.locks == nil || len(d.locks.blocked) == 0 {
		return
	}
	var out []int
	kept := d.locks.blocked[:0]
	for _, k := range d.locks.blocked {
		if pick(k) {
			out = append(out, k)
		} else {
			kept = append(kept, k)
		}
	}
	clear(d.locks.blocked[len(kept):])
	d.locks.blocked = kept
	for _, k := range out {
		d.settle(&d.slots[k], Run, true, o)
		d.release(k)
	}
}

// holds reports whether a parked call still holds resources.
func (d *dispatcher) holds() bool {
	return d.locks != nil && d.locks.holding > 0
}
