package turn

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/turnd/turnd/budget"
	"github.com/turnd/turnd/dispatch"
	"github.com/turnd/turnd/tool"
)

// Streamed turns: a frontend tees the model's stream to turnd, whose Stream
// starts the leading reads early and records nothing until the stream ends
// cleanly, when Submit runs the turn as a whole post would. See
// ARCHITECTURE.md, "Streamed turns".

// StreamObserver may also be implemented by Config.Observer to watch
// streamed turns.
type StreamObserver interface {
	// StreamedTurn: a streamed turn ended; format is the stream's format
	// (openai.chat, openai.responses, anthropic.messages, ndjson), outcome
	// one of the StreamOutcome constants.
	StreamedTurn(format string, outcome StreamOutcome)
	// EarlyCall: an early run's outcome was used by its turn, or discarded.
	// lead is how long before the stream's end the used outcome was ready
	// (zero when it was not ready then, or for a discarded one).
	EarlyCall(used bool, lead time.Duration)
}

// StreamOutcome is how a streamed turn ended.
type StreamOutcome string

const (
	// StreamCompleted: the stream ended cleanly and its turn was submitted.
	StreamCompleted StreamOutcome = "completed"
	// StreamIncomplete: the stream broke (or was refused) before its turn
	// was submitted; nothing was recorded.
	StreamIncomplete StreamOutcome = "incomplete"
	// StreamReplayed: the stream's turn id was recorded already; it was
	// answered from the record.
	StreamReplayed StreamOutcome = "replayed"
)

// Stream is one streamed turn being received. Add and Abort, and Submit,
// are called from one goroutine (the request's), in that order.
type Stream struct {
	svc       *Service
	sessionID string
	turnID    string
	format    string
	reg       *tool.Registry
	pool      *earlyPool

	// lookup is read once, at the first call that may start early.
	lookupOnce sync.Once
	lookupDone chan struct{}
	lookup     Lookup
	lookupErr  error

	projOnce sync.Once
	proj     *budget.Projector

	calls   []Call
	ids     map[string]struct{}
	leading bool // every call so far is a read of a registered tool
	early   int  // early runs started
	done    bool
}

// OpenStream starts receiving a streamed turn of session sessionID. turnID
// is the turn's id when the stream has named it (a provider's message id,
// a turn_id parameter, the NDJSON header's id); when empty, one is
// generated now, so that early runs see the turn id the turn will have.
// format labels the stream in metrics.
func (s *Service) OpenStream(sessionID, turnID, format string) *Stream {
	if turnID == "" {
		turnID = newID("t_")
	}
	st := &Stream{
		svc:        s,
		sessionID:  sessionID,
		turnID:     turnID,
		format:     format,
		reg:        s.cfg.Tools(),
		lookupDone: make(chan struct{}),
		ids:        make(map[string]struct{}),
		leading:    true,
	}
	st.pool = &earlyPool{svc: s, runs: make(map[int]*earlyRun)}
	return st
}

// StreamBroken counts a stream of format that broke before it named its
// turn or any call (nothing was started for it).
func (s *Service) StreamBroken(format string) {
	if ob, ok := s.cfg.Observer.(StreamObserver); ok {
		ob.StreamedTurn(format, StreamIncomplete)
	}
}

// TurnID is the id the streamed turn will have.
func (st *Stream) TurnID() string { return st.turnID }

// Calls returns the calls added so far, in order.
func (st *Stream) Calls() []Call { return st.calls }

// Add takes the next call of the turn, its arguments complete, and starts
// its tool at once when the call is a read of the turn's leading run that
// the turn would run (see the comment at the top of this file). It fails,
// with nothing started, once the turn has more calls than the service
// takes (an *InvalidError with TooLarge).
func (st *Stream) Add(c Call) error {
	i := len(st.calls)
	if i >= st.svc.cfg.MaxCalls {
		return &InvalidError{Field: "calls", Reason: fmt.Sprintf("more than the limit of %d calls", st.svc.cfg.MaxCalls), TooLarge: true}
	}
	st.calls = append(st.calls, c)
	_, dup := st.ids[c.ID]
	st.ids[c.ID] = struct{}{}
	if !st.leading {
		return nil
	}
	spec, ok := st.reg.Lookup(c.Name)
	if !ok || spec.Effect != dispatch.EffectRead {
		st.leading = false
		return nil
	}
	if _, needs := spec.NeedsApproval(c.Arguments); needs {
		st.leading = false // it waits for a decision, and ends the leading reads
		return nil
	}
	if dispatch.Inline(spec.Impl, spec.Effect, spec.Retry) {
		// An inline tool answers from its arguments alone in less time
		// than an early start costs (dispatch.InlineTool): it runs at
		// admission, on the wave's goroutine, as in a whole post.
		return nil
	}
	if dup || spec.Deferred || c.Name == dispatch.MetaTool || st.early >= st.svc.cfg.MaxConcurrency || !st.checkCall(c) {
		return nil
	}
	if spec.Limit != nil || spec.SessionLimit != nil {
		return nil // an early start would not wait for the tool's cap
	}
	if _, bad := unparsedArguments(c.Arguments); bad {
		return nil
	}
	if _, err := spec.Check(c.Arguments); err != nil {
		return nil // admission refuses it
	}
	st.start(i, c, spec)
	return nil
}

