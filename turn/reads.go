package turn

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/turnd/turnd/dispatch"
	"github.com/turnd/turnd/tool"
)

// All-read turns run before they are recorded and are written whole by one
// RecordTurn; anything that needs the turn stored first switches it to the
// journaled path (ensureRecorded). See ARCHITECTURE.md, "Two recording
// protocols, and why two".

// submitReads runs t on the all-read path when it qualifies; ok false means
// Submit takes the ordinary path (nothing was written, no tool ran — or, in
// a race, reads ran whose outcome the ordinary path replaces).
func (s *Service) submitReads(ctx context.Context, t Turn, early *earlyPool) (sub Submitted, ok bool, err error) {
	reg := s.cfg.Tools()
	reads, inline := readsOnly(reg, t.Calls)
	if !reads {
		return Submitted{}, false, nil
	}
	if s.recent.known(t) {
		// A repost, or a call id answered before, as seen here: the
		// ordinary path answers it without running anything again.
		return Submitted{}, false, nil
	}
	sess, cached := s.sessions.get(t.SessionID)
	if !cached {
		lk, err := s.store.LookupTurn(ctx, t.SessionID, t.ID, distinctIDs(t.Calls))
		if err != nil {
			return Submitted{}, false, fmt.Errorf("looking the turn up: %w", err)
		}
		if !lk.SessionFound {
			return Submitted{}, false, nil
		}
		s.sessions.put(lk.Session)
		if lk.TurnFound || len(lk.Answered) > 0 {
			return Submitted{}, false, nil
		}
		sess = lk.Session
	}
	r, _ := s.newRun(sess, t, reg, nil)
	r.logCtx = context.WithoutCancel(ctx)
	r.unrecorded = true
	r.head = t
	r.received = receivedLine(t, t.CreatedAt, early != nil)
	r.inline = inline
	r.early = early
	s.launch(r) // an inline wave has ended when launch returns

	select {
	case <-r.done:
	default:
		if s.awaitWindow(ctx, r) {
			return Submitted{Turn: visible(t)}, true, nil
		}
	}
	r.recMu.Lock()
	conflict := r.conflict != nil
	r.recMu.Unlock()
	if conflict {
		return Submitted{}, false, nil
	}
	if r.settleErr != nil {
		return Submitted{}, true, r.settleErr
	}
	return Submitted{Turn: visible(r.final)}, true, nil
}

// awaitWindow waits for r's wave until Submit's window ends. A wave still
// running then is recorded as running, and awaitWindow reports true: the
// caller answers as for any turn (and awaits it). When recording fails
// the wave goes on unrecorded, is recorded whole at its end, and
// awaitWindow waits for that end.
func (s *Service) awaitWindow(ctx context.Context, r *run) bool {
	window := time.NewTimer(s.cfg.ReadTurnWindow)
	defer window.Stop()
	select {
	case <-r.done:
		return false
	case <-window.C:
	}
	if err := r.ensureRecorded(context.WithoutCancel(ctx)); err == nil {
		r.recMu.Lock()
		recorded := !r.unrecorded
		r.recMu.Unlock()
		if recorded {
			return true
		}
	}
	<-r.done
	return false
}

// readsOnly reports, in one pass over a turn's calls, whether every call
// is a read that cannot park (a call of an unregistered tool qualifies: it
// is refused, nothing runs), and whether the wave is inline: every call a
// read of a registered tool that dispatch.Inline allows, so that Submit
// runs the wave itself (see ARCHITECTURE.md, "The inline rule").
func readsOnly(reg *tool.Registry, calls []Call) (reads, inline bool) {
	inline = true
	for _, c := range calls {
		spec, ok := reg.Lookup(c.Name)
		if !ok {
			inline = false
			continue
		}
		if spec.Effect != dispatch.EffectRead || spec.Deferred {
			return false, false
		}
		inline = inline && dispatch.Inline(spec.Impl, spec.Effect, spec.Retry)
	}
	return true, inline
}

