package turn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/turnd/turnd/budget"
	"github.com/turnd/turnd/dispatch"
	"github.com/turnd/turnd/tool"
)

// run is one turn's wave in this process. It is the wave's dispatch.Host:
// Admit and Account run on the dispatcher's driving goroutine, in call
// order; BeforeAttempt runs on tool goroutines, hence the mutex on the
// commit buffer.
type run struct {
	svc     *Service
	key     TurnKey
	turn    Turn
	session Session
	reg     *tool.Registry
	proj    *budget.Projector
	// index maps a call id to its position (first occurrence).
	index map[string]int
	// answered holds earlier answers of this turn's call ids in the session.
	answered map[string]Result
	// recorded holds this turn's own results from before a resume.
	recorded map[int]Result
	resumed  bool

	calls []callState // per call index; touched only by the driving goroutine, except admittedLine (under mu)

	mu      sync.Mutex
	pending Commit // lines, results and outputs not yet committed
	// filling is the mid-wave commit being filled, committing the one
	// being written (under mu; writeahead.go).
	filling, committing *aheadBatch

	ctx    context.Context
	cancel context.CancelFunc
	// cancelRequested: Cancel stopped the wave; the turn ends cancelled.
	cancelRequested atomic.Bool
	// settling: the wave ended and its settling commit (to waiting or
	// settled, which releases the lease) is under way or done. The run
	// stays active until its goroutine ends; a renewal that finds its lease
	// gone then lost nothing (see renew).
	settling atomic.Bool
	// leaseLost: another owner took the turn's lease while this wave ran.
	// The wave's state is stale from then on: none of its commits may
	// apply, even should this process claim the lease back (see commit).
	leaseLost atomic.Bool
	done      chan struct{}

	final     Turn
	settleErr error

	// An all-read turn runs unrecorded and is recorded whole by its
	// settling write (RecordTurn, see reads.go); whatever needs it in the
	// store sooner — a write attempt, a completion key, a wave outlasting
	// Submit's window — records it as running first (ensureRecorded), and
	// the rest of the wave is journaled as any other's. recMu orders those
	// against each other; the fields below are under it.
	recMu      sync.Mutex
	unrecorded bool
	head       Turn // the turn as received, without results (unrecorded only)
	received   Line // its turn_received line (unrecorded only)
	finished   bool // the wave ended (recorded whole, or not at all)
	// logCtx carries the values of the request that submitted the turn (its
	// request id, for the logger) without its cancellation: the wave's log
	// lines belong to that request. Background for a recovered turn.
	logCtx   context.Context
	conflict error // why recording was refused: Submit takes the ordinary path
	// inline: the wave runs on the goroutine that launches it (every call
	// is a read of an inline tool, see readsOnly), set before launch.
	inline bool
	// keyed holds the completion key hashes issued to calls, by index
	// (under mu): Account closes the key of a call that did not park.
	keyed map[int][32]byte
	// parked: a call of this wave parked (driving goroutine only).
	parked bool
	// early holds the reads a streamed turn started before it was
	// submitted (stream.go); nil for a turn posted whole. leading caches
	// leadingReads (-1 until computed).
	early   *earlyPool
	leading int

	// accounted counts the calls accounted so far (under mu): a write
	// attempt of a later call journals its lines after them (resources.go).
	accounted int
	// released tells the wave which parked calls no longer hold their
	// resources (nil when no tool of the turn declares any); waveDone is
	// closed when the wave ended. held and watching are under holdMu.
	released chan int
	waveDone chan struct{}
	holdMu   sync.Mutex
	held     map[int]bool
	watching bool
	// journaled: the calls of a resumed turn whose attempt lines are in
	// the ledger (nil: all that started are; see readJournaled).
	journaled map[string]bool
	// budget splits the turn budget among the calls' outputs (Account
	// only; turnbudget.go).
	budget *turnBudget
	// span is the turn's span while its wave runs (nil: tracing off).
	span trace.Span
}

