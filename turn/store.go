package turn

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Store errors. Implementations translate their driver's errors into these
// at their boundary (e.g. pgx.ErrNoRows → ErrNotFound).
var (
	ErrNotFound      = errors.New("not found")
	ErrSessionExists = errors.New("session already exists")
	ErrTurnExists    = errors.New("turn already exists")
	ErrLeaseLost     = errors.New("turn lease held by another owner")
	// ErrCallsAnswered: RecordTurn found one of the turn's call ids
	// answered earlier in the session (see Answered), so the turn, which
	// ran without replaying it, is not recorded.
	ErrCallsAnswered = errors.New("a call id of the turn was answered earlier in the session")
	// ErrUnavailable wraps failures to reach the store (connection refused,
	// timeouts): the caller may retry later.
	ErrUnavailable = errors.New("store unavailable")
)

// MaxPageBytes bounds the line data (LineBytes) of a ledger or event page
// the service reads: a page holds more only when it is a single line.
const MaxPageBytes = 1 << 20

// LineBytes is a line's size as ledger pages count it: its data and ids.
func LineBytes(l Line) int { return len(l.Data) + len(l.TurnID) + len(l.CallID) + len(l.Kind) }

// Receive describes a turn to record.
type Receive struct {
	// Session is created with these values when it does not exist yet
	// (implicit creation by the first turn); ignored otherwise.
	Session Session
	Turn    Turn // Status, Calls, Hash, Mode, FailurePolicy, CreatedAt set
	// Line is the turn_received line; the store assigns its Seq.
	Line       Line
	LeaseOwner string
	LeaseUntil time.Time
}

// Commit is one atomic write of a running turn.
type Commit struct {
	Key TurnKey
	// LeaseOwner must still hold the turn's lease, else the commit fails with
	// ErrLeaseLost and writes nothing. A successful commit extends the lease
	// to LeaseUntil.
	LeaseOwner string
	LeaseUntil time.Time
	// LeaseEpoch is the turn's resumes count when LeaseOwner took the
	// lease: 0 for a turn it received, Claim.Resumes for one it claimed.
	// A commit whose epoch is not the turn's current resumes (the owner
	// lost the lease and claimed it back since) fails with ErrLeaseLost.
	LeaseEpoch int
	// Lines are appended in order; the store assigns consecutive seqs.
	Lines []Line
	// Results are upserted by (session, turn, Index). A result is always
	// of the turn's call at its Index, so its CallID is that call's id: a
	// store may key results by call id (the PostgreSQL store does, and
	// reads a turn's results by its calls' ids).
	Results []Result
	Outputs []Output
	// Status, when non-empty, sets the turn's status; SettledAt is stored
	// with it (zero for an unsettled status). A settled or waiting status
	// releases the lease (a waiting turn has no wave running anywhere).
	Status    Status
	SettledAt time.Time
	// Parks move issued completions of pending calls to pending.
	Parks []Park
	// Webhook, when set, is inserted into the webhook outbox by the same
	// transaction (only when the commit applies: a lost lease writes no
	// webhook). The service sets it on the commit that settles a turn of a
	// session with a callback URL.
	Webhook *Webhook
}

