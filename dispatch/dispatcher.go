package dispatch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Causes given to the contexts of tools that dispatch cancels itself.
var (
	errAborted     = errors.New("wave aborted: accounting failed")
	errTainted     = errors.New("an earlier call failed the turn")
	errDiscarded   = errors.New("speculative run discarded by admission")
	errInterrupted = errors.New("wave cancelled before the call ran")
)

// slot is one call of the wave as the driving goroutine tracks it.
type slot struct {
	call     Call
	resolved bool
	verdict  Verdict
	admitted bool
	effect   Effect
	// run answers the call: prepared at admission, then running, then
	// finished once done. It is nil for a call answered without a run,
	// whose answer is outcome.
	run     *run
	done    bool
	outcome Outcome
	// admittedAt is when dispatch took the call up for admission.
	admittedAt time.Time
	// res are the admitted resources (nil: none declared); anon marks a
	// resource-less leading read not yet answered (see resources.go).
	res  []string
	anon bool
}

// run is the attempts of one call that one worker makes. The driving
// goroutine fills in the request half before handing it to a worker; the
// worker fills in the result half before sending it back, which hands it
// over again.
type run struct {
	index  int
	call   Call
	tool   Tool
	effect Effect
	policy RetryPolicy
	prev   *Error // the retryable error this run continues from, if any
	// own: dispatch may cancel this run alone, so it gets a context of its
	// own rather than the wave's.
	own bool
	// inline: the run ran on the driving goroutine (see InlineTool).
	inline bool
	at     Attempt // the first attempt, kept here to save an allocation
	// gated is what a run with resources or gates needs more: nil for the
	// others, which then cost a word.
	gated *gating
	// keys is the call's completion key, shared with the attempts of a
	// run that continues this one.
	keys keyCache

	// discarded and then belong to the driving goroutine. then is the retry
	// policy of the admission that adopted a speculative run, when it
	// allows retries.
	discarded bool
	then      *RetryPolicy

	// cancel is set by the worker once an own run has its context; stop
	// keeps a cancellation asked for before that.
	mu     sync.Mutex
	cancel context.CancelCauseFunc
	stop   error

	exited   bool // the tool ended its goroutine without an outcome (runtime.Goexit)
	outcome  Outcome
	attempts int
	started  time.Time
	finished time.Time
	// retries is nil until an attempt is retried, so that a call tried
	// once costs nothing more.
	retries *retries
}

// retries is what a run records once an attempt of it is retried: the
// attempts retried so far, and when the latest attempt after them started.
type retries struct {
	tries []Try
	last  time.Time
}

// retried records r's latest attempt, which ended at end with r.outcome
// and is retried.
func (r *run) retried(end time.Time) {
	if r.retries == nil {
		r.retries = &retries{}
	}
	r.retries.tries = append(r.retries.tries, r.try(end))
}

// try is r's latest attempt, ended at end with r.outcome.
func (r *run) try(end time.Time) Try {
	start := r.retries.last
	if start.IsZero() {
		start = r.started
	}
	return Try{StartedAt: start, FinishedAt: end, Status: r.outcome.Status, Err: r.outcome.Err}
}

// tries is the attempts of a retried run: those retried, and the last one
// unless the run ended before it started (a cancelled backoff, a refusing
// AttemptHook).
func (r *run) tries() []Try {
	if r.attempts == len(r.retries.tries) {
		return r.retries.tries
	}
	return append(r.retries.tries, r.try(r.finished))
}

// cancelWith cancels an own run, whether or not its worker has picked it up
// yet.
func (r *run) cancelWith(cause error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cancel != nil {
		r.cancel(cause)
	} else if r.stop == nil {
		r.stop = cause
	}
}

