package turn

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// settle commits what is buffered together with the turn's new status,
// retrying briefly when the store is unavailable. When it still fails the
// turn stays running under a lease that will expire, and recovery resumes
// it: nothing acknowledged is lost because nothing was acknowledged.
func (r *run) settle(status Status) {
	r.settling.Store(true)
	c, settledAt := r.settlement(status)
	ctx := context.WithoutCancel(r.ctx)
	whole, err := r.recordSettlement(ctx, c, status, settledAt)
	switch {
	case whole && err != nil:
		r.unrecordedWhole(err)
	case err != nil:
		r.settleFailed(ctx, err)
	default:
		r.settled(ctx, status, settledAt, whole, c.Webhook != nil)
	}
}

// settlement takes what is buffered as the commit that settles the turn
// with status, and the time it settles at (zero while it does not).
func (r *run) settlement(status Status) (Commit, time.Time) {
	now := r.svc.now()
	var settledAt time.Time
	if status.Settled() {
		settledAt = now
		r.buffer(Line{Kind: LineTurnSettled, Data: settledData(status)})
	}
	r.mu.Lock()
	c := r.takeLocked()
	r.mu.Unlock()
	c.Status = status
	c.SettledAt = settledAt
	if status.Settled() {
		// The webhook commits with the settlement or not at all.
		c.Webhook = settledWebhook(r.session.CallbackURL, r.key, status, settledAt)
	}
	return c, settledAt
}

// recordSettlement stores c: with the whole turn, where the turn ran
// unrecorded (reads.go) and settles now (whole is then true), else by a
// commit to the turn already recorded.
func (r *run) recordSettlement(ctx context.Context, c Commit, status Status, settledAt time.Time) (whole bool, err error) {
	if status.Settled() {
		whole, err = r.recordWhole(ctx, c, status, settledAt)
	} else {
		err = r.ensureRecorded(ctx)
	}
	if !whole && err == nil {
		err = r.svc.untilStored(r.logCtx, r.key, func() error { return r.commit(ctx, c) })
	}
	return whole, err
}

// unrecordedWhole ends a run whose turn, run unrecorded, could not be
// recorded whole: nothing of it is stored.
func (r *run) unrecordedWhole(err error) {
	s := r.svc
	switch {
	case errors.Is(err, ErrTurnExists):
		// Posted twice at once: Submit answers from the other's record.
		s.log.InfoContext(r.logCtx, "turn recorded meanwhile by another request; answering from its record", "session_id", r.key.SessionID, "turn_id", r.key.TurnID)
	case errors.Is(err, ErrCallsAnswered), errors.Is(err, ErrNotFound):
		// The optimistic run's assumptions failed: Submit runs the turn
		// the ordinary way, which replays the answered calls.
		s.log.DebugContext(r.logCtx, "turn not recorded whole; running it the ordinary way", "session_id", r.key.SessionID, "turn_id", r.key.TurnID, "reason", err)
	default:
		s.log.ErrorContext(r.logCtx, "recording turn failed; nothing of it is stored", "session_id", r.key.SessionID, "turn_id", r.key.TurnID, "err", err)
	}
	r.settleErr = fmt.Errorf("recording turn: %w", err)
	r.final = r.turn
}

// settleFailed ends a run whose settling commit failed with err: its new
// owner or recovery settles the turn, unless the store rejected the
// outcomes, which fails the turn now.
func (r *run) settleFailed(ctx context.Context, err error) {
	s := r.svc
	if errors.Is(err, ErrLeaseLost) {
		s.log.WarnContext(r.logCtx, "turn lease lost before settling; its new owner settles it", "session_id", r.key.SessionID, "turn_id", r.key.TurnID)
		r.settleErr = fmt.Errorf("settling turn: %w", err)
		r.final = r.turn
		return
	}
	if errors.Is(err, ErrRejected) {
		// The store cannot hold what the wave produced: running the turn
		// again would produce it again. It fails now, its unanswered calls
		// answered store_rejected (see failUnfinished).
		s.log.ErrorContext(r.logCtx, "the store rejected the turn's outcomes; failing the turn", "session_id", r.key.SessionID, "turn_id", r.key.TurnID, "err", err)
		msg := "the store could not hold this call's outcome, so it was not recorded; the call ran and its effect may have taken place"
		if ferr := s.failUnfinished(ctx, r.key, r.epoch, CodeStoreRejected, msg); ferr == nil {
			if t, gerr := s.store.GetTurn(ctx, r.key); gerr == nil {
				r.final = t
				return
			}
		} else {
			err = errors.Join(err, ferr)
		}
	}
	s.log.ErrorContext(r.logCtx, "settling turn failed; recovery will resume it", "session_id", r.key.SessionID, "turn_id", r.key.TurnID, "err", err)
	r.settleErr = fmt.Errorf("settling turn: %w", err)
	r.final = r.turn
}