// Store persists sessions, turns, results, ledger lines and full outputs.
// Every method is safe for concurrent use. Implementations: store/postgres
// and store/sqlite; both pass turn/storetest.
type Store interface {
	// CreateSession inserts s; ErrSessionExists when the id is taken.
	CreateSession(ctx context.Context, s Session) error
	// GetSession returns the session or ErrNotFound.
	GetSession(ctx context.Context, id string) (Session, error)

	// ReceiveTurn atomically creates the session when absent, inserts the
	// turn with its lease and appends r.Line. When the turn id is already
	// recorded in the session it writes nothing and returns the recorded
	// turn (with its results) and ErrTurnExists. On success it returns the
	// session as stored (the existing one, or the one it created) and the
	// turn_received line's seq.
	ReceiveTurn(ctx context.Context, r Receive) (ReceiveResult, error)

	// Commit applies c atomically (see Commit). The lines' seqs continue the
	// session's sequence without gaps.
	Commit(ctx context.Context, c Commit) error

	// GetTurn returns the turn with its results in call order (results with
	// status CallStarted included), or ErrNotFound.
	GetTurn(ctx context.Context, k TurnKey) (Turn, error)

	// Ledger returns up to limit lines of the session with seq > after, in
	// seq order, and lines only while their LineBytes sum to at most
	// maxBytes (the first line whatever its size). It reads about a page
	// from the database, not the whole range, and may return a shorter
	// page than the bounds allow, never an empty one while lines remain.
	// An unknown session yields ErrNotFound.
	Ledger(ctx context.Context, sessionID string, after int64, limit, maxBytes int) ([]Line, error)
	// TurnLedger is Ledger for the lines of one turn of the session, read
	// by an index on the turn without reading its session's other lines.
	// An unknown session or turn yields no lines, not an error.
	TurnLedger(ctx context.Context, sessionID, turnID string, after int64, limit, maxBytes int) ([]Line, error)

	// LookupTurn reads, in one round trip and without writing, what a turn
	// about to run needs from the store: the session (SessionFound false
	// when absent), whether turnID is already recorded in it, and
	// Answered(sessionID, callIDs).
	LookupTurn(ctx context.Context, sessionID, turnID string, callIDs []string) (Lookup, error)

	// RecordTurn records, atomically, a turn that ran to its end before
	// anything of it was stored (see Record): r.Turn without a lease, r.Lines
	// appended to the session's ledger (consecutive seqs, no gaps), r.Results,
	// r.Outputs and r.Webhook. It writes nothing and returns, checked in this
	// order, ErrNotFound (no session), ErrTurnExists (the turn id is
	// recorded) or ErrCallsAnswered (a call id has an answer in the session
	// as Answered defines it: a final result that is not a replay), the
	// check and the write one atomic step as far as the store serialises a
	// session's writers. Concurrent calls may share one transaction (group
	// commit), each applied or refused whole and independently of the
	// others.
	RecordTurn(ctx context.Context, r Record) error

	// Answered returns, for each of callIDs that has a final result in the
	// session that was not itself a replay, the earliest such result
	// (ReplayedFrom set to the turn that recorded it). Missing ids are absent.
	Answered(ctx context.Context, sessionID string, callIDs []string) (map[string]Result, error)

	// GetOutput returns a kept full output of the session that has not
	// expired, or ErrNotFound. An empty sessionID looks up a legacy output id
	// (one issued before ids were routed): the store finds its session first.
	GetOutput(ctx context.Context, sessionID, id string) (Output, error)
	// DeleteExpiredOutputs removes outputs whose ExpiresAt is before now.
	DeleteExpiredOutputs(ctx context.Context, now time.Time) (int64, error)

	// ClaimTurns takes over up to limit turns in status running whose lease
	// expired before now (their owner died or stalled), setting owner and
	// until, counts the claim in each turn's resumes, and returns them. A
	// turn already claimed r >= FreeResumes times is taken only once its
	// lease expired backoff × 2^(r-FreeResumes) (at most 64 × backoff)
	// before now. Two concurrent claimers never get the same turn.
	ClaimTurns(ctx context.Context, owner string, now, until time.Time, backoff time.Duration, limit int) ([]Claim, error)
	// RenewLeases extends owner's leases on keys to until; keys owner no
	// longer holds are returned as lost.
	RenewLeases(ctx context.Context, owner string, until time.Time, keys []TurnKey) (lost []TurnKey, err error)
	// RequestCancel records, at time at, a request to cancel a running
	// turn, for the replica whose wave runs it (see CancelRequested). A
	// repeated request keeps the first one's time; a turn not running is
	// left as it is, without error; an unknown turn is ErrNotFound.
	RequestCancel(ctx context.Context, k TurnKey, at time.Time) error
	// CancelRequested returns those of keys whose turn is running with a
	// cancel request, in the order given (none for unknown keys).
	CancelRequested(ctx context.Context, keys []TurnKey) ([]TurnKey, error)
	// Unsettled returns those of keys whose turn is recorded and not
	// settled (running or waiting), in the order given: the turns a
	// waiter still waits on (see WaitSettled).
	Unsettled(ctx context.Context, keys []TurnKey) ([]TurnKey, error)

	// Ping checks that the store is reachable and its schema current.
	Ping(ctx context.Context) error
	// Close releases the store's resources.
	Close()

	// CompletionStore keeps the completion keys of deferred calls.
	CompletionStore
	// WebhookStore keeps the webhook outbox.
	WebhookStore
	// ApprovalStore keeps the decisions on calls waiting for approval.
	ApprovalStore
	// Lister lists sessions, turns and parked calls, newest first.
	Lister
}

