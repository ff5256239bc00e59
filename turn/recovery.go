package turn

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/turnd/turnd/dispatch"
)

// Start runs the background loops: lease renewal for this process's
// running turns, recovery of turns whose owner died (at once, then every
// half lease), and webhook delivery. It returns immediately; Shutdown stops
// the loops.
func (s *Service) Start(ctx context.Context) error {
	if !s.started.CompareAndSwap(false, true) {
		return errors.New("turn: service already started")
	}
	if err := s.initCompletions(ctx); err != nil {
		return err
	}
	// Resume what a previous process left running before taking traffic.
	if _, err := s.Recover(ctx); err != nil {
		s.log.Warn("initial recovery failed; retrying in the background", "err", err)
	}
	if s.completions != nil {
		s.loops.Add(1)
		go s.every(s.cfg.SweepInterval, s.expireDue)
	}
	if s.cfg.Notifier != nil {
		s.startNotifier()
	}
	s.loops.Add(5)
	go s.every(time.Second, s.pollWaiting)
	go s.webhookLoop()
	go s.every(s.cfg.LeaseTTL/3, s.renew)
	go s.every(s.cfg.OutputSweep, s.sweepOutputs)
	go s.every(s.cfg.LeaseTTL/2, func(ctx context.Context) {
		if _, err := s.Recover(ctx); err != nil {
			s.log.Warn("recovery pass failed", "err", err)
		}
	})
	return nil
}

func (s *Service) every(d time.Duration, f func(context.Context)) {
	defer s.loops.Done()
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			// A pass may take longer than the interval (a slow store); it is
			// bounded, and the ticker drops the ticks it misses.
			ctx, cancel := context.WithTimeout(context.Background(), max(d, 30*time.Second))
			f(ctx)
			cancel()
		}
	}
}

// renew extends the leases of the turns running here. A lease found lost
// (this process stalled past its TTL and a replica took over) cancels the
// local wave; fencing at commit keeps its lines out of the ledger.
func (s *Service) renew(ctx context.Context) {
	s.mu.Lock()
	keys := make([]TurnKey, 0, len(s.active))
	for k, r := range s.active {
		// A fenced wave (another owner held its turn meanwhile) is stale
		// even should this process hold the lease again: renewing it would
		// keep the turn from being resumed.
		if !r.leaseLost.Load() {
			keys = append(keys, k)
		}
	}
	s.mu.Unlock()
	if len(keys) == 0 {
		return
	}
	lost, err := s.store.RenewLeases(ctx, s.cfg.Owner, s.now().Add(s.cfg.LeaseTTL), keys)
	if err != nil {
		s.log.Warn("renewing turn leases failed", "err", err)
		return
	}
	for _, k := range lost {
		r := s.activeRun(k)
		// A run settling (to waiting or settled) released its lease
		// itself; nothing was lost.
		if r != nil && !r.settling.Load() {
			r.leaseLost.Store(true)
			s.log.Warn("turn lease lost", "session_id", k.SessionID, "turn_id", k.TurnID)
			r.cancel()
		}
	}
	// Cancels asked for on other replicas (notify.go).
	s.applyCancelRequests(ctx, keys)
}

// sweepOutputs deletes kept outputs past their retention.
func (s *Service) sweepOutputs(ctx context.Context) {
	n, err := s.store.DeleteExpiredOutputs(ctx, s.now())
	if err != nil {
		s.log.Warn("deleting expired outputs failed", "err", err)
		return
	}
	if n > 0 {
		s.log.Info("deleted expired outputs", "count", n)
	}
}