// checkCall reports whether c, in this stream's session and turn, passes
// Submit's checks.
func (st *Stream) checkCall(c Call) bool {
	req := TurnRequest{ID: st.turnID, Calls: []Call{c}}
	return validPathID(st.sessionID) && st.svc.checkRequest(&req) == nil
}

// start runs c's tool early unless the session does not grant it or the
// turn or the call is answered already. Those are decided as the all-read
// path decides them (reads.go): from the session cache and the ids this
// process saw written, reading the store (LookupTurn, once a stream) only
// for a session not cached. A call answered where this process did not
// see it may so start early; admission then replays it, and its early
// result is discarded.
func (st *Stream) start(i int, c Call, spec *tool.Spec) {
	sess, cached, ok := st.admit(c)
	if !ok {
		return
	}
	st.early++
	ctx, cancel := context.WithCancel(st.svc.base)
	e := &earlyRun{index: i, call: c, spec: spec, cancel: cancel, done: make(chan struct{})}
	st.pool.add(e)
	if !cached {
		st.lookupOnce.Do(func() { go st.lookupTurn(ctx, c.ID) })
	}
	go st.runEarly(ctx, e, sess, cached)
}

// admit decides from what this process knows whether c may start early
// and, where it may, counts its run among the service's waves. It returns
// the session if cached, and whether it was.
func (st *Stream) admit(c Call) (sess Session, cached, ok bool) {
	s := st.svc
	probe := Turn{SessionID: st.sessionID, ID: st.turnID, Calls: []Call{c}}
	if s.recent.known(probe) {
		return Session{}, false, false
	}
	sess, cached = s.sessions.get(st.sessionID)
	if cached && (!sess.Granted(c.Name) || sess.Approval != nil) {
		return Session{}, false, false // see awaitSession
	}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return Session{}, false, false
	}
	s.waves.Add(1)
	s.mu.Unlock()
	return sess, cached, true
}

// lookupTurn reads the stream's session and turn, and whether the call
// callID is answered, from the store, for the early runs that wait on
// lookupDone.
func (st *Stream) lookupTurn(ctx context.Context, callID string) {
	defer close(st.lookupDone)
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	st.lookup, st.lookupErr = st.svc.store.LookupTurn(lctx, st.sessionID, st.turnID, []string{callID})
}

// runEarly runs e's tool in sess, once the store tells the session where
// it was not cached, and closes e.done whether or not the tool ran.
func (st *Stream) runEarly(ctx context.Context, e *earlyRun, sess Session, cached bool) {
	defer st.svc.waves.Done()
	if !cached {
		var ok bool
		if sess, ok = st.awaitSession(ctx, &e.call); !ok {
			close(e.done)
			return
		}
	}
	st.invoke(ctx, e, sess)
}

// awaitSession waits for the stream's LookupTurn and returns the session
// c runs in: false where the lookup failed or was given up, the turn or c
// is answered already, or the session does not grant c's tool.
func (st *Stream) awaitSession(ctx context.Context, c *Call) (Session, bool) {
	select {
	case <-st.lookupDone:
	case <-ctx.Done():
		return Session{}, false
	}
	lk := st.lookup
	switch {
	case st.lookupErr != nil, lk.TurnFound, lk.Answered[c.ID].Status.Final():
		return Session{}, false
	case lk.SessionFound:
		// A session with an approval policy of its own starts nothing
		// early: its policy may stop any call, and the calls after it.
		return lk.Session, lk.Session.Granted(c.Name) && lk.Session.Approval == nil
	}
	return Session{ID: st.sessionID, Budget: st.svc.cfg.Budget}, true
}