// dispatcher holds the state of one Wave.Run. Everything but the runs in
// flight is owned by the driving goroutine.
type dispatcher struct {
	host       Host
	hook       AttemptHook
	watch      AttemptObserver
	aheader    Aheader
	concurrent bool
	failFast   bool
	limit      int
	keys       KeyIssuer
	now        func() time.Time

	slots []slot
	seen  map[string]struct{}
	feed  <-chan Call // nil once closed or abandoned
	// runs is a block of runs for a wave whose calls are known, so that most
	// calls cost no allocation of their own.
	runs []run

	// Workers are goroutines that the wave starts as it needs them, up to
	// its cap, and that run one run after another: a goroutine per call
	// would cost more than the dispatch of a cheap read. Both channels have
	// room for every run that can be in flight, so neither side ever blocks
	// sending, whatever the other is doing.
	jobs    chan *run
	results chan *run
	workers int
	staff   sync.WaitGroup
	closed  bool

	next    int // next call to admit
	acct    int // next call to account
	running int // runs handed to workers or run inline, and not yet received back
	inlined int // of those, the runs that ran inline: they need no worker

	queue   []int // admitted reads waiting for a free goroutine, in call order
	qhead   int
	barrier int // call that must wait until all before it are accounted; -1 if none
	serial  bool
	// gate is the latest call that waits for everything before it: no
	// call after it is admitted until it is accounted (-1: none).
	gate int
	// locks schedules the calls with resources (resources.go); nil until
	// the first. anonOpen counts the resource-less leading reads not yet
	// answered, which a keyed write waits for. released is Wave.Released.
	locks    *lockTable
	anonOpen int
	released <-chan int
	// sweeping: taint or interrupt is settling calls that have not
	// started; blocked calls are rechecked once it is done (sweep).
	sweeping bool

	tainted     bool
	taintAt     int
	interrupted bool
	report      Report
}

func newDispatcher(w Wave, h Host) *dispatcher {
	d := &dispatcher{
		host:       h,
		concurrent: w.Mode == ModeConcurrent,
		failFast:   w.FailurePolicy == PolicyFailFast,
		limit:      w.MaxConcurrency,
		keys:       w.Keys,
		now:        w.Now,
		feed:       w.Feed,
		barrier:    -1,
		gate:       -1,
		released:   w.Released,
	}
	d.hook, _ = h.(AttemptHook)
	d.watch, _ = h.(AttemptObserver)
	d.aheader, _ = h.(Aheader)
	if d.limit == 0 {
		d.limit = DefaultMaxConcurrency
	}
	d.limit = min(d.limit, MaxConcurrencyCeiling)
	if d.now == nil {
		d.now = time.Now
	}
	if n := len(w.Calls); n > 0 {
		d.slots = make([]slot, n)
		for i, c := range w.Calls {
			d.slots[i].call = c
		}
		d.runs = make([]run, n)
		d.queue = make([]int, 0, n)
		d.seen = make(map[string]struct{}, n)
	} else {
		d.seen = make(map[string]struct{})
	}
	// Runs in flight never exceed the cap (a call may have two, when a
	// speculative run was discarded, so the number of calls is no bound).
	d.jobs = make(chan *run, d.limit)
	d.results = make(chan *run, d.limit)
	return d
}

// drive is the driving goroutine's loop: it admits, starts and accounts
// calls as soon as each may, and otherwise waits for a result, a fed call or
// cancellation. hostCtx goes to the host; toolCtx, which the wave cancels on
// abort, to the tools.
func (d *dispatcher) drive(hostCtx, toolCtx context.Context) error {
	cancelled := hostCtx.Done()
	for {
		if err := d.account(hostCtx); err != nil {
			return err
		}
		d.start(toolCtx)
		if d.admissible() {
			d.admit(hostCtx, toolCtx)
			d.start(toolCtx)
			// Take in what has finished meanwhile, so that accounting keeps
			// pace with a slow Admit instead of waiting for admission to end.
			d.poll(toolCtx)
			continue
		}
		if d.feed == nil && d.acct == len(d.slots) {
			return nil
		}
		select {
		case r := <-d.results:
			d.receive(toolCtx, r)
		case c, ok := <-d.feed:
			if !ok {
				d.feed = nil
				continue
			}
			d.slots = append(d.slots, slot{call: c})
		case <-cancelled:
			cancelled = nil
			d.interrupt(hostCtx)
		case k := <-d.released:
			d.unhold(k)
		}
	}
}

// admissible reports whether the next call may be admitted now. Once the
// wave is serial a call is admitted only after the one before it has been
// accounted; a tainted or interrupted wave settles calls without the host,
// so they need not wait.
func (d *dispatcher) admissible() bool {
	if d.next >= len(d.slots) {
		return false
	}
	return !d.serial || d.tainted || d.interrupted || d.acct == d.next || d.gate < d.acct
}

