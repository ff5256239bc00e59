package turn

import (
	"encoding/json"
	"time"

	"github.com/turnd/turnd/budget"
	"github.com/turnd/turnd/dispatch"
	"github.com/turnd/turnd/tool"
)

// Session holds a conversation's ledger, its tool grants, its budget and an
// optional callback URL.
type Session struct {
	ID string
	// Tools lists the granted tool names; nil grants every registered tool.
	Tools       []string
	Budget      budget.Config
	CallbackURL string
	Metadata    json.RawMessage
	CreatedAt   time.Time
	// Approval is the session's own approval policy, which adds to the
	// tools' (it can only ask for more approvals); nil for none.
	Approval *tool.Approval
}

// Granted reports whether the session may call the named tool.
func (s Session) Granted(name string) bool {
	if s.Tools == nil {
		return true
	}
	for _, t := range s.Tools {
		if t == name {
			return true
		}
	}
	return false
}

// Status is a turn's lifecycle state.
type Status string

const (
	StatusRunning   Status = "running"
	StatusWaiting   Status = "waiting"
	StatusCompleted Status = "completed"
	StatusFailed    Status = "failed"
	StatusCancelled Status = "cancelled"
)

// Settled reports whether the status is final.
func (s Status) Settled() bool {
	return s == StatusCompleted || s == StatusFailed || s == StatusCancelled
}

// CallStatus is the state of one call's result.
type CallStatus string

const (
	CallOK        CallStatus = "ok"
	CallFailed    CallStatus = "error"
	CallPending   CallStatus = "pending"
	CallRefused   CallStatus = "refused"
	CallCancelled CallStatus = "cancelled"
	CallTimedOut  CallStatus = "timed_out"
	// CallStarted is internal: a write call whose attempt_started line is
	// committed and whose outcome is not. It never reaches the API; recovery
	// reads it to refuse running the call again.
	CallStarted CallStatus = "started"
)

// Final reports whether the call has an outcome that replay may return.
func (s CallStatus) Final() bool { return s != CallStarted && s != "" }

// Call is one tool call of a turn, in the model's order.
type Call struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// Turn is an assistant turn: its calls and, in call order, the results
// accounted so far.
type Turn struct {
	SessionID     string
	ID            string
	Status        Status
	Mode          dispatch.Mode
	FailurePolicy dispatch.FailurePolicy
	Calls         []Call
	// Hash identifies the request (calls, mode, policy); a repost with a
	// different hash under the same turn id is a conflict.
	Hash      string
	CreatedAt time.Time
	SettledAt time.Time // zero while not settled
	Results   []Result  // in call order; only calls accounted so far
}

// CallError is the error a model reads for a call.
type CallError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Result is the accounted outcome of one call.
type Result struct {
	Index  int
	CallID string
	Name   string
	Effect dispatch.Effect
	Status CallStatus
	// Output is the budgeted projection as a JSON value (a JSON string for
	// text outputs); nil when the call produced none.
	Output        json.RawMessage
	Error         *CallError
	Truncated     bool
	OriginalBytes int64
	OriginalLines int64
	OutputID      string // set when the full output was kept
	// Repaired counts the invalid UTF-8 sequences and NULs of the tool's
	// output and error replaced by U+FFFD (see repair.go). The call's
	// call_answered line carries it as output_repaired; it is not stored
	// with the result.
	Repaired   int
	Attempts   int
	StartedAt  time.Time
	FinishedAt time.Time
	// ReplayedFrom names the turn whose record answered this call; empty
	// when the call was answered in this turn.
	ReplayedFrom string
	// Projection says how a truncated output was projected, when not by
	// the session's plain budget (see turnbudget.go); not stored with the
	// result.
	Projection *Projection

	// keptBytes and kept are what the projection kept of the output, for
	// the turn budget (set by project).
	keptBytes int64
	kept      []budget.Span
}

// stored is r as a store reads it back: without what is not stored with a
// result (Repaired, Projection, the projection's bookkeeping).
func (r Result) stored() Result {
	r.Repaired, r.Projection, r.keptBytes, r.kept = 0, nil, 0, nil
	return r
}

// LineKind names a ledger line.
type LineKind string

const (
	LineTurnReceived   LineKind = "turn_received"
	LineTurnResumed    LineKind = "turn_resumed"
	LineCallAdmitted   LineKind = "call_admitted"
	LineCallRefused    LineKind = "call_refused"
	LineCallReplayed   LineKind = "call_replayed"
	LineAttemptStarted LineKind = "attempt_started"
	LineCallAnswered   LineKind = "call_answered"
	LineCallPending    LineKind = "call_pending"
	LineTurnSettled    LineKind = "turn_settled"
)

// Line is one ledger entry. Seq is assigned by the store: gap-free and
// strictly increasing per session.
type Line struct {
	Seq       int64
	SessionID string
	TurnID    string
	CallID    string
	Kind      LineKind
	At        time.Time
	Data      json.RawMessage
}

// Output is a full, unprojected tool output kept for retrieval.
type Output struct {
	ID          string
	SessionID   string
	TurnID      string
	CallID      string
	ContentType string
	Data        []byte
	CreatedAt   time.Time
	ExpiresAt   time.Time
}

// TurnKey names a turn.
type TurnKey struct {
	SessionID string
	TurnID    string
}
