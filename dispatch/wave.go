package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Effect is what a tool may do to the world outside the wave.
type Effect string

const (
	EffectRead  Effect = "read"
	EffectWrite Effect = "write"
)

// ParseEffect reads a declared effect. Anything but "read" is a write: a
// tool that did not say it only reads must be assumed to change something.
func ParseEffect(s string) Effect {
	if s == string(EffectRead) {
		return EffectRead
	}
	return EffectWrite
}

// Mode chooses how effects order a wave.
type Mode string

const (
	// ModeOrdered (also the empty Mode): leading reads run concurrently, the
	// first other effect waits for everything before it, and the rest of the
	// wave is serial — for calls without resources. A call with resources
	// waits only for the earlier calls it conflicts with: those sharing a
	// resource where either writes, and those declaring none (see
	// resources.go).
	ModeOrdered Mode = "ordered"
	// ModeConcurrent: every call starts at once whatever its effect; tools
	// coordinate their own resources. Admission and accounting stay serial.
	ModeConcurrent Mode = "concurrent"
)

// FailurePolicy chooses what an error does to the rest of the wave.
type FailurePolicy string

const (
	// PolicyIsolate (also the empty policy): an error is only its call's
	// result.
	PolicyIsolate FailurePolicy = "isolate"
	// PolicyFailFast: the first error or refusal taints the wave; later calls
	// not yet admitted are refused with CodeTurnFailed and later running
	// calls are cancelled.
	PolicyFailFast FailurePolicy = "fail_fast"
)

// DefaultMaxConcurrency caps the tools running at once when a Wave does not
// say; MaxConcurrencyCeiling bounds what a Wave may say, because the wave
// sizes its buffers by its cap.
const (
	DefaultMaxConcurrency = 16
	MaxConcurrencyCeiling = 1024
)

// MetaTool is the reserved tool name whose calls name the real tool in their
// arguments: {"name": "X", "arguments": {...}}.
const MetaTool = "call"

// Sentinel errors.
var (
	// ErrInvalidWave: the Wave cannot run as configured; nothing was admitted.
	ErrInvalidWave = errors.New("dispatch: invalid wave")
	// ErrAccount wraps the error Host.Account returned, which aborted the wave.
	ErrAccount = errors.New("dispatch: accounting failed")
	// ErrNoKeyIssuer: a tool asked for a completion key in a wave without a
	// KeyIssuer.
	ErrNoKeyIssuer = errors.New("dispatch: wave has no completion key issuer")
	// ErrEmptyKey: the KeyIssuer answered an empty key without an error.
	ErrEmptyKey = errors.New("dispatch: key issuer returned an empty completion key")
)

// Verdict is the host's decision on a call.
type Verdict int

const (
	// Run the admitted tool.
	Run Verdict = iota
	// Replay answers the call with a recorded outcome; no tool runs.
	Replay
	// Refuse answers the call with an outcome that no tool produced.
	Refuse
)

func (v Verdict) String() string {
	switch v {
	case Run:
		return "run"
	case Replay:
		return "replay"
	case Refuse:
		return "refuse"
	}
	return fmt.Sprintf("Verdict(%d)", int(v))
}

// Call is one tool call as the model wrote it.
type Call struct {
	ID        string
	Name      string
	Arguments json.RawMessage
}

// Admission is the host's answer to Admit.
type Admission struct {
	Verdict Verdict
	// Tool, Effect and Retry are read for Run. Effect is normalised with
	// ParseEffect, so an empty Effect is a write.
	Tool   Tool
	Effect Effect
	Retry  RetryPolicy
	// Resources are the resources a Run call touches (file:a.txt,
	// db:users/7), computed by the host from its validated arguments. Nil
	// means none declared: the call conflicts with every other, as every
	// call did before resources (see Wave's ordering). A Replay that
	// answers pending with Resources holds them until Wave.Released says
	// its call settled.
	Resources []string
	// Gates are the caps (max_concurrency) the call's run holds, reserved
	// in this order before its first attempt and released when it ends;
	// read for Run.
	Gates []Gate
	// Outcome is read for Replay and Refuse. A Refuse outcome without a
	// Status gets StatusRefused.
	Outcome Outcome
}

