package turn

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/turnd/turnd/dispatch"
)

// CompletionStatus is the state of a completion key.
type CompletionStatus string

const (
	// CompletionIssued: the key was handed to a tool; its call is not yet
	// recorded as pending.
	CompletionIssued CompletionStatus = "issued"
	// CompletionEarly: a delivery arrived while the key was only issued (a
	// fast external system); the payload is kept and applied once the call
	// is recorded as pending.
	CompletionEarly CompletionStatus = "early"
	// CompletionPending: the call is parked on the key.
	CompletionPending   CompletionStatus = "pending"
	CompletionCompleted CompletionStatus = "completed"
	CompletionTimedOut  CompletionStatus = "timed_out"
	CompletionCancelled CompletionStatus = "cancelled"
)

// Resolved reports whether the key has its one final resolution.
func (s CompletionStatus) Resolved() bool {
	return s == CompletionCompleted || s == CompletionTimedOut || s == CompletionCancelled
}

// ErrCompletionState: a completion was not in the state an operation
// expected; the store returns the completion as it is.
var ErrCompletionState = errors.New("completion not in the expected state")

// Completion is the durable wait of one deferred call, keyed by the SHA-256
// of its key (the key itself is never stored).
type Completion struct {
	KeyHash   [32]byte
	SessionID string
	TurnID    string
	CallIndex int
	CallID    string
	CallName  string
	Status    CompletionStatus
	// Reason is why the call parks: "" for its tool's external work,
	// ReasonApproval for a person's decision before its tool runs.
	Reason string
	// Deadline, HeartbeatTimeout and HeartbeatDeadline are set when the call
	// parks; HeartbeatDeadline is zero without a heartbeat clock.
	Deadline          time.Time
	HeartbeatTimeout  time.Duration
	HeartbeatDeadline time.Time
	OnTimeout         string
	OnCancel          string
	CancelURL         string
	// Payload is the delivery body as received (early or final); PayloadHash
	// its SHA-256, to tell an identical repeat from a different payload.
	Payload     json.RawMessage
	PayloadHash [32]byte
	CreatedAt   time.Time
	// ResolvedAt is when the final resolution was written; for an early
	// completion, when its payload arrived (DeliverEarly's now).
	ResolvedAt time.Time
}

// DeliveryTarget is a completion with what a delivery to it needs of its
// turn, read together (CompletionStore.GetDelivery).
type DeliveryTarget struct {
	Completion
	// Result is the call's recorded result when Recorded; a store may
	// leave out its output and error fields (a parked call has none, and a
	// delivery replaces them).
	Result   Result
	Recorded bool
	// Calls is how many calls the turn has; TurnCreatedAt when it was
	// received.
	Calls         int
	TurnCreatedAt time.Time
}

// ReadDelivery reads what GetDelivery returns by s's GetCompletion and
// then GetTurn: GetDelivery for a store to which a read costs no round
// trip (the embedded store's).
func ReadDelivery(ctx context.Context, s interface {
	GetCompletion(ctx context.Context, sessionID string, keyHash [32]byte) (Completion, error)
	GetTurn(ctx context.Context, k TurnKey) (Turn, error)
}, sessionID string, keyHash [32]byte) (DeliveryTarget, error) {
	c, err := s.GetCompletion(ctx, sessionID, keyHash)
	if err != nil {
		return DeliveryTarget{}, err
	}
	t, err := s.GetTurn(ctx, TurnKey{SessionID: c.SessionID, TurnID: c.TurnID})
	if err != nil {
		return DeliveryTarget{}, err
	}
	return targetOf(t, c), nil
}

// targetOf is the delivery target of completion c of turn t.
func targetOf(t Turn, c Completion) DeliveryTarget {
	d := DeliveryTarget{Completion: c, Calls: len(t.Calls), TurnCreatedAt: t.CreatedAt}
	d.Result, d.Recorded = findResult(t, c)
	return d
}

// base is the result a delivery answers: the call's recorded result, or
// a fresh one.
func (d DeliveryTarget) base() Result {
	if d.Recorded {
		return d.Result
	}
	return Result{Index: d.CallIndex, CallID: d.CallID, Name: d.CallName, Effect: dispatch.EffectWrite}
}

// Park moves an issued completion to pending when its call's pending
// outcome is committed (see Commit.Parks). An early completion stays early.
type Park struct {
	KeyHash           [32]byte
	Deadline          time.Time
	HeartbeatTimeout  time.Duration
	HeartbeatDeadline time.Time
	OnTimeout         string
	OnCancel          string
	CancelURL         string
}

