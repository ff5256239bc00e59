package turn

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/turnd/turnd/dispatch"
	"github.com/turnd/turnd/tool"
)

// What a run adds for calls with resources or gates: the stash that keeps
// the ledger in serial order when writes start ahead of unaccounted calls,
// and the watch that releases a parked call's resources once its
// completion settles. ARCHITECTURE.md, "Per-resource scheduling", says why.

// heldPoll is how often a run holding resources rereads its completions
// when no change is announced (a lost notification costs this much).
const heldPoll = 2 * time.Second

// admitResources gives call i's admission its resources res and the gates
// of spec.
func (r *run) admitResources(i int, spec *tool.Spec, res []string, adm *dispatch.Admission) {
	st := &r.calls[i]
	st.res = res
	adm.Resources = res
	adm.Gates = spec.Gates(r.session.ID)
	st.timed = res != nil || adm.Gates != nil
}

// replayHeld gives the replay of recorded pending call i the resources it
// holds (its tool's templates over its arguments), so that calls after it
// still wait for its completion after a restart.
func (r *run) replayHeld(i int, call dispatch.Call, rec Result, adm *dispatch.Admission) {
	if rec.Status != CallPending || r.released == nil {
		return
	}
	spec, ok := r.reg.Lookup(call.Name)
	if !ok {
		return
	}
	res, err := spec.Resources(call.Arguments)
	if err != nil || res == nil {
		return
	}
	adm.Resources, adm.Effect = res, rec.Effect
	r.calls[i].holds = true
	r.hold(i)
}

// needsRelease reports whether the run's wave may hold resources: some
// call of the turn names a tool with resource templates.
func (r *run) needsRelease() bool {
	if !r.reg.HasResources() {
		return false
	}
	for _, c := range r.turn.Calls {
		if spec, ok := r.reg.Lookup(c.Name); ok && len(spec.ResourceTemplates) > 0 {
			return true
		}
	}
	return false
}

// startsInOrder reports (under mu) whether call i's attempt line may go
// to the ledger now: every call before it is accounted and none of its
// lines wait in its stash.
func (r *run) startsInOrderLocked(i int) bool {
	return r.accounted >= i && r.calls[i].stash == nil
}

// unstashLocked moves call i's waiting lines to the commit buffer (under
// mu), just before its answer.
func (r *run) unstashLocked(i int) {
	st := &r.calls[i]
	for _, l := range st.stash {
		r.bufferLocked(l)
	}
	st.stash = nil
}

// hold records that call i holds resources while parked, and starts the
// watch that releases them.
func (r *run) hold(i int) {
	r.holdMu.Lock()
	defer r.holdMu.Unlock()
	if r.held == nil {
		r.held = make(map[int]bool)
	}
	r.held[i] = true
	if !r.watching {
		r.watching = true
		go r.watchHeld()
	}
}

// commitPark commits what is buffered (call i's park among it) before the
// wave goes on: a call waiting for i's resources must not wait for a
// completion whose park is not recorded. Early deliveries apply then.
func (r *run) commitPark(ctx context.Context, i int) error {
	ctx = context.WithoutCancel(ctx)
	if err := r.ensureRecorded(ctx); err != nil {
		return fmt.Errorf("recording turn before parking call %d: %w", i, err)
	}
	if err := r.commitBuffered(ctx); err != nil {
		return fmt.Errorf("committing the park of call %d: %w", i, err)
	}
	r.svc.applyEarly(ctx, r.key)
	return nil
}

// watchHeld tells the wave of each held call whose completion resolved,
// until none is held or the wave ended.
func (r *run) watchHeld() {
	changed, stop := r.svc.Watch(r.key)
	defer stop()
	tick := time.NewTicker(heldPoll)
	defer tick.Stop()
	for {
		if !r.releaseResolved() {
			return
		}
		select {
		case <-changed:
		case <-tick.C:
		case <-r.waveDone:
			return
		}
	}
}

// releaseResolved sends the held calls whose completions resolved to the
// wave; it reports whether calls are still held and the wave runs.
func (r *run) releaseResolved() bool {
	ctx := context.WithoutCancel(r.logCtx)
	cs, err := r.svc.completions.TurnCompletions(ctx, r.key)
	if err != nil {
		r.svc.log.WarnContext(ctx, "reading a turn's completions to release parked calls' resources failed; retrying",
			"session_id", r.key.SessionID, "turn_id", r.key.TurnID, "err", err)
		return true
	}
	var done []int
	r.holdMu.Lock()
	for _, c := range cs {
		if r.held[c.CallIndex] && c.Status.Resolved() {
			delete(r.held, c.CallIndex)
			done = append(done, c.CallIndex)
		}
	}
	left := len(r.held) > 0
	if !left {
		r.watching = false
	}
	r.holdMu.Unlock()
	slices.Sort(done)
	for _, i := range done {
		select {
		case r.released <- i:
		case <-r.waveDone:
			return false
		}
	}
	return left
}

// admittedResources writes the "resources" member of a call_admitted
// line (after "name", so keys stay sorted).
func appendResources(b []byte, res []string) []byte {
	if res == nil {
		return b
	}
	b = append(b, `,"resources":[`...)
	for i, s := range res {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, s)
	}
	return append(b, ']')
}

// readJournaled notes, for a resumed turn with calls that started, which
// of them have their attempt lines in the ledger: a write that started
// ahead of unaccounted calls journaled its result row only, its lines
// waiting for its turn (see above), and the process stopped meanwhile.
func (r *run) readJournaled(ctx context.Context) error {
	started := false
	for _, rec := range r.recorded {
		started = started || rec.Status == CallStarted
	}
	if !started {
		return nil
	}
	r.journaled = make(map[string]bool)
	var after int64
	for {
		lines, err := r.svc.store.TurnLedger(ctx, r.key.SessionID, r.key.TurnID, after, 1000, MaxPageBytes)
		if err != nil {
			return fmt.Errorf("reading the ledger of the resumed turn: %w", err)
		}
		if len(lines) == 0 {
			return nil
		}
		for _, l := range lines {
			if l.Kind == LineAttemptStarted {
				r.journaled[l.CallID] = true
			}
			after = l.Seq
		}
	}
}

// restoreStartLines gives a call that started without its lines reaching
// the ledger (readJournaled) its call_admitted and attempt_started lines,
// from its started result, ahead of whatever its resume does.
func (r *run) restoreStartLines(i int, call dispatch.Call, rec Result) {
	if r.journaled == nil || r.journaled[call.ID] {
		return
	}
	var res []string
	if spec, ok := r.reg.Lookup(call.Name); ok {
		res, _ = spec.Resources(call.Arguments)
	}
	admitted := admittedLine(call, i, rec.Effect, res)
	admitted.SessionID, admitted.TurnID, admitted.At = r.key.SessionID, r.key.TurnID, rec.StartedAt
	attempt := max(rec.Attempts, 1)
	started := Line{SessionID: r.key.SessionID, TurnID: r.key.TurnID, CallID: call.ID, Kind: LineAttemptStarted,
		At: rec.StartedAt, Data: mustJSON(map[string]any{"attempt": attempt})}
	r.mu.Lock()
	r.calls[i].stash = append(r.calls[i].stash, admitted, started)
	r.mu.Unlock()
}