// Accounted is one call as the host accounts it.
type Accounted struct {
	Index int
	// Call is the resolved call: a call of MetaTool appears as the call of
	// the tool it named, with the same ID; Resolved says it was one.
	Call     Call
	Resolved bool
	// Verdict is the host's verdict when Admitted; when dispatch decided
	// without asking the host (duplicate_call_id, invalid meta-call,
	// turn_failed before admission, cancelled before admission) it is Refuse
	// and Admitted is false. A call admitted to Run that never started,
	// because a fail_fast wave was tainted or the wave was cancelled, keeps
	// Verdict Run with a turn_failed refusal or a cancellation as its
	// outcome and no attempts.
	Verdict  Verdict
	Admitted bool
	// Effect is the admitted effect for Run, empty otherwise.
	Effect  Effect
	Outcome Outcome
	// Attempts counts the attempts that invoked the tool: 0 when none did.
	Attempts int
	// StartedAt and FinishedAt bound the tool's attempts; zero when none ran.
	StartedAt, FinishedAt time.Time
	// Tries are the attempts, in order, of a call that was retried; nil
	// for a call tried once, whose attempt is StartedAt to FinishedAt.
	Tries []Try
	// AdmittedAt is when dispatch took the call up for admission (by
	// Wave.Now): the time from it to Account is the call's dispatch latency.
	AdmittedAt time.Time
	// Resources are the admitted resources (Admission.Resources).
	Resources []string
	// ReadyAt is when the call's run was cleared to start — every earlier
	// conflicting call answered — before it waited for its gates; zero for
	// a call with neither resources nor gates. GatedAt is when it had its
	// places in its gates; zero for a call without gates (or that never
	// got them).
	ReadyAt, GatedAt time.Time
}

// Try is one attempt of a retried call: when it ran, by Wave.Now, and how
// it ended. Status and Err are the attempt's outcome; the last attempt's
// are the call's (Accounted.Outcome).
type Try struct {
	StartedAt, FinishedAt time.Time
	Status                Status
	Err                   *Error // nil for StatusOK and StatusPending
}

// Report sums up a wave. Status counts follow each call's final outcome; Ran
// counts calls whose tool was invoked, Replayed calls answered by Replay.
type Report struct {
	Calls     int
	Ran       int
	Replayed  int
	OK        int
	Refused   int
	Errors    int
	Pending   int
	Cancelled int
	// Tainted: a fail_fast wave saw an error or refusal.
	Tainted bool
	// Interrupted: the wave's context was cancelled before the last call
	// was accounted.
	Interrupted bool
}

func (r *Report) count(a *Accounted) {
	r.Calls++
	if a.Attempts > 0 {
		r.Ran++
	}
	if a.Admitted && a.Verdict == Replay {
		r.Replayed++
	}
	switch a.Outcome.Status {
	case StatusOK:
		r.OK++
	case StatusError:
		r.Errors++
	case StatusPending:
		r.Pending++
	case StatusRefused:
		r.Refused++
	case StatusCancelled:
		r.Cancelled++
	}
}

// Host is implemented by the turn service. Admit and Account are always
// called from one goroutine (never concurrently with each other), each
// strictly in call order; Admit of a later call may come before Account of an
// earlier one.
type Host interface {
	Admit(ctx context.Context, call Call) Admission
	// Account receives every call of the wave exactly once, in call order.
	// A non-nil error aborts the wave: running tools are cancelled, nothing
	// more is admitted or accounted, and Run returns the error wrapped in
	// ErrAccount. ctx is the wave's and may already be cancelled.
	Account(ctx context.Context, a Accounted) error
}

// AttemptHook may also be implemented by a Host. BeforeAttempt is called on
// the tool's goroutine (the wave's own for an InlineTool's read) before
// each attempt, so the host can commit a
// write-ahead ledger line; an error answers the call with
// CodeAttemptNotRecorded and the tool does not run. For a speculative read
// (see Aheader) it is called before the call's Admit.
type AttemptHook interface {
	BeforeAttempt(ctx context.Context, call Call, effect Effect, attempt int) error
}