// settled ends a run whose turn is stored with status, and follows up on
// it: a webhook to send, answers that came early, parked calls to cancel.
func (r *run) settled(ctx context.Context, status Status, settledAt time.Time, whole, webhook bool) {
	s := r.svc
	r.turn.Status = status
	r.turn.SettledAt = settledAt
	r.final = r.turn
	s.observeSettled(status, r.turn.CreatedAt)
	if webhook || r.requested != nil {
		s.wakeWebhooks()
	}
	r.closeApproved(ctx)
	if status == StatusWaiting {
		if r.approvalParked || r.resumed {
			// A decision may have approved a call while the wave ran (one
			// it parked, or, in a resumed turn, one it replayed parked).
			s.continueApproved(ctx, r.key)
		}
		// A delivery may have raced the pending answer (kept as early), or
		// resolved a parked call while later calls of the wave still ran.
		if !s.applyEarly(ctx, r.key) {
			s.settleResolved(ctx, r.key, r.session.CallbackURL, r.turn.CreatedAt)
		}
		if t, err := s.store.GetTurn(ctx, r.key); err == nil {
			r.final = t
			r.keepParked(t)
		}
	}
	if !whole && (status == StatusCancelled || status == StatusFailed) && r.parked {
		// Calls parked before the wave was cancelled or failed wait no
		// more; the answer shows how they ended.
		s.cancelParked(ctx, r.key, status)
		if t, err := s.store.GetTurn(ctx, r.key); err == nil {
			r.final = t
		}
	}
}

func (r *run) commit(ctx context.Context, c Commit) error {
	if r.leaseLost.Load() {
		return fmt.Errorf("committing turn %s/%s: %w (another owner took it over meanwhile)", r.key.SessionID, r.key.TurnID, ErrLeaseLost)
	}
	if err := CheckResultCalls(r.turn.Calls, c.Results); err != nil {
		return fmt.Errorf("committing turn %s/%s: %w", r.key.SessionID, r.key.TurnID, err)
	}
	if c.Webhook == nil && len(c.Parks) > 0 {
		c.Webhook = r.approvalWebhook(c.Parks)
	}
	c.Key = r.key
	c.LeaseOwner = r.svc.cfg.Owner
	c.LeaseUntil = r.svc.now().Add(r.svc.cfg.LeaseTTL)
	c.LeaseEpoch = r.epoch
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return r.svc.store.Commit(ctx, c)
}

// buffer appends a line to the next commit.
func (r *run) buffer(l Line) {
	r.mu.Lock()
	r.bufferLocked(l)
	r.mu.Unlock()
}

func (r *run) bufferLocked(l Line) {
	l.SessionID, l.TurnID = r.key.SessionID, r.key.TurnID
	if l.At.IsZero() {
		l.At = r.svc.now()
	}
	r.pending.Lines = append(r.pending.Lines, l)
}

func (r *run) takeLocked() Commit {
	c := r.pending
	r.pending = Commit{}
	return c
}

// prependCommit returns the commit of first's lines, results, outputs and
// parks followed by then's.
func prependCommit(first, then Commit) Commit {
	first.Lines = append(first.Lines, then.Lines...)
	first.Results = append(first.Results, then.Results...)
	first.Outputs = append(first.Outputs, then.Outputs...)
	first.Parks = append(first.Parks, then.Parks...)
	return first
}

// untilStored runs write until it succeeds or fails for a reason other than
// ErrUnavailable, waiting between tries (50 ms doubling to 5 s): an outcome
// this process holds is committed once the store is back, however long that
// takes. Only the end of the service (Shutdown's grace) stops it; then the
// turn is left to recovery, as after any stop.
func (s *Service) untilStored(ctx context.Context, k TurnKey, write func() error) error {
	delay, warned := 50*time.Millisecond, false
	for {
		err := write()
		if err == nil || !errors.Is(err, ErrUnavailable) {
			if warned && err == nil {
				s.log.InfoContext(ctx, "store back; the turn's outcomes are recorded", "session_id", k.SessionID, "turn_id", k.TurnID)
			}
			return err
		}
		if !warned {
			warned = true
			s.log.WarnContext(ctx, "store unavailable; holding the turn's outcomes until it is back", "session_id", k.SessionID, "turn_id", k.TurnID, "err", err)
		}
		t := time.NewTimer(delay)
		select {
		case <-s.base.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		delay = min(2*delay, 5*time.Second)
	}
}