// Recover claims running turns whose lease expired and resumes them here:
// accounted calls are replayed from the record, read calls in flight run
// again, and write calls journaled as started but never answered get the
// error "interrupted" unless their tool is idempotent. A turn claimed more
// than MaxResumes times is settled failed instead (see exhaust). It returns
// how many turns it resumed.
func (s *Service) Recover(ctx context.Context) (int, error) {
	s.mu.Lock()
	closing := s.closing
	s.mu.Unlock()
	if closing {
		return 0, nil
	}
	now := s.now()
	claims, err := s.store.ClaimTurns(ctx, s.cfg.Owner, now, now.Add(s.cfg.LeaseTTL), s.cfg.ResumeBackoff, 32)
	if err != nil {
		return 0, fmt.Errorf("claiming turns: %w", err)
	}
	n := 0
	for _, c := range claims {
		k := c.TurnKey
		r := s.activeRun(k)
		if r != nil {
			if c.PrevOwner == s.cfg.Owner && !r.leaseLost.Load() {
				// This process stalled past its own lease (a suspended VM,
				// a long GC pause) and nobody took the turn meanwhile: its
				// wave is still the turn's, the claim renewed its lease,
				// and resuming would run the turn twice.
				continue
			}
			// Another owner held the turn between this wave's lease and
			// this claim: the wave here is stale. It must commit nothing
			// more; once it has stopped, the turn is resumed anew under
			// this claim (or, when it takes long to stop, once the claim
			// expires).
			r.leaseLost.Store(true)
			r.cancel()
			s.log.Warn("turn lease lost; another owner had taken it over meanwhile", "session_id", k.SessionID, "turn_id", k.TurnID, "owner_meanwhile", c.PrevOwner)
			wait := time.NewTimer(s.cfg.LeaseTTL / 2)
			select {
			case <-r.done:
				wait.Stop()
			case <-wait.C:
				continue
			case <-ctx.Done():
				wait.Stop()
				continue
			}
		}
		if c.Resumes > s.cfg.MaxResumes {
			if err := s.exhaust(ctx, k, c.Resumes); err != nil {
				s.log.Error("settling a turn past its resumptions failed", "session_id", k.SessionID, "turn_id", k.TurnID, "resumes", c.Resumes, "err", err)
			}
			continue
		}
		if err := s.resume(ctx, k, c.Resumes); err != nil {
			s.log.Error("resuming turn failed", "session_id", k.SessionID, "turn_id", k.TurnID, "err", err)
			continue
		}
		n++
	}
	return n, nil
}

// exhaust settles turn k, claimed resumes times, as failed without running
// anything more (see failUnfinished).
func (s *Service) exhaust(ctx context.Context, k TurnKey, resumes int) error {
	msg := fmt.Sprintf("the turn was resumed %d times after its process stopped and could not finish; turnd gave up on it", resumes-1)
	if err := s.failUnfinished(ctx, k, resumes, CodeRecoveryExhausted, msg); err != nil {
		return err
	}
	s.log.Warn("turn failed: recovery exhausted", "session_id", k.SessionID, "turn_id", k.TurnID, "resumes", resumes-1)
	return nil
}