// AttemptObserver may also be implemented by a Host to watch attempts
// without deciding anything (metrics). AttemptStarted is called on the
// tool's goroutine (the wave's own for an InlineTool's read) just before
// an attempt invokes the tool, after
// BeforeAttempt allowed it; AttemptFinished right after the tool returned
// (or panicked), with the attempt's raw outcome and how long the tool took,
// measured on the monotonic clock. Every AttemptStarted is followed by one
// AttemptFinished with the same call and attempt, speculative runs included.
// Both must be quick and must not block.
type AttemptObserver interface {
	AttemptStarted(call Call, attempt int)
	AttemptFinished(call Call, attempt int, o Outcome, took time.Duration)
}

// Aheader may also be implemented by a Host to start read tools before their
// calls are admitted, overlapping the tool with Admit. Ahead lends the read
// tool for a call, or reports false. Its result is used only when Admit then
// clears the same call to Run on the same tool (see IdentifiedTool) with
// EffectRead (any effect in ModeConcurrent); otherwise the speculative run is
// cancelled and discarded and the admission applies. Ahead is called from
// the goroutine that calls Admit, and only while the wave has not turned
// serial.
type Aheader interface {
	Ahead(call Call) (Tool, bool)
}

// IdentifiedTool lets a speculative tool be matched with an admitted one
// when tool values are not comparable (a ToolFunc never is). Tools that do
// not implement it match when they are ==.
type IdentifiedTool interface {
	Tool
	ToolID() string
}

// Wave is the ordered list of calls of one assistant turn and how to run it.
type Wave struct {
	// Calls are the wave's calls, or else Feed delivers them while the model
	// still generates; the feeder closes Feed after the last call. Run stops
	// receiving from Feed when the wave's context is done or the wave aborts,
	// so a feeder must not block sending past either.
	Calls []Call
	Feed  <-chan Call

	Mode          Mode
	FailurePolicy FailurePolicy
	// MaxConcurrency caps the tools running at once (speculative ones
	// included); 0 means DefaultMaxConcurrency, and it is at most
	// MaxConcurrencyCeiling.
	MaxConcurrency int
	// Keys issues completion keys for deferred results; nil when the host
	// offers none.
	Keys KeyIssuer
	// Now stamps StartedAt and FinishedAt; nil means time.Now. It is called
	// from tool goroutines.
	Now func() time.Time
	// Released delivers the index of a parked call (accounted pending with
	// resources) once its call settled: its resources are free from then
	// on. Nil: a parked call frees its resources when it parks.
	Released <-chan int
}

func (w Wave) validate(h Host) error {
	switch {
	case h == nil:
		return fmt.Errorf("%w: nil host", ErrInvalidWave)
	case len(w.Calls) > 0 && w.Feed != nil:
		return fmt.Errorf("%w: both Calls and Feed are set", ErrInvalidWave)
	case w.MaxConcurrency < 0:
		return fmt.Errorf("%w: negative MaxConcurrency %d", ErrInvalidWave, w.MaxConcurrency)
	}
	switch w.Mode {
	case "", ModeOrdered, ModeConcurrent:
	default:
		return fmt.Errorf("%w: unknown mode %q", ErrInvalidWave, w.Mode)
	}
	switch w.FailurePolicy {
	case "", PolicyIsolate, PolicyFailFast:
	default:
		return fmt.Errorf("%w: unknown failure policy %q", ErrInvalidWave, w.FailurePolicy)
	}
	return nil
}

// Run admits, runs and accounts the wave's calls. It returns once every
// call has been accounted (or Account failed) and every goroutine it started
// has exited. The error is non-nil only for an invalid Wave (ErrInvalidWave,
// before anything is admitted) or when Account failed (ErrAccount, wrapping
// the host's error). A cancelled ctx is not an error: the calls it cut short
// are accounted as cancelled and Report.Interrupted is set.
func (w Wave) Run(ctx context.Context, h Host) (Report, error) {
	if err := w.validate(h); err != nil {
		return Report{}, err
	}
	if len(w.Calls) == 0 && w.Feed == nil {
		return Report{}, nil
	}
	d := newDispatcher(w, h)
	toolCtx, cancel := context.WithCancelCause(ctx)
	// Also when the host panics: tools are told to stop, and the workers
	// end once they have finished what they hold.
	defer d.dismiss()
	defer cancel(nil)
	err := d.drive(ctx, toolCtx)
	if err != nil {
		cancel(errAborted)
	}
	d.drain()
	d.report.Tainted = d.tainted
	d.report.Interrupted = d.interrupted
	return d.report, err
}
