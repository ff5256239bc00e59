package dispatch

import (
	"strconv"
	"time"
)

// Status says how a call ended.
type Status string

const (
	StatusOK        Status = "ok"
	StatusError     Status = "error"
	StatusPending   Status = "pending"
	StatusRefused   Status = "refused"
	StatusCancelled Status = "cancelled"
)

// Codes that dispatch itself puts on outcomes.
const (
	// CodeCancelled: the wave's context was cancelled, or a fail_fast wave
	// cancelled the call, before it answered.
	CodeCancelled = "cancelled"
	// CodeTurnFailed: a fail_fast wave was tainted by an earlier failure, so
	// the call was not run.
	CodeTurnFailed = "turn_failed"
	// CodeDuplicateCallID: an earlier call of the wave has the same id.
	CodeDuplicateCallID = "duplicate_call_id"
	// CodeInvalidArguments: a call of the meta-tool "call" whose arguments
	// are not {"name": string, "arguments": object}.
	CodeInvalidArguments = "invalid_arguments"
	// CodeToolPanic: the tool panicked; the message carries the panic value.
	CodeToolPanic = "tool_panic"
	// CodePendingMissingKey: the tool answered pending without first taking
	// a completion key, so nothing could ever complete it.
	CodePendingMissingKey = "pending_tool_missing_completion_key"
	// CodeAttemptNotRecorded: the host's AttemptHook refused the attempt, so
	// the tool did not run.
	CodeAttemptNotRecorded = "attempt_not_recorded"
	// CodeInvalidAdmission: Admit answered Run without a tool, or with a
	// verdict dispatch does not know.
	CodeInvalidAdmission = "invalid_admission"
	// CodeInvalidOutcome: a tool answered with a status dispatch does not know.
	CodeInvalidOutcome = "invalid_outcome"
	// CodeToolError and CodeRefused fill in an outcome whose status calls for
	// an error but that came without one.
	CodeToolError = "tool_error"
	CodeRefused   = "refused"
)

// Values of Pending.OnTimeout and Pending.OnCancel. dispatch passes them
// through; the host enforces them.
const (
	OnTimeoutErrorAsResult = "error_as_result"
	OnTimeoutFailTurn      = "fail_turn"
	OnCancelExternalWork   = "cancel_external_work"
	OnCancelIgnore         = "ignore"
)

// Error is what went wrong with a call, as the model will read it.
type Error struct {
	Code    string
	Message string
	// Retryable marks a transient failure that the tool's RetryPolicy may
	// retry; RetryAfter, when positive, is the earliest sensible retry.
	Retryable  bool
	RetryAfter time.Duration
	// TimedOut marks an attempt the tool cut short at its own time limit
	// (an HTTP or MCP tool's timeout).
	TimedOut bool
}

func (e *Error) Error() string {
	if e.Message == "" {
		return e.Code
	}
	return e.Code + ": " + e.Message
}

// Pending describes a deferred result: the tool started work elsewhere that
// will be completed later through the completion key it took.
type Pending struct {
	Deadline         time.Time
	HeartbeatTimeout time.Duration
	OnTimeout        string // OnTimeoutErrorAsResult or OnTimeoutFailTurn
	OnCancel         string // OnCancelExternalWork or OnCancelIgnore
	// Key is the completion key the tool took; dispatch fills it in.
	Key string
}

// Outcome is the answer to one call.
type Outcome struct {
	Status Status
	// Output is the tool's output: JSON text when JSON is true, otherwise
	// plain text.
	Output []byte
	JSON   bool
	// Err is set for StatusError, StatusRefused and StatusCancelled.
	Err *Error
	// Pending is set for StatusPending.
	Pending *Pending
	// Detail is opaque to dispatch: it travels untouched from the tool (or
	// the admission) to Account.
	Detail any
}

// OK is a successful outcome.
func OK(output []byte, isJSON bool) Outcome {
	return Outcome{Status: StatusOK, Output: output, JSON: isJSON}
}

// Fail is an error outcome that must not be retried.
func Fail(code, msg string) Outcome {
	return Outcome{Status: StatusError, Err: &Error{Code: code, Message: msg}}
}

// FailRetryable is an error outcome that the tool's RetryPolicy may retry,
// not before retryAfter when it is positive.
func FailRetryable(code, msg string, retryAfter time.Duration) Outcome {
	return Outcome{Status: StatusError, Err: &Error{Code: code, Message: msg, Retryable: true, RetryAfter: retryAfter}}
}

// Refused is the outcome of a call that no tool answered: not granted,
// unknown tool, invalid arguments. (It is not named Refuse because that is
// the Verdict.)
func Refused(code, msg string) Outcome {
	return Outcome{Status: StatusRefused, Err: &Error{Code: code, Message: msg}}
}

// Cancelled is the outcome of a call cancelled before it answered.
func Cancelled(msg string) Outcome {
	return Outcome{Status: StatusCancelled, Err: &Error{Code: CodeCancelled, Message: msg}}
}

// Defer is a pending outcome. The tool must have taken a completion key
// through its Attempt before returning it.
func Defer(p Pending) Outcome {
	return Outcome{Status: StatusPending, Pending: &p}
}

// failed reports whether o taints a fail_fast wave.
func (o Outcome) failed() bool {
	return o.Status == StatusError || o.Status == StatusRefused
}

// retryable reports whether o asks for another attempt.
func (o Outcome) retryable() bool {
	return o.Status == StatusError && o.Err != nil && o.Err.Retryable
}

// normalized makes o keep the promises Outcome documents, so that hosts can
// rely on Err and Pending being set whatever a tool or admission returned.
func (o Outcome) normalized() Outcome {
	switch o.Status {
	case StatusOK:
	case StatusPending:
		if o.Pending == nil {
			o.Pending = &Pending{}
		}
	case StatusError:
		if o.Err == nil {
			o.Err = &Error{Code: CodeToolError}
		}
	case StatusRefused:
		if o.Err == nil {
			o.Err = &Error{Code: CodeRefused}
		}
	case StatusCancelled:
		if o.Err == nil {
			o.Err = &Error{Code: CodeCancelled}
		}
	default:
		bad := Fail(CodeInvalidOutcome, "unknown outcome status "+strconv.Quote(string(o.Status)))
		bad.Detail = o.Detail
		return bad
	}
	return o
}