// invoke runs e's tool in sess and records its outcome and times in e,
// closing e.done; a tool that exits its goroutine fails.
func (st *Stream) invoke(ctx context.Context, e *earlyRun, sess Session) {
	s := st.svc
	c := &e.call
	tctx := tool.WithProjector(ctx, st.projector(sess), s.cfg.OutputKeepCap)
	tctx = tool.WithCallContext(tctx, tool.CallContext{SessionID: st.sessionID, TurnID: st.turnID, CompleteURL: s.cfg.CompleteURL})
	e.started, e.startedAt = true, s.now()
	exited := true
	defer func() {
		if exited { // the tool ended this goroutine (runtime.Goexit)
			e.out = dispatch.Fail(dispatch.CodeToolPanic, fmt.Sprintf("tool %s exited its goroutine without an outcome", c.Name))
		}
		e.readyAt, e.endedAt = time.Now(), s.now()
		close(e.done)
		if e.discarded.Load() {
			st.pool.countDiscarded(e)
		}
	}()
	e.out = dispatch.InvokeEarly(tctx, e.spec.Impl, dispatch.Call{ID: c.ID, Name: c.Name, Arguments: c.Arguments})
	exited = false
}

// projector is the budget projector of the stream's session, built once.
func (st *Stream) projector(sess Session) *budget.Projector {
	st.projOnce.Do(func() { st.proj = projectorFor(st.svc, sess) })
	return st.proj
}

// Abort ends a stream that broke: its early runs are cancelled and
// nothing is recorded.
func (st *Stream) Abort() {
	if st.done {
		return
	}
	st.done = true
	st.pool.release()
	st.observe(StreamIncomplete)
}

// Submit submits the streamed turn once its stream ended cleanly: req is
// the turn (its ID is the stream's TurnID when empty, its Calls those
// added), run exactly as Service.Submit runs a whole turn, adopting the
// early runs its admission clears. It answers as Submit does.
func (st *Stream) Submit(ctx context.Context, req TurnRequest) (Submitted, error) {
	if st.done {
		return Submitted{}, errors.New("turn: stream already ended")
	}
	st.done = true
	if req.ID == "" {
		req.ID = st.turnID
	}
	if req.Calls == nil {
		req.Calls = st.calls
	}
	st.pool.end(time.Now())
	sub, err := st.svc.submit(ctx, st.sessionID, req, st.pool)
	if !st.pool.isOwned() {
		st.pool.release()
	}
	switch {
	case err != nil:
		st.observe(StreamIncomplete)
	case sub.Replayed:
		st.observe(StreamReplayed)
	default:
		st.observe(StreamCompleted)
	}
	return sub, err
}

func (st *Stream) observe(o StreamOutcome) {
	if ob, ok := st.svc.cfg.Observer.(StreamObserver); ok {
		ob.StreamedTurn(st.format, o)
	}
}

// earlyRun is one read started early.
type earlyRun struct {
	index  int
	call   Call
	spec   *tool.Spec
	cancel context.CancelFunc
	done   chan struct{} // closed when the run ended, or was never started
	// Set before done is closed.
	started bool
	out     dispatch.Outcome
	readyAt time.Time
	// startedAt and endedAt bound the tool's run, by the service's clock.
	startedAt, endedAt time.Time
	// discarded: no wave will use it; counted: its discarding was observed
	// (once, by whichever of discard and its run's end sees both it
	// started and it was discarded).
	discarded atomic.Bool
	counted   atomic.Bool
}

// earlyPool holds a stream's early runs by call index until the turn's
// wave adopts or discards them.
type earlyPool struct {
	svc   *Service
	mu    sync.Mutex
	runs  map[int]*earlyRun // not yet adopted or discarded
	endAt time.Time
	owned bool // a wave took the pool: it releases it when it ends
}

func (p *earlyPool) add(e *earlyRun) {
	p.mu.Lock()
	p.runs[e.index] = e
	p.mu.Unlock()
}

func (p *earlyPool) end(at time.Time) {
	p.mu.Lock()
	p.endAt = at
	p.mu.Unlock()
}

func (p *earlyPool) own() {
	p.mu.Lock()
	p.owned = true
	p.mu.Unlock()
}

func (p *earlyPool) isOwned() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.owned
}

// take removes and returns the early run of call index i, if any.
func (p *earlyPool) take(i int) *earlyRun {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.runs[i]
	delete(p.runs, i)
	return e
}