func distinctIDs(calls []Call) []string {
	ids := make([]string, 0, len(calls))
	seen := make(map[string]struct{}, len(calls))
	for _, c := range calls {
		if _, dup := seen[c.ID]; !dup {
			seen[c.ID] = struct{}{}
			ids = append(ids, c.ID)
		}
	}
	return ids
}

// ensureRecorded records an unrecorded run's turn as running under this
// process's lease, with its turn_received line, and makes the run an
// ordinary one (renewed, cancellable, awaited). A no-op for a recorded run
// and for one whose wave ended. The run assumed that none of its call ids
// was answered earlier in the session; from here on its commits no longer
// check that (RecordTurn does), so it is checked first. When one was, or
// when the turn id turned out to be taken, nothing is recorded, the wave is
// cancelled and the run marked in conflict (Submit takes the ordinary path).
func (r *run) ensureRecorded(ctx context.Context) error {
	r.recMu.Lock()
	defer r.recMu.Unlock()
	if !r.unrecorded || r.finished {
		return nil
	}
	s := r.svc
	t := r.head
	t.Results = nil
	answered, err := s.store.Answered(ctx, t.SessionID, distinctIDs(t.Calls))
	if err != nil {
		return fmt.Errorf("reading answered calls: %w", err)
	}
	if len(answered) > 0 {
		r.conflict = ErrCallsAnswered
		r.cancel()
		return fmt.Errorf("recording turn: %w", ErrCallsAnswered)
	}
	_, err = s.store.ReceiveTurn(ctx, Receive{
		Session:    r.session,
		Turn:       t,
		Line:       r.received,
		LeaseOwner: s.cfg.Owner,
		LeaseUntil: s.now().Add(s.cfg.LeaseTTL),
	})
	if errors.Is(err, ErrTurnExists) {
		r.conflict = ErrTurnExists
		r.cancel()
	}
	if err != nil {
		return fmt.Errorf("recording turn: %w", err)
	}
	r.unrecorded = false
	s.mu.Lock()
	s.active[r.key] = r
	s.mu.Unlock()
	return nil
}

// recordWhole records an unrecorded run's turn with everything its wave
// buffered (c, whose lines follow turn_received) and status, in one write
// (RecordTurn). whole is false, with nothing done, for a recorded run.
func (r *run) recordWhole(ctx context.Context, c Commit, status Status, settledAt time.Time) (whole bool, err error) {
	r.recMu.Lock()
	defer r.recMu.Unlock()
	if !r.unrecorded {
		return false, nil
	}
	r.finished = true
	if r.conflict != nil {
		// Given up already (ensureRecorded): its wave was cancelled and
		// the ordinary path runs the turn.
		return true, r.conflict
	}
	if len(c.Parks) > 0 {
		// Cannot happen: issuing a key records the turn first.
		return true, errors.New("parked calls in a turn not recorded")
	}
	t := r.head
	t.Status, t.SettledAt, t.Results = status, settledAt, nil
	rec := Record{
		Turn:    t,
		Lines:   append([]Line{r.received}, c.Lines...),
		Results: c.Results,
		Outputs: c.Outputs,
		Webhook: c.Webhook,
	}
	// Nothing of the turn is stored and its reads may run again: while the
	// store is away the client is answered unavailable after a few tries
	// (a recorded turn's outcomes are held until it is back: untilStored).
	for attempt, delay := 0, 50*time.Millisecond; attempt < 6; attempt, delay = attempt+1, delay*2 {
		if err = r.record(ctx, rec); err == nil || !errors.Is(err, ErrUnavailable) {
			break
		}
		time.Sleep(delay)
	}
	switch {
	case errors.Is(err, ErrTurnExists), errors.Is(err, ErrCallsAnswered):
		r.conflict = err
	case errors.Is(err, ErrNotFound):
		// The cached session is not in the store (a store replaced under a
		// running service): forget it, and let the ordinary path decide.
		r.svc.sessions.forget(t.SessionID)
		r.conflict = err
	}
	return true, err
}

func (r *run) record(ctx context.Context, rec Record) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return r.svc.store.RecordTurn(ctx, rec)
}