// MigratedStore is a Store whose schema turnd migrates (both stores are):
// Migrate applies the embedded migrations the database lacks, and
// SchemaVersion reports the database's version and the newest this binary
// knows.
type MigratedStore interface {
	Store
	Migrate(ctx context.Context) error
	SchemaVersion(ctx context.Context) (current, latest int, err error)
}

// FreeResumes is how often a turn is claimed as soon as its lease expires;
// later claims back off (see ClaimTurns). A replica that dies, or two that
// take a turn from each other under load, resume it at once; a turn that
// fails every resumption waits longer each time.
const FreeResumes = 3

// Claim is a running turn ClaimTurns took over.
type Claim struct {
	TurnKey
	// Resumes counts the claims of the turn, this one included.
	Resumes int
	// PrevOwner is the owner whose expired lease the claim took ("" when
	// none was recorded).
	PrevOwner string
}

// Lookup is what LookupTurn reports.
type Lookup struct {
	Session      Session
	SessionFound bool
	// TurnFound: the turn id is recorded in the session.
	TurnFound bool
	// Answered is Answered(sessionID, callIDs); never nil.
	Answered map[string]Result
}

// Record is a whole turn to record at once: a turn whose calls are all
// reads (tools that may run again after a crash) runs before anything of it
// is stored, and is recorded with all its lines in one write. Nothing is
// acknowledged before that write commits; a crash before it loses only
// work that may be done again.
type Record struct {
	// Turn has its final Status (settled), SettledAt, Calls, Hash, Mode,
	// FailurePolicy and CreatedAt set; its Results are ignored (see Results).
	Turn Turn
	// Lines are all of the turn's lines in order, turn_received first; the
	// store assigns their seqs.
	Lines []Line
	// Results are of the turn's calls: each CallID is the id of
	// Turn.Calls[Index] (checked; see Commit.Results).
	Results []Result
	Outputs []Output
	// Webhook, when set, is inserted into the webhook outbox with the turn.
	Webhook *Webhook
}

// ReceiveResult is what ReceiveTurn reports.
type ReceiveResult struct {
	Session Session
	Seq     int64
	// Existing is the recorded turn when err is ErrTurnExists.
	Existing Turn
}

// CheckResultCalls checks the stores' contract on results (see
// Commit.Results): each is of one of calls, the turn's, at its Index and
// under that call's id. A store that keys results by call id would keep
// one that is not as a second row its turn does not read back.
func CheckResultCalls(calls []Call, results []Result) error {
	for _, res := range results {
		if res.Index < 0 || res.Index >= len(calls) {
			return fmt.Errorf("result index %d is outside the turn's %d calls", res.Index, len(calls))
		}
		if id := calls[res.Index].ID; res.CallID != id {
			return fmt.Errorf("result %d has call id %q, the turn's call %d has %q", res.Index, res.CallID, res.Index, id)
		}
	}
	return nil
}