// release discards every early run not adopted.
func (p *earlyPool) release() {
	p.mu.Lock()
	runs := p.runs
	p.runs = map[int]*earlyRun{}
	p.mu.Unlock()
	for _, e := range runs {
		p.discard(e)
	}
}

// discard cancels an early run no wave will use; one that started its
// tool counts as discarded.
func (p *earlyPool) discard(e *earlyRun) {
	e.discarded.Store(true)
	e.cancel()
	select {
	case <-e.done:
		if e.started {
			p.countDiscarded(e)
		}
	default: // its run counts it when it ends
	}
}

func (p *earlyPool) countDiscarded(e *earlyRun) {
	if !e.counted.CompareAndSwap(false, true) {
		return
	}
	if ob, ok := p.svc.cfg.Observer.(StreamObserver); ok {
		ob.EarlyCall(false, 0)
	}
}

// used reports an adopted run whose outcome the wave used.
func (p *earlyPool) used(e *earlyRun) {
	ob, ok := p.svc.cfg.Observer.(StreamObserver)
	if !ok {
		return
	}
	p.mu.Lock()
	end := p.endAt
	p.mu.Unlock()
	lead := time.Duration(0)
	if !end.IsZero() && e.readyAt.Before(end) {
		lead = end.Sub(e.readyAt)
	}
	ob.EarlyCall(true, lead)
}

// adoptEarly gives an admission that clears call to Run the early run of
// the same call, when there is one it may use (see the comment at the top
// of this file); any other early run of the call is discarded.
func (r *run) adoptEarly(call dispatch.Call, adm dispatch.Admission) dispatch.Admission {
	i, ok := r.index[call.ID]
	if !ok {
		return adm
	}
	e := r.early.take(i)
	if e == nil {
		return adm
	}
	if adm.Verdict == dispatch.Run && dispatch.ParseEffect(string(adm.Effect)) == dispatch.EffectRead &&
		r.calls[i].spec == e.spec && call.Name == e.call.Name && bytes.Equal(call.Arguments, e.call.Arguments) &&
		i < r.leadingReads() && r.turn.Calls[i].ID == e.call.ID {
		adm.Tool = &earlyTool{run: e, impl: adm.Tool, pool: r.early}
		r.calls[i].early = e
		return adm
	}
	r.early.discard(e)
	return adm
}

// leadingReads is the number of calls at the start of the turn whose tools
// are registered reads.
func (r *run) leadingReads() int {
	if r.leading >= 0 {
		return r.leading
	}
	n := 0
	for i, c := range r.turn.Calls {
		spec, ok := r.reg.Lookup(c.Name)
		if !ok || spec.Effect != dispatch.EffectRead {
			break
		}
		if _, needs := r.approvalNeeded(i, spec, c.Arguments); needs {
			break // it waits for a decision: a write to the scheduler
		}
		n++
	}
	r.leading = n
	return n
}

// startedFirst dates the first attempt of a, the call whose early run e
// answered it, from when e started and ended its tool, while the stream
// was still arriving (the wave's attempt only waited for it).
func (e *earlyRun) startedFirst(a dispatch.Accounted) dispatch.Accounted {
	if !e.started || !e.startedAt.Before(a.StartedAt) {
		return a
	}
	a.StartedAt = e.startedAt
	switch {
	case len(a.Tries) > 0:
		a.Tries[0].StartedAt = e.startedAt
		if e.endedAt.Before(a.Tries[0].FinishedAt) {
			a.Tries[0].FinishedAt = e.endedAt
		}
	case a.Attempts == 1 && e.endedAt.Before(a.FinishedAt):
		a.FinishedAt = e.endedAt
	}
	return a
}

// earlyTool answers the first attempt of an adopted call with its early
// run's outcome (waiting for it, or cancelling it with the wave); later
// attempts, and a call whose early run never started, run impl.
type earlyTool struct {
	run  *earlyRun
	impl dispatch.Tool
	pool *earlyPool
}

func (t *earlyTool) Invoke(ctx context.Context, call dispatch.Call, at *dispatch.Attempt) dispatch.Outcome {
	if at.Number() > 1 {
		return t.impl.Invoke(ctx, call, at)
	}
	e := t.run
	select {
	case <-e.done:
	case <-ctx.Done():
		e.cancel()
		<-e.done
	}
	if !e.started {
		return t.impl.Invoke(ctx, call, at)
	}
	e.cancel() // it has ended: release its context
	t.pool.used(e)
	return e.out
}