// admit settles or schedules the next call.
func (d *dispatcher) admit(hostCtx, toolCtx context.Context) {
	k := d.next
	d.next++
	s := &d.slots[k]
	s.admittedAt = d.now()
	call, meta, bad := resolve(s.call)
	s.call, s.resolved = call, meta
	if d.settleUnasked(hostCtx, k, call.ID, bad) {
		return
	}
	ahead := d.runAhead(toolCtx, k, call)
	adm := d.host.Admit(hostCtx, call)
	d.follow(k, call, ahead, &adm)
}

// settleUnasked settles call k without asking the host, and reports true,
// where the wave is interrupted or tainted, its id appears earlier in the
// wave, or resolving it found it bad.
func (d *dispatcher) settleUnasked(hostCtx context.Context, k int, id string, bad *Outcome) bool {
	s := &d.slots[k]
	if hostCtx.Err() != nil {
		d.interrupt(hostCtx)
	}
	switch {
	case d.interrupted:
		d.settle(s, Refuse, false, Cancelled(interruptedMessage(hostCtx)))
		return true
	case d.tainted:
		d.settle(s, Refuse, false, Refused(CodeTurnFailed, errTainted.Error()))
		return true
	}
	if _, dup := d.seen[id]; dup {
		d.settleFailure(k, Refuse, false, Refused(CodeDuplicateCallID, fmt.Sprintf("call id %q appears earlier in the wave", id)))
		return true
	}
	d.seen[id] = struct{}{}
	if bad != nil {
		d.settleFailure(k, Refuse, false, *bad)
		return true
	}
	return false
}

// runAhead launches the read the aheader offers for call k, if any and if
// the wave has room for it, before the host admits the call.
func (d *dispatcher) runAhead(toolCtx context.Context, k int, call Call) *run {
	if d.aheader == nil || !(d.concurrent || !d.serial) || d.running >= d.limit {
		return nil
	}
	tool, ok := d.aheader.Ahead(call)
	if !ok || tool == nil {
		return nil
	}
	ahead := d.newRun(k, call, tool, EffectRead, RetryPolicy{})
	ahead.own = true
	d.launch(toolCtx, ahead)
	return ahead
}

// follow acts on the host's admission of call k: it schedules a run (or
// keeps the run ahead) or settles the call, discarding a run ahead it does
// not keep.
func (d *dispatcher) follow(k int, call Call, ahead *run, adm *Admission) {
	switch adm.Verdict {
	case Run:
		if adm.Tool == nil {
			break
		}
		d.schedule(k, call, ahead, adm)
		return
	case Replay:
		d.discard(ahead)
		d.slots[k].res = adm.Resources
		d.settleFailure(k, Replay, true, adm.Outcome)
		if adm.Resources != nil && adm.Outcome.Status == StatusPending && !d.concurrent {
			d.hold(k, adm.Resources, ParseEffect(string(adm.Effect)) != EffectRead)
		}
		return
	case Refuse:
		d.discard(ahead)
		o := adm.Outcome
		if o.Status == "" {
			o.Status = StatusRefused
		}
		d.settleFailure(k, Refuse, true, o)
		return
	}
	d.discard(ahead)
	d.slots[k].effect = ""
	d.settleFailure(k, adm.Verdict, true, Refused(CodeInvalidAdmission,
		fmt.Sprintf("admission with verdict %v and tool %v cannot run", adm.Verdict, adm.Tool)))
}

