package turn

import (
	"context"
	"fmt"
)

// Mid-wave commits — a write attempt's write-ahead, a park that holds
// resources — go through one pipeline: each takes what is buffered and
// joins the batch being filled, and batches commit one after another, in
// the order they were filled. Writes that start at once (on different
// resources) then share one commit instead of queueing on the session's
// ledger one commit each, and no commit can overtake lines taken before
// it.

// aheadBatch is one mid-wave commit and the joiners waiting for it.
type aheadBatch struct {
	c Commit
	// held are the parts taken from the buffer, put back in order if the
	// commit fails.
	held []Commit
	// done is closed once the commit ended (nil while only its leader
	// waits); err is its error.
	done chan struct{}
	err  error
}

// joinLocked adds held (taken from the buffer) and, for a write attempt,
// its lines and started result to the batch being filled (under mu). It
// returns the batch, and the batch to wait for first when this joiner
// leads the batch (nil when it does not lead).
func (r *run) joinLocked(held Commit, lines []Line, results []Result) (b *aheadBatch, lead bool, prev *aheadBatch) {
	b = r.filling
	if b == nil {
		b = &aheadBatch{}
		r.filling, lead, prev = b, true, r.committing
	} else if b.done == nil {
		b.done = make(chan struct{})
	}
	b.held = append(b.held, held)
	b.c = prependCommit(b.c, held)
	b.c.Lines = append(b.c.Lines, lines...)
	b.c.Results = append(b.c.Results, results...)
	return b, lead, prev
}

// await commits b when lead (after prev), or waits for its leader to.
func (r *run) await(ctx context.Context, b *aheadBatch, lead bool, prev *aheadBatch) error {
	if !lead {
		<-b.done
		return b.err
	}
	if prev != nil && prev.done != nil {
		<-prev.done
	}
	r.mu.Lock()
	r.filling, r.committing = nil, b // joiners from now on fill the next batch
	if b.done == nil {
		b.done = make(chan struct{}) // the next batch's leader waits on it
	}
	r.mu.Unlock()
	wctx := context.WithoutCancel(ctx)
	b.err = r.svc.untilStored(r.logCtx, r.key, func() error { return r.commit(wctx, b.c) })
	if b.err != nil {
		// Nothing of it is journaled: what was accounted goes ahead of
		// what was taken since — into the batch filling now, whose leader
		// waits for this one, or else back to the buffer.
		var back Commit
		for _, h := range b.held {
			back = prependCommit(back, h)
		}
		r.mu.Lock()
		if next := r.filling; next != nil {
			next.c = prependCommit(back, next.c)
			next.held = append([]Commit{back}, next.held...)
		} else {
			r.pending = prependCommit(back, r.pending)
		}
		r.mu.Unlock()
	}
	close(b.done)
	return b.err
}

// commitBuffered commits what is buffered through the pipeline.
func (r *run) commitBuffered(ctx context.Context) error {
	r.mu.Lock()
	b, lead, prev := r.joinLocked(r.takeLocked(), nil, nil)
	r.mu.Unlock()
	if err := r.await(ctx, b, lead, prev); err != nil {
		return fmt.Errorf("committing turn %s/%s: %w", r.key.SessionID, r.key.TurnID, err)
	}
	return nil
}
