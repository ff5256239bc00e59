package turn

import (
	"errors"
	"time"

	"github.com/turnd/turnd/budget"
	"github.com/turnd/turnd/dispatch"
)

// Observer receives the service's events, for metrics. turn does not
// import a metrics library: cmd passes an implementation (package metrics)
// in Config.Observer. The service calls it from many goroutines (waves'
// driving and tool goroutines, request handlers, the sweeper and the
// webhook loop), so methods must be safe for concurrent use, quick, and
// must not block.
//
// Every label value it hands over is bounded: tool names are names of
// registered tools or UnknownTool, statuses and results are the constants
// of this package; no id ever appears.
type Observer interface {
	// WaveStarted: a wave of calls calls starts (a new turn, or a resumed one).
	WaveStarted(calls int)
	// CallAccounted: a call's result is accounted, took after dispatch took
	// it up for admission.
	CallAccounted(tool string, status CallStatus, took time.Duration)
	// AttemptStarted and AttemptFinished bracket each attempt that invokes
	// a tool; outcome is the attempt's raw status (ok, error, pending,
	// refused, cancelled).
	AttemptStarted(tool string)
	AttemptFinished(tool, outcome string, took time.Duration)
	// TurnSettled: a turn reached a settled status here, took after it was
	// received.
	TurnSettled(status Status, took time.Duration)
	// Completion: what became of a delivery to a completion key, or of a
	// parked call's wait (CompletionTimedOut, CompletionCancelled).
	Completion(result CompletionResult)
	// Truncated: the budget cut an output; unit is what its marker counts
	// (bytes, lines or tokens), dropped the bytes the preview lacks.
	Truncated(unit string, dropped int64)
	// WebhookAttempt: one delivery attempt of a webhook was recorded.
	WebhookAttempt(outcome WebhookOutcome)
}

// UnknownTool is the tool label of calls naming no registered tool: the
// names a model writes are unbounded, those of the tool config are not.
const UnknownTool = "_unknown"

// CompletionResult is what a delivery to a completion key came to, or how a
// parked call's wait ended without one.
type CompletionResult string

const (
	// CompletionAccepted: the delivery was recorded (completed, or kept as
	// early until its call parks).
	CompletionAccepted CompletionResult = "accepted"
	// CompletionDuplicate: the same payload again; nothing changed.
	CompletionDuplicate CompletionResult = "duplicate"
	// CompletionConflict: a different payload for a completed key.
	CompletionConflict CompletionResult = "conflict"
	// CompletionUnknown: no such key (or a malformed or tampered one).
	CompletionUnknown CompletionResult = "unknown"
	// CompletionLate: the key had timed out or been cancelled.
	CompletionLate CompletionResult = "late"
	// CompletionExpired: a parked call's deadline or heartbeat ran out.
	CompletionExpired CompletionResult = "timed_out"
	// CompletionAborted: a parked call was cancelled with its turn.
	CompletionAborted CompletionResult = "cancelled"
)

// NopObserver observes nothing; it is Config.Observer's default.
type NopObserver struct{}

func (NopObserver) WaveStarted(int)                                 {}
func (NopObserver) CallAccounted(string, CallStatus, time.Duration) {}
func (NopObserver) AttemptStarted(string)                           {}
func (NopObserver) AttemptFinished(string, string, time.Duration)   {}
func (NopObserver) TurnSettled(Status, time.Duration)               {}
func (NopObserver) Completion(CompletionResult)                     {}
func (NopObserver) Truncated(string, int64)                         {}
func (NopObserver) WebhookAttempt(WebhookOutcome)                   {}

// toolLabel is the label of a call's tool: its name when the run's registry
// has it, else UnknownTool.
func (r *run) toolLabel(name string) string {
	if _, ok := r.reg.Lookup(name); ok {
		return name
	}
	return UnknownTool
}

// AttemptStarted implements dispatch.AttemptObserver.
func (r *run) AttemptStarted(call dispatch.Call, _ int) {
	r.svc.cfg.Observer.AttemptStarted(r.toolLabel(call.Name))
}

// AttemptFinished implements dispatch.AttemptObserver.
func (r *run) AttemptFinished(call dispatch.Call, _ int, o dispatch.Outcome, took time.Duration) {
	r.svc.cfg.Observer.AttemptFinished(r.toolLabel(call.Name), string(o.Status), took)
}

// observeAccounted reports an accounted call.
func (r *run) observeAccounted(a dispatch.Accounted, status CallStatus) {
	took := time.Duration(0)
	if !a.AdmittedAt.IsZero() {
		took = max(r.svc.cfg.Now().Sub(a.AdmittedAt), 0)
	}
	r.svc.cfg.Observer.CallAccounted(r.toolLabel(a.Call.Name), status, took)
}

// observeSettled reports a turn received at created that settled now.
func (s *Service) observeSettled(status Status, created time.Time) {
	if !status.Settled() {
		return
	}
	took := time.Duration(0)
	if !created.IsZero() {
		took = max(s.cfg.Now().Sub(created), 0)
	}
	s.cfg.Observer.TurnSettled(status, took)
}

// observeProjection reports a budget projection that dropped content.
func (s *Service) observeProjection(pr budget.Result) {
	if pr.Truncated {
		s.cfg.Observer.Truncated(pr.Unit, pr.DroppedBytes)
	}
}

// observeDelivery reports the result of Complete: err is what it returned.
func (s *Service) observeDelivery(res DeliveryResult, err error) {
	switch {
	case err == nil && res.Status == "already_completed":
		s.cfg.Observer.Completion(CompletionDuplicate)
	case err == nil:
		s.cfg.Observer.Completion(CompletionAccepted)
	case errors.Is(err, ErrCompletionConflict):
		s.cfg.Observer.Completion(CompletionConflict)
	case errors.Is(err, ErrCompletionGone):
		s.cfg.Observer.Completion(CompletionLate)
	case errors.Is(err, ErrNotFound):
		s.cfg.Observer.Completion(CompletionUnknown)
	}
	// Invalid deliveries and store failures resolve nothing: not counted.
}

// observeResolved reports parked calls whose wait ended without delivery.
func (s *Service) observeResolved(result CompletionResult, n int) {
	for range n {
		s.cfg.Observer.Completion(result)
	}
}
