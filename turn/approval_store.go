package turn

import (
	"context"
	"encoding/json"
	"time"
)

// ReasonApproval is the reason of a completion whose call waits for a
// person's decision before its tool runs (Completion.Reason).
const ReasonApproval = "approval"

// CompletionApproved is the status of an approval key whose call was
// approved: its tool runs (or is about to, in whichever process holds the
// turn), and the key is resolved with the tool's answer. Its payload is the
// decision. It is not final: the turn does not settle while a key is
// approved.
const CompletionApproved CompletionStatus = "approved"

// Approve is the store's half of an approve decision: the key, pending for
// approval, becomes approved with the decision as its payload, the lines
// (call_decided) join the ledger, and a waiting turn is claimed for Owner
// until LeaseUntil so that this process runs the approved call — all in one
// transaction.
type Approve struct {
	Key          TurnKey
	KeyHash      [32]byte
	Decision     json.RawMessage
	DecisionHash [32]byte
	Lines        []Line
	Owner        string
	LeaseUntil   time.Time
}

// Approved is what Approve did: Claimed when the turn was waiting and is
// now running under Owner's lease, at lease epoch Epoch (Commit.LeaseEpoch).
// A turn still running (its wave has not ended) is left to its owner,
// which claims it once it stops (ClaimApproved).
type Approved struct {
	Claimed bool
	Epoch   int
}

// ApprovalStore keeps approvals; both stores implement it beside
// CompletionStore.
type ApprovalStore interface {
	// Approve applies a; a key not pending for approval is
	// ErrCompletionState, and a turn or key that does not exist
	// ErrNotFound. Either way nothing is written.
	Approve(ctx context.Context, a Approve) (Approved, error)
	// ClaimApproved claims the waiting turn k for owner until until when
	// one of its keys is approved, returning the lease epoch; ok is false
	// (nothing written) otherwise.
	ClaimApproved(ctx context.Context, k TurnKey, owner string, until time.Time) (epoch int, ok bool, err error)
	// ListApprovals returns up to limit calls pending for approval across
	// sessions, newest first, before after (the pending listing's cursor),
	// each with its call's arguments as posted (Rule is left empty).
	ListApprovals(ctx context.Context, after Cursor, limit int) ([]Approval, error)
}