// failUnfinished settles the running turn k, whose lease this process holds
// under epoch (see Commit.LeaseEpoch), as failed: every call without a final result is answered with code and
// msg (a write whose attempt was journaled is told it may have taken
// effect), and its turn_settled line carries the error. The commit holds
// only what this function writes, so whatever made the turn's own commits
// fail is not in it. A turn no longer running is left as it is.
func (s *Service) failUnfinished(ctx context.Context, k TurnKey, epoch int, code, msg string) error {
	t, err := s.store.GetTurn(ctx, k)
	if err != nil {
		return fmt.Errorf("reading turn: %w", err)
	}
	if t.Status != StatusRunning {
		return nil
	}
	sess, err := s.store.GetSession(ctx, k.SessionID)
	if err != nil {
		return fmt.Errorf("reading session: %w", err)
	}
	now := s.now()
	final := make(map[int]bool, len(t.Results))
	started := make(map[int]Result, len(t.Results))
	for _, res := range t.Results {
		if res.Status.Final() {
			final[res.Index] = true
		} else {
			started[res.Index] = res
		}
	}
	c := Commit{Key: k, LeaseOwner: s.cfg.Owner, LeaseUntil: now.Add(s.cfg.LeaseTTL), LeaseEpoch: epoch, Status: StatusFailed, SettledAt: now}
	line := func(l Line) Line {
		l.SessionID, l.TurnID, l.At = k.SessionID, k.TurnID, now
		return l
	}
	reg := s.cfg.Tools()
	for i, call := range t.Calls {
		if final[i] {
			continue
		}
		res := Result{Index: i, CallID: call.ID, Name: call.Name, Effect: dispatch.EffectWrite, Status: CallFailed,
			Error: &CallError{Code: code, Message: msg}, FinishedAt: now}
		if st, ok := started[i]; ok {
			// A write attempt was journaled and never answered.
			res.Effect, res.Attempts, res.StartedAt = st.Effect, st.Attempts, st.StartedAt
			res.Error.Message = msg + "; its attempt may have taken effect"
		} else if spec, ok := reg.Lookup(call.Name); ok {
			res.Effect = spec.Effect
		}
		c.Results = append(c.Results, res)
		c.Lines = append(c.Lines, line(Line{CallID: call.ID, Kind: LineCallAnswered, Data: answeredData(res, nil)}))
	}
	c.Lines = append(c.Lines, line(Line{Kind: LineTurnSettled, Data: mustJSON(map[string]any{
		"status": StatusFailed, "error": CallError{Code: code, Message: msg},
	})}))
	c.Webhook = settledWebhook(sess.CallbackURL, k, StatusFailed, now)
	if err := s.store.Commit(ctx, c); err != nil {
		return fmt.Errorf("settling turn: %w", err)
	}
	s.observeSettled(StatusFailed, t.CreatedAt)
	if c.Webhook != nil {
		s.wakeWebhooks()
	}
	s.cancelParked(ctx, k, StatusFailed)
	return nil
}

func (s *Service) resume(ctx context.Context, k TurnKey, epoch int) error {
	t, err := s.store.GetTurn(ctx, k)
	if err != nil {
		return fmt.Errorf("reading turn: %w", err)
	}
	if t.Status != StatusRunning {
		return nil // settled between the claim and now
	}
	sess, err := s.store.GetSession(ctx, k.SessionID)
	if err != nil {
		return fmt.Errorf("reading session: %w", err)
	}
	recorded := t.Results
	if recorded == nil {
		recorded = []Result{}
	}
	r, err := s.prepare(ctx, sess, t, recorded, false)
	if err != nil {
		return err
	}
	r.epoch = epoch
	if err := s.takeApproved(ctx, r); err != nil {
		return err
	}
	if err := r.readJournaled(ctx); err != nil {
		return err
	}
	s.log.Info("resuming turn", "session_id", k.SessionID, "turn_id", k.TurnID, "recorded", len(recorded))
	s.launch(r)
	// A cancel asked for while no wave ran the turn applies at once.
	s.applyCancelRequests(ctx, []TurnKey{k})
	return nil
}

// Shutdown stops taking turns, lets running waves finish until ctx ends,
// then cancels them (their calls are accounted as cancelled and the turns
// recorded as such), and stops the background loops. Webhook attempts in
// flight may finish until ctx ends; those cut short then are released for
// an immediate retry by a replica or the next start, and none is lost
// either way: undelivered webhooks stay in the store.
func (s *Service) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	finished := make(chan struct{})
	go func() {
		s.waves.Wait()
		close(finished)
	}()
	var err error
	select {
	case <-finished:
	case <-ctx.Done():
		err = fmt.Errorf("grace period over, cancelling running waves: %w", ctx.Err())
		s.cancelBase()
		<-finished
	}
	if s.started.Load() {
		close(s.stop)
		// Webhook attempts in flight may finish within the grace period;
		// then they are cancelled and released for a retry (see webhook.go).
		stopHooks := context.AfterFunc(ctx, s.cancelHooks)
		s.loops.Wait()
		stopHooks()
	}
	s.cancelHooks()
	s.cfg.WebhookClient.CloseIdleConnections()
	s.cancelBase()
	s.workers.close()
	return err
}