type callState struct {
	spec         *tool.Spec
	admitted     bool // Admit cleared it to run
	replayedFrom string
	// silent: the call was accounted before a resume; its lines exist.
	silent       bool
	admittedLine bool // call_admitted already buffered (write-ahead)
	// early is the streamed turn's early run that admission adopted for
	// the call's first attempt (stream.go).
	early *earlyRun
	// res are the call's admitted resources; timed: it has resources or
	// gates, so its answer says when it was admitted and cleared to run.
	// stash holds its call_admitted and attempt lines while calls before it
	// are unaccounted (under mu; see resources.go).
	res   []string
	timed bool
	stash []Line
	// holds: replayed after a resume as parked, it holds its resources.
	holds bool
}

// prepare builds a run for t. recorded carries the results of a resumed
// turn (nil for a new one); freshSession skips the lookup of earlier answers
// in a session this turn created.
func (s *Service) prepare(ctx context.Context, sess Session, t Turn, recorded []Result, freshSession bool) (*run, error) {
	r, ids := s.newRun(sess, t, s.cfg.Tools(), recorded)
	if len(ids) > 0 && !freshSession {
		answered, err := s.store.Answered(ctx, t.SessionID, ids)
		if err != nil {
			return nil, fmt.Errorf("reading answered calls: %w", err)
		}
		// A resumed turn's own answers are in recorded, not replays.
		for id, res := range answered {
			if res.ReplayedFrom == t.ID {
				delete(answered, id)
			}
		}
		r.answered = answered
	}
	return r, nil
}

// newRun builds a run for t with registry reg; recorded carries the results
// of a resumed turn (nil for a new one). It returns the turn's distinct call
// ids in call order.
func (s *Service) newRun(sess Session, t Turn, reg *tool.Registry, recorded []Result) (*run, []string) {
	r := &run{
		svc:     s,
		key:     TurnKey{t.SessionID, t.ID},
		turn:    t,
		session: sess,
		reg:     reg,
		proj:    projectorFor(s, sess),
		index:   make(map[string]int, len(t.Calls)),
		calls:   make([]callState, len(t.Calls)),
		done:    make(chan struct{}),
		logCtx:  context.Background(),
		leading: -1,
	}
	ids := make([]string, 0, len(t.Calls))
	for i, c := range t.Calls {
		if _, dup := r.index[c.ID]; !dup {
			r.index[c.ID] = i
			ids = append(ids, c.ID)
		}
	}
	if recorded != nil {
		r.resumed = true
		r.recorded = make(map[int]Result, len(recorded))
		for _, res := range recorded {
			r.recorded[res.Index] = res
		}
	}
	// Room for the wave's results and lines (a received, an admitted and
	// an answered line per call, and the settled line): a turn of n calls
	// then appends without growing.
	n := len(t.Calls)
	r.turn.Results = make([]Result, 0, n)
	r.pending.Results, r.pending.Lines = make([]Result, 0, n), make([]Line, 0, 2*n+2)
	return r, ids
}

// launch starts the run's wave on a goroutine owned by the service.
func (s *Service) launch(r *run) {
	ctx, cancel := context.WithCancel(s.base)
	ctx = tool.WithProjector(ctx, r.proj, s.cfg.OutputKeepCap)
	ctx = tool.WithCallContext(ctx, tool.CallContext{SessionID: r.key.SessionID, TurnID: r.key.TurnID, CompleteURL: s.cfg.CompleteURL, Progress: r})
	r.ctx, r.cancel = ctx, cancel
	s.mu.Lock()
	if !r.unrecorded {
		// An unrecorded run joins active once recorded (ensureRecorded):
		// until then no lease of it exists to renew, cancel or recover.
		s.active[r.key] = r
	}
	s.waves.Add(1)
	s.mu.Unlock()
	run := s.workers.run
	if r.inline {
		run = runHere
	}
	if r.early != nil {
		r.early.own()
	}
	run(func() {
		defer s.waves.Done()
		defer cancel()
		r.execute()
		if r.early != nil {
			r.early.release()
		}
		r.recMu.Lock()
		r.finished = true
		r.recMu.Unlock()
		s.mu.Lock()
		if s.active[r.key] == r {
			delete(s.active, r.key)
		}
		s.mu.Unlock()
		close(r.done)
	})
}