// Resolution resolves one completion inside a ResolveBatch.
type Resolution struct {
	KeyHash [32]byte
	// Expect is the status the completion must have (pending, or early);
	// otherwise the whole batch fails with ErrCompletionState.
	Expect      CompletionStatus
	Status      CompletionStatus // completed, timed_out or cancelled
	Payload     json.RawMessage
	PayloadHash [32]byte
	// Result replaces the call's result row (by Index), unless KeepResult.
	Result Result
	// KeepResult leaves the call's result row as it is: the key of a call
	// whose result its wave writes (or wrote) is only closed.
	KeepResult bool
	// Outputs are full outputs kept for the result.
	Outputs []Output
}

// ResolveBatch resolves completions of one waiting turn atomically.
type ResolveBatch struct {
	Key   TurnKey
	Items []Resolution
	// Lines are appended (seqs assigned) in order.
	Lines []Line
	// When no completion of the turn is pending afterwards (and the turn is
	// waiting), the store sets the turn's status to SettleStatus with
	// settled_at Now and appends SettleLines.
	SettleStatus Status
	SettleLines  []Line
	// SettleWebhook, when set, is inserted into the webhook outbox with the
	// settlement, and only when the batch settles the turn.
	SettleWebhook *Webhook
	Now           time.Time
}

// Late is a delivery to a key already timed out or cancelled, to record
// (see CompletionStore.RecordLate).
type Late struct {
	KeyHash [32]byte
	// PayloadHash identifies the payload whatever its JSON formatting.
	PayloadHash [32]byte
	// Line is the completion_late line; Outputs the payload's full copy
	// when the line holds a projection of it.
	Line    Line
	Outputs []Output
	// Max is the most distinct late payloads recorded for the key.
	Max int
}

// LateOutcome is what RecordLate did with a late delivery.
type LateOutcome string

const (
	LateRecorded LateOutcome = "recorded"
	LateRepeated LateOutcome = "repeated"
	LateDropped  LateOutcome = "dropped"
)

// CompletionStore persists completion keys. It is part of Store.
type CompletionStore interface {
	// IssueCompletion records an issued key (status issued). Issuing a key
	// already recorded changes nothing and is not an error.
	IssueCompletion(ctx context.Context, c Completion) error
	// GetCompletion returns the completion of the session with that key
	// hash, or ErrNotFound. An empty sessionID looks up a legacy key (one
	// issued before keys were routed, see completion.Route): the store
	// finds its session from the hash first.
	GetCompletion(ctx context.Context, sessionID string, keyHash [32]byte) (Completion, error)
	// GetDelivery returns what GetCompletion returns with what a delivery
	// to the key needs of its turn (DeliveryTarget), in one read; the
	// same ErrNotFound for an unknown key.
	GetDelivery(ctx context.Context, sessionID string, keyHash [32]byte) (DeliveryTarget, error)
	// DeliverEarly keeps payload on an issued completion of the session and
	// marks it early.
	// On any other status it changes nothing and returns the completion with
	// ErrCompletionState.
	DeliverEarly(ctx context.Context, sessionID string, keyHash [32]byte, payload json.RawMessage, payloadHash [32]byte, now time.Time) (Completion, error)
	// Resolve applies b in one transaction: every item's completion must
	// have its Expect status (row locks; the first writer wins), else
	// nothing is written and the error is ErrCompletionState. The turn's
	// settled state is reported in the returned bool.
	Resolve(ctx context.Context, b ResolveBatch) (settled bool, err error)
	// Heartbeat extends a pending completion's heartbeat clock to
	// now + its HeartbeatTimeout (never past nor moving its Deadline) and
	// returns it; a completion not pending is returned with
	// ErrCompletionState.
	Heartbeat(ctx context.Context, sessionID string, keyHash [32]byte, now time.Time) (Completion, error)
	// DueCompletions returns up to limit pending completions whose deadline
	// or heartbeat deadline is at or before now.
	DueCompletions(ctx context.Context, now time.Time, limit int) ([]Completion, error)
	// PendingCount returns how many completions are pending (calls parked
	// on their key) in the whole store, whichever process parked them.
	PendingCount(ctx context.Context) (int64, error)
	// TurnCompletions returns the completions of a turn.
	TurnCompletions(ctx context.Context, k TurnKey) ([]Completion, error)
	// RecordLate records l, a payload delivered to a key of turn k already
	// timed out or cancelled, in one transaction: when the key has recorded
	// no late payload with l.PayloadHash and fewer than l.Max of them, it
	// appends l.Line, writes l.Outputs and keeps the hash (LateRecorded);
	// a hash it keeps already writes nothing (LateRepeated); past l.Max
	// the delivery is only counted (LateDropped). An unknown key or turn
	// is ErrNotFound.
	RecordLate(ctx context.Context, k TurnKey, l Late) (LateOutcome, error)
	// Secret returns the completion secret kept in the database, storing
	// generate() first when there is none (the first replica wins).
	Secret(ctx context.Context, generate func() (string, error)) (string, error)
}
