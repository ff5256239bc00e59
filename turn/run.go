package turn

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"

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
	// epoch is the lease epoch the run holds the turn under (see
	// Commit.LeaseEpoch): 0 for a received turn, the claim's Resumes for a
	// resumed one. The store refuses a commit of a stale epoch.
	epoch int
	done  chan struct{}

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
	// keyed holds the completion keys issued to calls, as recorded, by
	// index (under mu): Account closes the key of a call that did not
	// park; keepParked keeps those that did.
	keyed map[int]Completion
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
	// approved holds the calls a person approved that this run executes,
	// by index (approval.go); approvalParked: a call of this wave parked
	// for approval (driving goroutine only).
	approved       map[int]*approvedCall
	approvalParked bool
	// closeAfter are the approved calls answered by this wave, whose keys
	// are closed once the answers are stored; requested the approvals
	// parked by it, by key hash, for their webhook (both under mu).
	closeAfter []*approvedCall
	requested  map[[32]byte]approvalRequest
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
	// approval says why the call waits for approval ("" when it runs):
	// its tool is the approval gate.
	approval string
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
		if ap := r.approved[i]; ap != nil && ap.args != nil {
			calls[i].Arguments = ap.args // edited by the approver
		}
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
