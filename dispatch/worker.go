package dispatch

import (
	"context"
	"fmt"
	"time"
)

// What a worker does with a run. The path of an attempt that answers at once
// is kept in small frames and the rare paths out of line, so that a fresh
// worker's small stack seldom has to grow.

// work runs the attempts of r and sends r back.
func (d *dispatcher) work(ctx context.Context, r *run) {
	r.exited = true
	defer d.finish(r)
	if r.gated == nil || d.enter(ctx, r) {
		d.attempts(ctx, r)
	}
	r.exited = false
}

// enter waits for r's places in its gates, taking them in order (the
// first was reserved at launch). It reports false, with r.outcome set,
// when ctx ended first.
func (d *dispatcher) enter(ctx context.Context, r *run) bool {
	g := r.gated
	for i, gate := range g.gates {
		if i > 0 {
			g.tickets = append(g.tickets, gate.Reserve())
		}
		if g.tickets[i].Wait(ctx) != nil {
			r.outcome = cancelledBy(ctx)
			return false
		}
	}
	if len(g.gates) > 0 {
		g.entered = d.now()
	}
	return true
}

// finish stamps r, gives back its gates and hands it to the driving
// goroutine. It is deferred so that a tool calling runtime.Goexit still
// answers its call.
func (d *dispatcher) finish(r *run) {
	if r.exited {
		r.outcome = Fail(CodeToolPanic, fmt.Sprintf("tool %s exited its goroutine without an outcome", r.call.Name))
	}
	if g := r.gated; g != nil {
		for _, t := range g.tickets {
			t.Release()
		}
		g.tickets = nil
	}
	r.finished = d.now()
	d.results <- r
}

// attempts runs attempts until one needs no retry, leaving the last outcome
// in r.outcome.
func (d *dispatcher) attempts(ctx context.Context, r *run) {
	at := &r.at
	for {
		if !d.ready(ctx, r, at.number) {
			return
		}
		if r.started.IsZero() {
			r.started = d.now()
		}
		if at.number > 1 {
			r.retries.last = d.now()
		}
		if d.watch != nil {
			d.observed(ctx, r, at)
		} else {
			invoke(ctx, r, at)
		}
		r.attempts = at.number
		if !d.retry(ctx, r, at.number) {
			return
		}
		r.retried(d.now())
		r.prev = r.outcome.Err
		at = &Attempt{number: at.number + 1, call: at.call, keys: at.keys, cache: at.cache}
	}
}

// invoke runs one attempt of r's tool.
func invoke(ctx context.Context, r *run, at *Attempt) {
	defer recoverTool(r)
	r.outcome = r.tool.Invoke(ctx, r.call, at)
}

// observed runs one attempt of r's tool under the host's AttemptObserver.
// The tool is timed with time.Now, not Wave.Now: the duration needs the
// monotonic clock, which a host's clock need not carry. A tool ending its
// goroutine (runtime.Goexit) still reports its attempt finished.
func (d *dispatcher) observed(ctx context.Context, r *run, at *Attempt) {
	d.watch.AttemptStarted(r.call, at.number)
	start := time.Now()
	finished := false
	defer func() {
		if !finished {
			d.watch.AttemptFinished(r.call, at.number, Fail(CodeToolPanic, "tool exited its goroutine without an outcome"), time.Since(start))
		}
	}()
	invoke(ctx, r, at)
	finished = true
	d.watch.AttemptFinished(r.call, at.number, r.outcome, time.Since(start))
}

// recoverTool turns a panicking tool into an error outcome, so that a
// faulty tool costs its call, not the process.
func recoverTool(r *run) {
	if v := recover(); v != nil {
		r.outcome = Fail(CodeToolPanic, fmt.Sprintf("tool %s panicked: %v", r.call.Name, v))
	}
}

// ready prepares attempt n: it waits out the backoff after a retryable
// error and asks the host's AttemptHook. It reports false, with r.outcome
// set, when the attempt must not run.
func (d *dispatcher) ready(ctx context.Context, r *run, n int) bool {
	if r.prev != nil && !sleep(ctx, r.policy.delay(n-1, r.prev.RetryAfter)) {
		r.outcome = cancelledBy(ctx)
		return false
	}
	if ctx.Err() != nil {
		r.outcome = cancelledBy(ctx)
		return false
	}
	if d.hook == nil {
		return true
	}
	if err := d.hook.BeforeAttempt(ctx, r.call, r.effect, n); err != nil {
		if ctx.Err() != nil {
			r.outcome = cancelledBy(ctx)
		} else {
			r.outcome = Fail(CodeAttemptNotRecorded, err.Error())
		}
		return false
	}
	return true
}

// retry settles r.outcome after attempt n and reports whether another
// attempt should follow.
func (d *dispatcher) retry(ctx context.Context, r *run, n int) bool {
	out := &r.outcome
	switch {
	case out.Status == StatusOK:
		return false
	case out.Status == StatusPending:
		settlePending(out, r.at.cache)
		return false
	case out.Status == StatusError && ctx.Err() != nil:
		// The tool gave up because dispatch or the caller cancelled it.
		detail := out.Detail
		*out = cancelledBy(ctx)
		out.Detail = detail
		return false
	case out.retryable() && n < r.policy.attempts():
		return true
	}
	*out = out.normalized()
	return false
}

func cancelledBy(ctx context.Context) Outcome {
	return Cancelled(context.Cause(ctx).Error())
}

// settlePending checks that a deferred result can ever be completed and
// records the key it will be completed with.
func settlePending(out *Outcome, keys *keyCache) {
	keys.mu.Lock()
	key, taken := keys.key, keys.taken
	keys.mu.Unlock()
	if !taken {
		detail := out.Detail
		*out = Fail(CodePendingMissingKey, "the tool answered pending without taking a completion key")
		out.Detail = detail
		return
	}
	var p Pending
	if out.Pending != nil {
		p = *out.Pending
	}
	p.Key = key
	out.Pending = &p
}