// schedule gives call k, admitted to run adm.Tool, its run: the run ahead
// where it does the same, else a new one, queued or behind the barrier.
func (d *dispatcher) schedule(k int, call Call, ahead *run, adm *Admission) {
	s := &d.slots[k]
	effect := ParseEffect(string(adm.Effect))
	s.verdict, s.admitted, s.effect, s.res = Run, true, effect, adm.Resources
	if ahead != nil {
		// A speculative run took no gate and no place among the resources:
		// only a plain read (or any call of a concurrent wave) keeps it.
		if (d.concurrent || effect == EffectRead) && adm.Gates == nil && adm.Resources == nil && sameTool(ahead.tool, adm.Tool) {
			if adm.Retry.attempts() > 1 {
				then := adm.Retry // a copy, so that adm stays on the stack
				ahead.then = &then
			}
			s.run = ahead
			if !d.concurrent {
				s.anon = true // a leading read a keyed write waits for
				d.anonOpen++
			}
			return
		}
		d.discard(ahead)
	}
	s.run = d.newRun(k, call, adm.Tool, effect, adm.Retry)
	if adm.Gates != nil || adm.Resources != nil {
		s.run.gated = &gating{gates: adm.Gates}
	}
	switch {
	case d.concurrent:
	case adm.Resources != nil:
		d.scheduleKeyed(k, adm.Resources, effect != EffectRead)
		return
	case d.serial || effect != EffectRead:
		// From the first call that may change something on, a call
		// without resources runs once all before it are accounted.
		d.serial = true
		d.barrier, d.gate = k, k
		return
	default:
		s.anon = true
		d.anonOpen++
	}
	d.queue = append(d.queue, k)
}

func interruptedMessage(ctx context.Context) string {
	return errInterrupted.Error() + ": " + context.Cause(ctx).Error()
}

// settle answers a call that no run answers (any more).
func (d *dispatcher) settle(s *slot, v Verdict, admitted bool, o Outcome) {
	d.leave(s)
	s.verdict, s.admitted, s.run = v, admitted, nil
	s.outcome = o.normalized()
	s.done = true
}

// settleFailure settles call k and lets a failure taint a fail_fast wave.
func (d *dispatcher) settleFailure(k int, v Verdict, admitted bool, o Outcome) {
	s := &d.slots[k]
	d.settle(s, v, admitted, o)
	if d.failFast && s.outcome.failed() {
		d.taint(k)
	}
}

// newRun prepares a run of call k, from the wave's block when it has one.
func (d *dispatcher) newRun(k int, call Call, tool Tool, effect Effect, policy RetryPolicy) *run {
	var r *run
	if k < len(d.runs) && d.runs[k].tool == nil {
		r = &d.runs[k]
	} else {
		r = new(run)
	}
	r.index, r.call, r.tool, r.effect, r.policy = k, call, tool, effect, policy
	r.at = Attempt{number: 1, call: &r.call, keys: d.keys, cache: &r.keys}
	return r
}

// launch hands r to a worker, or runs it at once for an inline tool (see
// InlineTool), whose result then waits for the driving goroutine like a
// worker's. In a fail_fast wave every run may have to be cancelled alone.
func (d *dispatcher) launch(toolCtx context.Context, r *run) {
	r.own = r.own || d.failFast
	d.running++
	if g := r.gated; g != nil && len(g.gates) > 0 {
		if g.ready.IsZero() {
			g.ready = d.now()
		}
		g.tickets = append(g.tickets[:0], g.gates[0].Reserve())
	}
	if runsInline(r) {
		r.inline = true
		d.inlined++
		d.work(toolCtx, r)
		return
	}
	d.hire(toolCtx)
	d.jobs <- r
}

// hire starts workers until there is one for every run in flight on
// workers (inline runs need none); running never exceeds the cap, so
// neither do workers.
func (d *dispatcher) hire(toolCtx context.Context) {
	for d.workers < d.running-d.inlined {
		d.workers++
		d.staff.Go(func() { d.serve(toolCtx) })
	}
}

// serve is a worker: it runs what it is handed until the wave ends.
func (d *dispatcher) serve(toolCtx context.Context) {
	for r := range d.jobs {
		if r.own {
			d.workAlone(toolCtx, r)
		} else {
			d.work(toolCtx, r)
		}
	}
}

// workAlone runs r under a context of its own, honouring a cancellation
// asked for before the worker picked r up.
func (d *dispatcher) workAlone(toolCtx context.Context, r *run) {
	ctx, cancel := context.WithCancelCause(toolCtx)
	defer cancel(nil)
	r.mu.Lock()
	r.cancel = cancel
	if r.stop != nil {
		cancel(r.stop)
	}
	r.mu.Unlock()
	d.work(ctx, r)
}