// runHere runs f, a wave, on the calling goroutine. A panic in it ends the
// process, as it would on a worker's goroutine, instead of reaching the
// HTTP server's recovery: a wave that died half way (perhaps leading a
// recording statement of other turns) must not leave a process that goes
// on serving. Recovery resumes its turns in the next process, as after
// any crash.
func runHere(f func()) {
	defer func() {
		if v := recover(); v != nil {
			stack := debug.Stack()
			go panic(fmt.Sprintf("turn: a wave run inline panicked: %v\n\n%s", v, stack))
			select {} // this goroutine serves nothing more
		}
	}()
	f()
}

func (r *run) execute() {
	s := r.svc
	defer r.waveEnded()
	if r.resumed {
		r.buffer(Line{Kind: LineTurnResumed, Data: mustJSON(map[string]any{"owner": s.cfg.Owner})})
	}
	calls := make([]dispatch.Call, len(r.turn.Calls))
	for i, c := range r.turn.Calls {
		calls[i] = dispatch.Call{ID: c.ID, Name: c.Name, Arguments: c.Arguments}
	}
	wave := dispatch.Wave{
		Calls:          calls,
		Mode:           r.turn.Mode,
		FailurePolicy:  r.turn.FailurePolicy,
		MaxConcurrency: s.cfg.MaxConcurrency,
		Keys:           keyIssuer{r},
		Now:            s.now,
	}
	if r.needsRelease() {
		r.released, r.waveDone = make(chan int), make(chan struct{})
		wave.Released = r.released
	}
	s.cfg.Observer.WaveStarted(len(calls))
	report, err := wave.Run(r.ctx, r.host())
	if r.waveDone != nil {
		close(r.waveDone)
	}
	status := StatusCompleted
	switch {
	case err != nil && errors.Is(err, ErrLeaseLost):
		// Another owner took the turn over; it will settle it.
		s.log.WarnContext(r.logCtx, "turn lease lost; another owner continues it", "session_id", r.key.SessionID, "turn_id", r.key.TurnID)
		r.settleErr = fmt.Errorf("running turn: %w", err)
		r.final = r.turn
		return
	case err != nil:
		s.log.ErrorContext(r.logCtx, "wave aborted", "session_id", r.key.SessionID, "turn_id", r.key.TurnID, "err", err)
		r.settleErr = fmt.Errorf("running turn: %w", err)
		r.final = r.turn
		return
	case r.cancelRequested.Load():
		status = StatusCancelled
	case report.Pending > 0:
		status = StatusWaiting
	case report.Tainted:
		status = StatusFailed
	case report.Interrupted || (r.ctx.Err() != nil && report.Cancelled > 0):
		status = StatusCancelled
	}
	r.settle(status)
}

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
		if ferr := s.failUnfinished(ctx, r.key, CodeStoreRejected, msg); ferr == nil {
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
	if webhook {
		s.wakeWebhooks()
	}
	if status == StatusWaiting {
		// A delivery may have raced the pending answer (kept as early), or
		// resolved a parked call while later calls of the wave still ran.
		if !s.applyEarly(ctx, r.key) {
			s.settleResolved(ctx, r.key, r.session.CallbackURL, r.turn.CreatedAt)
		}
		if t, err := s.store.GetTurn(ctx, r.key); err == nil {
			r.final = t
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
	c.Key = r.key
	c.LeaseOwner = r.svc.cfg.Owner
	c.LeaseUntil = r.svc.now().Add(r.svc.cfg.LeaseTTL)
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

// Admit implements dispatch.Host.
func (r *run) Admit(_ context.Context, call dispatch.Call) dispatch.Admission {
	adm := r.admit(call)
	if r.early != nil {
		adm = r.adoptEarly(call, adm)
	}
	return adm
}

func (r *run) admit(call dispatch.Call) dispatch.Admission {
	i, ok := r.index[call.ID]
	if !ok {
		return dispatch.Admission{Verdict: dispatch.Refuse, Outcome: dispatch.Refused("unknown_call", "call id not in this turn")}
	}
	st := &r.calls[i]
	if rec, ok := r.recorded[i]; ok {
		if rec.Status.Final() {
			st.silent = true
			adm := dispatch.Admission{Verdict: dispatch.Replay, Outcome: outcomeOf(rec)}
			r.replayHeld(i, call, rec, &adm)
			return adm
		}
	}
	if rec, ok := r.recorded[i]; ok && rec.Status == CallStarted {
		// A write attempt was journaled before its process stopped and never
		// answered: it may have taken effect. Only a tool still registered as
		// idempotent may run it again; anything else (the tool gone or
		// changed) is answered "interrupted", never refused as if unrun.
		spec, found := r.reg.Lookup(call.Name)
		if !found || !spec.Idempotent || !r.session.Granted(call.Name) || spec.Validate(call.Arguments) != nil {
			st.admittedLine = true
			r.restoreStartLines(i, call, rec)
			interrupted := Result{
				Status: CallFailed,
				Error: &CallError{Code: CodeInterrupted, Message: "the process running this call stopped during its attempt; " +
					"it was not run again because it may have taken effect and the tool is not idempotent"},
				Attempts:   rec.Attempts,
				StartedAt:  rec.StartedAt,
				FinishedAt: r.svc.now(),
				Effect:     rec.Effect,
			}
			return dispatch.Admission{Verdict: dispatch.Replay, Outcome: outcomeOf(interrupted)}
		}
	}
	if prev, ok := r.answered[call.ID]; ok {
		if prev.Status == CallPending {
			// Its result will arrive in the turn that parked it, not here:
			// replaying "pending" would leave this turn waiting on a
			// completion that settles the other one.
			return dispatch.Admission{Verdict: dispatch.Refuse, Outcome: dispatch.Refused("call_pending",
				fmt.Sprintf("call %q is waiting for its result in turn %q; read it there once it arrives", call.ID, prev.ReplayedFrom))}
		}
		st.replayedFrom = prev.ReplayedFrom
		return dispatch.Admission{Verdict: dispatch.Replay, Outcome: outcomeOf(prev)}
	}
	if msg, bad := unparsedArguments(call.Arguments); bad {
		return dispatch.Admission{Verdict: dispatch.Refuse, Outcome: dispatch.Refused("invalid_arguments", msg)}
	}
	spec, ok := r.reg.Lookup(call.Name)
	if !ok {
		return dispatch.Admission{Verdict: dispatch.Refuse, Outcome: dispatch.Refused("unknown_tool", fmt.Sprintf("no tool named %q is registered", call.Name))}
	}
	if !r.session.Granted(call.Name) {
		return dispatch.Admission{Verdict: dispatch.Refuse, Outcome: dispatch.Refused("tool_not_granted", fmt.Sprintf("tool %q is not granted to this session", call.Name))}
	}
	if err := spec.Validate(call.Arguments); err != nil {
		return dispatch.Admission{Verdict: dispatch.Refuse, Outcome: dispatch.Refused("invalid_arguments", err.Error())}
	}
	adm := dispatch.Admission{Verdict: dispatch.Run, Tool: spec.Impl, Effect: spec.Effect, Retry: spec.Retry}
	if (spec.ResourceTemplates != nil || spec.Limit != nil || spec.SessionLimit != nil) && !r.admitResources(i, call, spec, &adm) {
		return adm
	}
	st.spec = spec
	st.admitted = true
	return adm
}

// BeforeAttempt implements dispatch.AttemptHook: a write call's attempt is
// journaled and committed (with everything accounted before it) before the
// tool runs.
func (r *run) BeforeAttempt(ctx context.Context, call dispatch.Call, effect dispatch.Effect, attempt int) error {
	if effect == dispatch.EffectRead {
		return nil
	}
	// Write-ahead needs the turn in the store first (a no-op once it is).
	if err := r.ensureRecorded(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("journaling attempt %d of %s: %w", attempt, call.ID, err)
	}
	i := r.index[call.ID]
	started := Line{SessionID: r.key.SessionID, TurnID: r.key.TurnID, CallID: call.ID,
		Kind: LineAttemptStarted, At: r.svc.now(), Data: mustJSON(map[string]any{"attempt": attempt})}
	r.mu.Lock()
	st := &r.calls[i]
	inOrder := r.startsInOrderLocked(i)
	if !st.admittedLine {
		st.admittedLine = true
		l := admittedLine(call, i, effect, st.res)
		if inOrder {
			r.bufferLocked(l)
		} else {
			l.SessionID, l.TurnID, l.At = r.key.SessionID, r.key.TurnID, r.svc.now()
			st.stash = append(st.stash, l)
		}
	}
	held := r.takeLocked() // what was accounted before this attempt
	var lines []Line
	if inOrder {
		lines = []Line{started}
	} else {
		// Calls before this one are still unaccounted: its lines join the
		// ledger when it is accounted, its started result commits now.
		st.stash = append(st.stash, started)
	}
	b, lead, prev := r.joinLocked(held, lines, []Result{{
		Index: i, CallID: call.ID, Name: call.Name, Effect: effect, Status: CallStarted,
		Attempts: attempt, StartedAt: r.svc.now(),
	}})
	r.mu.Unlock()
	if err := r.await(ctx, b, lead, prev); err != nil {
		// The attempt is not journaled, so the tool does not run (await put
		// what was accounted before it back in the buffer).
		if !inOrder {
			r.mu.Lock()
			st.stash = st.stash[:len(st.stash)-1] // the attempt did not start
			r.mu.Unlock()
		}
		return fmt.Errorf("journaling attempt %d of %s: %w", attempt, call.ID, err)
	}
	return nil
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

// Account implements dispatch.Host: it turns the call's outcome into its
// result and ledger lines, in call order, into the commit buffer.
func (r *run) Account(_ context.Context, a dispatch.Accounted) error {
	i := a.Index
	var st *callState
	if i >= 0 && i < len(r.calls) {
		st = &r.calls[i]
	} else {
		st = &callState{}
	}
	if st.silent {
		// Accounted before a resume: its result and lines are recorded.
		res := r.recorded[i]
		r.spendRecorded(res)
		r.turn.Results = append(r.turn.Results, res)
		r.mu.Lock()
		r.accounted = i + 1
		r.mu.Unlock()
		if st.holds {
			// Calls after it may wait long for its completion: what the
			// resume wrote so far (turn_resumed) is recorded now.
			return r.commitBuffered(r.ctx)
		}
		return nil
	}
	if e := st.early; e != nil && a.Attempts > 0 {
		// Attempt 1 waited for the early run (stream.go), so e is done.
		a = e.startedFirst(a)
	}
	res := r.resultOf(a)
	res.ReplayedFrom = st.replayedFrom
	var out *Output
	if a.Verdict == dispatch.Run && a.Outcome.Status != dispatch.StatusRefused {
		out = r.projectCall(st.spec, &res, a.Outcome)
	} else {
		r.spendRecorded(res)
	}
	r.mu.Lock()
	if h, keyed := r.keyed[i]; keyed && a.Verdict == dispatch.Run && res.Status != CallPending {
		// Closing the key reads and writes the store: not under mu.
		r.mu.Unlock()
		res, out = r.closeKey(h, res, out)
		r.mu.Lock()
	}
	defer r.observeAccounted(a, res.Status)
	if st.stash != nil {
		r.unstashLocked(i)
	}
	switch {
	case st.replayedFrom != "":
		r.bufferLocked(Line{CallID: res.CallID, Kind: LineCallReplayed, Data: mustJSON(map[string]any{
			"from_turn": st.replayedFrom, "status": res.Status,
		})})
	case res.Status == CallRefused:
		r.bufferLocked(Line{CallID: res.CallID, Kind: LineCallRefused, Data: mustJSON(res.Error)})
	case !a.Admitted:
		// Cancelled before admission: no call_admitted line.
		r.bufferLocked(Line{CallID: res.CallID, Kind: LineCallAnswered, Data: answeredData(res, a.Outcome)})
	default:
		if !st.admittedLine {
			st.admittedLine = true
			r.bufferLocked(admittedLine(a.Call, i, a.Effect, a.Resources))
		}
		if res.Status == CallPending {
			r.parked = true
			pk, data := r.svc.park(a.Outcome, r.svc.now())
			r.pending.Parks = append(r.pending.Parks, pk)
			r.bufferLocked(Line{CallID: res.CallID, Kind: LineCallPending, Data: mustJSON(data)})
		} else {
			data := answeredData(res, a.Outcome)
			if a.Tries != nil {
				data = withTries(data, a.Tries)
			}
			if st.timed {
				data = withWaits(data, a.AdmittedAt, a.ReadyAt, a.GatedAt)
			}
			r.bufferLocked(Line{CallID: res.CallID, Kind: LineCallAnswered, Data: data})
		}
	}
	r.pending.Results = append(r.pending.Results, res)
	if out != nil {
		r.pending.Outputs = append(r.pending.Outputs, *out)
	}
	r.accounted = i + 1
	r.mu.Unlock()
	r.turn.Results = append(r.turn.Results, res)
	if res.Status == CallPending && a.Resources != nil && r.released != nil {
		// Calls after it may wait for its resources: record the park now.
		r.hold(i)
		return r.commitPark(r.ctx, i)
	}
	return nil
}

// The data of call_admitted and call_answered lines, the lines of every
// call: structs rather than maps, whose encoding sorts keys at run time.
// Fields are in key order, so the bytes are those a map would give.
// The ledger lines' data are written by hand, as json.Marshal wrote them
// from structs before (the tests hold them to it): this runs for every call.

func admittedLine(call dispatch.Call, index int, effect dispatch.Effect, res []string) Line {
	b := make([]byte, 0, 40+len(effect)+len(call.Name))
	b = append(b, `{"effect":`...)
	b = appendJSONString(b, string(effect))
	b = append(b, `,"index":`...)
	b = strconv.AppendInt(b, int64(index), 10)
	b = append(b, `,"name":`...)
	b = appendJSONString(b, call.Name)
	b = appendResources(b, res)
	return Line{CallID: call.ID, Kind: LineCallAdmitted, Data: append(b, '}')}
}

func answeredData(res Result, _ dispatch.Outcome) json.RawMessage {
	b := make([]byte, 0, 64)
	b = append(b, `{"attempts":`...)
	b = strconv.AppendInt(b, int64(res.Attempts), 10)
	if res.Error != nil {
		b = append(b, `,"error":{"code":`...)
		b = appendJSONString(b, res.Error.Code)
		b = append(b, `,"message":`...)
		b = appendJSONString(b, res.Error.Message)
		b = append(b, '}')
	}
	if res.Truncated {
		b = append(b, `,"original_bytes":`...)
		b = strconv.AppendInt(b, res.OriginalBytes, 10)
		b = append(b, `,"original_lines":`...)
		b = strconv.AppendInt(b, res.OriginalLines, 10)
	}
	if res.OutputID != "" {
		b = append(b, `,"output_id":`...)
		b = appendJSONString(b, res.OutputID)
	}
	if res.Repaired > 0 {
		b = append(b, `,"output_repaired":`...)
		b = strconv.AppendInt(b, int64(res.Repaired), 10)
	}
	if res.Projection != nil {
		b = appendProjection(b, res.Projection)
	}
	b = append(b, `,"status":`...)
	b = appendJSONString(b, string(res.Status))
	if res.Truncated {
		b = append(b, `,"truncated":true`...)
	}
	return append(b, '}')
}

// withTries adds a retried call's attempts to its call_answered data as
// "attempt_times", first (the key sorts before "attempts"): each
// attempt's finished_at, outcome and started_at. A call tried once has
// none, so its line is as it always was.
func withTries(data json.RawMessage, tries []dispatch.Try) json.RawMessage {
	b := make([]byte, 0, len(data)+112*len(tries))
	b = append(b, `{"attempt_times":[`...)
	for i, t := range tries {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"finished_at":"`...)
		b = t.FinishedAt.UTC().AppendFormat(b, time.RFC3339Nano)
		b = append(b, `","outcome":`...)
		b = appendJSONString(b, tryOutcome(t))
		b = append(b, `,"started_at":"`...)
		b = t.StartedAt.UTC().AppendFormat(b, time.RFC3339Nano)
		b = append(b, `"}`...)
	}
	b = append(b, "],"...)
	return append(b, data[1:]...)
}

// tryOutcome is how an attempt ended, as attempt_times says it: ok,
// pending, timed_out, cancelled, or its error's code.
func tryOutcome(t dispatch.Try) string {
	switch {
	case t.Status == dispatch.StatusOK:
		return "ok"
	case t.Status == dispatch.StatusPending:
		return "pending"
	case t.Err != nil && t.Err.TimedOut:
		return "timed_out"
	case t.Status == dispatch.StatusCancelled:
		return "cancelled"
	case t.Err != nil && t.Err.Code != "":
		code, _ := repairString(t.Err.Code) // a tool's text (repair.go)
		return code
	}
	return "error"
}

// resultOf maps an accounted outcome to a result (without its output).
func (r *run) resultOf(a dispatch.Accounted) Result {
	res := Result{
		Index:      a.Index,
		CallID:     a.Call.ID,
		Name:       a.Call.Name,
		Effect:     a.Effect,
		Attempts:   a.Attempts,
		StartedAt:  a.StartedAt.UTC(),
		FinishedAt: a.FinishedAt.UTC(),
	}
	if res.Effect == "" {
		res.Effect = dispatch.EffectWrite
	}
	o := a.Outcome
	switch o.Status {
	case dispatch.StatusOK:
		res.Status = CallOK
	case dispatch.StatusPending:
		res.Status = CallPending
	case dispatch.StatusRefused:
		res.Status = CallRefused
	case dispatch.StatusCancelled:
		res.Status = CallCancelled
	default:
		res.Status = CallFailed
	}
	if o.Err != nil {
		// A tool's error is text a store must hold too (repair.go).
		code, n1 := repairString(o.Err.Code)
		msg, n2 := repairString(o.Err.Message)
		res.Repaired += n1 + n2
		e := &CallError{Code: code, Message: msg}
		if o.Status == dispatch.StatusError && o.Err.Retryable {
			// The retry policy ran out on an error worth retrying.
			e.Code = "tool_unavailable"
			e.Message = fmt.Sprintf("%s (after %d attempts)", o.Err.Message, a.Attempts)
		}
		res.Error = e
	}
	if a.Verdict == dispatch.Replay {
		// A replayed outcome carries its recorded projection in Detail.
		if rec, ok := o.Detail.(Result); ok {
			res.Status = rec.Status
			res.Error = rec.Error
			res.Output = rec.Output
			res.Truncated = rec.Truncated
			res.OriginalBytes = rec.OriginalBytes
			res.OriginalLines = rec.OriginalLines
			res.OutputID = rec.OutputID
			res.Attempts = rec.Attempts
			res.StartedAt = rec.StartedAt
			res.FinishedAt = rec.FinishedAt
			if rec.Effect != "" {
				res.Effect = rec.Effect
			}
		}
	}
	if res.Status == CallRefused || res.Status == CallCancelled {
		if res.StartedAt.IsZero() {
			res.FinishedAt = time.Time{}
		}
	}
	return res
}

// project budgets the outcome's output into res with proj and returns the
// full output of turn k to keep when it was truncated (a prefix of it when
// it exceeded the keep cap).
func (s *Service) project(k TurnKey, proj *budget.Projector, res *Result, o dispatch.Outcome) *Output {
	var (
		pr    budget.Result
		full  []byte
		ctype string
	)
	switch d := o.Detail.(type) {
	case *tool.Projected:
		pr, full, ctype = d.Result, d.Full, d.ContentType
		if d.Stream != nil {
			pr = d.Stream.ResultWithin(proj.Config().Limit) // the turn budget's share
		}
		if ctype == "" {
			ctype = "text/plain; charset=utf-8"
		}
	default:
		if o.Output == nil {
			return nil
		}
		full = o.Output
		if o.JSON {
			ctype = "application/json"
			var err error
			pr, err = proj.ProjectJSON(o.Output)
			if err != nil {
				// Not JSON after all: budget it as text.
				pr = proj.Project(o.Output)
				ctype = "text/plain; charset=utf-8"
			}
		} else {
			ctype = "text/plain; charset=utf-8"
			pr = proj.Project(o.Output)
		}
	}
	// The tool boundary: nothing a store cannot hold goes further (repair.go).
	if pr.JSON {
		text, n := repairJSON(pr.Text)
		res.Output = json.RawMessage(text)
		res.Repaired += n
	} else {
		text, n := repairText(pr.Text)
		res.Output = mustJSON(string(text))
		res.Repaired += n
	}
	if n := res.Repaired; n > 0 {
		s.log.Warn("tool output repaired: invalid UTF-8 or NUL replaced by U+FFFD", "session_id", k.SessionID, "turn_id", k.TurnID, "call_id", res.CallID, "tool", res.Name, "replaced", n)
	}
	res.Truncated = pr.Truncated
	res.OriginalBytes = pr.OriginalBytes
	noteProjection(res, proj, pr)
	s.observeProjection(pr)
	res.OriginalLines = pr.OriginalLines
	if !pr.Truncated {
		return nil
	}
	if keep := s.cfg.OutputKeepCap; int64(len(full)) > keep {
		full = full[:keep]
	}
	now := s.now()
	id := outputID(k.SessionID)
	res.OutputID = id
	return &Output{
		ID: id, SessionID: k.SessionID, TurnID: k.TurnID, CallID: res.CallID,
		ContentType: ctype, Data: full, CreatedAt: now, ExpiresAt: now.Add(s.cfg.OutputRetention),
	}
}

// outcomeOf turns a recorded result back into an outcome for replay; the
// result itself rides in Detail so that Account copies its projection.
func outcomeOf(rec Result) dispatch.Outcome {
	o := dispatch.Outcome{Detail: rec}
	switch rec.Status {
	case CallOK:
		o.Status = dispatch.StatusOK
	case CallPending:
		o.Status = dispatch.StatusPending
	case CallRefused:
		o.Status = dispatch.StatusRefused
	case CallCancelled:
		o.Status = dispatch.StatusCancelled
	default:
		o.Status = dispatch.StatusError
	}
	if rec.Error != nil {
		o.Err = &dispatch.Error{Code: rec.Error.Code, Message: rec.Error.Message}
	}
	return o
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("turn: marshalling ledger data: %v", err))
	}
	return b
}
