package dispatch

import "context"

// taint records a fail_fast failure of call k. Calls before k are not
// touched: in a serial run they would have run before k failed. Later calls
// that run are cancelled, later admitted calls that have not started are
// refused with CodeTurnFailed, and so are later calls when they come up for
// admission.
func (d *dispatcher) taint(k int) {
	if d.tainted && k >= d.taintAt {
		return
	}
	d.tainted, d.taintAt = true, k
	for i := k + 1; i < d.next; i++ {
		// A run still queued is settled below, and never starts. A write
		// already running (resources let it start before k answered) is
		// left to finish: what it does is recorded, not cut short.
		if s := &d.slots[i]; s.run != nil && !s.done && (d.concurrent || s.effect == EffectRead) {
			s.run.cancelWith(errTainted)
		}
	}
	refused := Refused(CodeTurnFailed, errTainted.Error())
	defer d.sweep()()
	d.settleBlocked(func(i int) bool { return i > k }, refused)
	// The queue is in call order: the calls after k are its tail.
	tail := len(d.queue)
	for tail > d.qhead && d.queue[tail-1] > k {
		tail--
		d.settleQueued(d.queue[tail], refused)
	}
	d.queue = d.queue[:tail]
	if d.barrier > k {
		d.settle(&d.slots[d.barrier], Run, true, refused)
		d.barrier = -1
	}
}

// interrupt reacts to the wave's context being done: running tools see it
// through their contexts; admitted calls that have not started, and calls
// not admitted yet, are cancelled; the feed is no longer read.
func (d *dispatcher) interrupt(hostCtx context.Context) {
	if d.interrupted {
		return
	}
	d.interrupted = true
	d.feed = nil
	cancelled := Cancelled(interruptedMessage(hostCtx))
	defer d.sweep()()
	d.settleBlocked(func(int) bool { return true }, cancelled)
	for _, k := range d.queue[d.qhead:] {
		d.settleQueued(k, cancelled)
	}
	d.queue = d.queue[:d.qhead]
	if d.barrier >= 0 {
		d.settle(&d.slots[d.barrier], Run, true, cancelled)
		d.barrier = -1
	}
}

// sweep marks the start of a sweep (taint, interrupt), in which settling
// calls must not queue blocked ones behind the sweep's back; the function
// it returns ends the sweep and rechecks what is still blocked.
func (d *dispatcher) sweep() func() {
	d.sweeping = true
	return func() {
		d.sweeping = false
		if d.locks != nil {
			d.recheck()
		}
	}
}

// settleQueued settles call k, queued and never started, with o, and frees
// its place among the resources.
func (d *dispatcher) settleQueued(k int, o Outcome) {
	d.settle(&d.slots[k], Run, true, o)
	if d.locks != nil {
		d.release(k)
	}
}