// dismiss ends the workers and waits for them to exit. It is idempotent, and
// deferred by Run so that even a panicking host leaks no worker.
func (d *dispatcher) dismiss() {
	if d.closed {
		return
	}
	d.closed = true
	close(d.jobs)
	d.staff.Wait()
}

// start launches what may run now: the barrier call once everything before
// it is accounted and no other tool runs, then queued reads up to the cap.
func (d *dispatcher) start(toolCtx context.Context) {
	if d.barrier >= 0 && d.acct == d.barrier && d.running == 0 && !d.holds() {
		k := d.barrier
		d.barrier = -1
		d.launch(toolCtx, d.slots[k].run)
	}
	for d.qhead < len(d.queue) && d.running < d.limit {
		k := d.queue[d.qhead]
		d.qhead++
		d.launch(toolCtx, d.slots[k].run)
	}
}

// discard cancels a speculative run that admission did not adopt; its
// result will be dropped on arrival.
func (d *dispatcher) discard(r *run) {
	if r == nil {
		return
	}
	r.discarded = true
	r.cancelWith(errDiscarded)
}

// poll receives the results that are ready without waiting.
func (d *dispatcher) poll(toolCtx context.Context) {
	for d.running > 0 {
		select {
		case r := <-d.results:
			d.receive(toolCtx, r)
		default:
			return
		}
	}
}

// receive takes a finished run back.
func (d *dispatcher) receive(toolCtx context.Context, r *run) {
	d.running--
	if r.inline {
		d.inlined--
	}
	if r.exited {
		// The tool ended its worker's goroutine: replace the worker if
		// runs are waiting for one.
		d.workers--
		d.hire(toolCtx)
	}
	if r.discarded {
		return
	}
	s := &d.slots[r.index]
	if r.then != nil && r.attempts > 0 && r.outcome.retryable() && r.attempts < r.then.attempts() &&
		!d.interrupted && !(d.tainted && r.index > d.taintAt) {
		// The speculative attempt was adopted and failed in a way the
		// admitted policy retries: go on from it.
		r.retried(r.finished)
		c := &run{
			index: r.index, call: r.call, tool: r.tool, effect: r.effect, policy: *r.then,
			prev: r.outcome.Err, started: r.started, retries: r.retries,
		}
		c.at = Attempt{number: r.attempts + 1, call: &c.call, keys: d.keys, cache: &r.keys}
		s.run = c
		d.launch(toolCtx, c)
		return
	}
	s.done = true
	d.leave(s)
	d.answered(r.index, r.outcome)
	if d.failFast && r.outcome.failed() {
		d.taint(r.index)
	}
}

// account hands the host every call that is answered and has no
// unanswered call before it.
func (d *dispatcher) account(hostCtx context.Context) error {
	for d.acct < len(d.slots) && d.slots[d.acct].done {
		s := &d.slots[d.acct]
		a := Accounted{
			Index:      d.acct,
			Call:       s.call,
			Resolved:   s.resolved,
			Verdict:    s.verdict,
			Admitted:   s.admitted,
			Effect:     s.effect,
			Outcome:    s.outcome,
			AdmittedAt: s.admittedAt,
			Resources:  s.res,
		}
		if r := s.run; r != nil {
			a.Outcome, a.Attempts, a.StartedAt, a.FinishedAt = r.outcome, r.attempts, r.started, r.finished
			if r.gated != nil {
				a.ReadyAt, a.GatedAt = r.gated.ready, r.gated.entered
			}
			if r.retries != nil {
				a.Tries = r.tries()
			}
		}
		if err := d.host.Account(hostCtx, a); err != nil {
			return fmt.Errorf("%w: call %d (%s): %w", ErrAccount, d.acct, s.call.ID, err)
		}
		d.report.count(&a)
		// Let go of the output now rather than with the wave.
		if s.run != nil {
			s.run.outcome = Outcome{}
		}
		*s = slot{done: true}
		d.acct++
	}
	return nil
}

// drain waits for every run still in flight after the wave ended or
// aborted, then for the workers, so that Run leaks no goroutine.
func (d *dispatcher) drain() {
	for d.running > 0 {
		<-d.results
		d.running--
	}
	d.dismiss()
}
