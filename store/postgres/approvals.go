package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/turnd/turnd/store/internal/sqlstore"
	"github.com/turnd/turnd/turn"
)

// Approvals: an approve decision locks the turn and the key, then moves the
// key to approved, writes the decision's lines and claims a waiting turn in
// one statement; see turn.ApprovalStore.
const (
	sqlLockApproval = `SELECT c.status, c.reason FROM turns t
JOIN completions c ON c.session_id = t.session_id AND c.turn_id = t.id
WHERE t.session_id = $1 AND t.id = $2 AND c.key_hash = $3
FOR NO KEY UPDATE OF t FOR UPDATE OF c`

	approveHead = `WITH gate AS (
    UPDATE completions SET status = 'approved', payload = @payload::json, payload_hash = @hash
    WHERE session_id = @session AND key_hash = @key AND turn_id = @turn AND status = 'pending' AND reason = 'approval'
    RETURNING 1
)`
	approveTail = `, claim AS (
    UPDATE turns SET status = 'running', lease_owner = @owner, lease_until = @until
    WHERE session_id = @session AND id = @turn AND status = 'waiting' AND EXISTS (SELECT FROM gate)
    RETURNING resumes
)
SELECT EXISTS (SELECT FROM gate), (SELECT resumes FROM claim)`

	sqlClaimApproved = `UPDATE turns SET status = 'running', lease_owner = $3, lease_until = $4
WHERE session_id = $1 AND id = $2 AND status = 'waiting'
    AND EXISTS (SELECT FROM completions WHERE session_id = $1 AND turn_id = $2 AND status = 'approved')
RETURNING resumes`

	// ListApprovalsSQL is exported for the plan tests; the partial index
	// completions_approvals serves it. Each row carries its call's
	// arguments, read from its turn's calls.
	ListApprovalsSQL = `SELECT c.session_id, c.turn_id, c.call_idx, c.call_id, c.call_name, c.deadline, c.heartbeat_timeout,
    c.heartbeat_deadline, c.on_timeout, c.on_cancel, c.created_at, c.reason, t.calls->c.call_idx->'arguments'
FROM completions c
JOIN turns t ON t.session_id = c.session_id AND t.id = c.turn_id
WHERE c.status = 'pending' AND c.reason = 'approval'
    AND (c.created_at, c.session_id, c.turn_id, c.call_idx) < ($1::timestamptz, $2::text, $3::text, $4::integer)
ORDER BY c.created_at DESC, c.session_id DESC, c.turn_id DESC, c.call_idx DESC
LIMIT $5`
)

// approveSQL is the approve statement without its lines, and with them.
var approveSQL = writeVariants(approveHead, approveTail, writeLines)

// approveParams are approveSQL's parameters.
type approveParams struct {
	a     turn.Approve
	lines linesParams
}

func (p *approveParams) variant() int {
	if p.lines.n > 0 {
		return partLines
	}
	return 0
}

func (p *approveParams) args() []any {
	st := approveSQL[p.variant()]
	out := writeKeyArgs(p.a.Key, len(st.params))
	for _, name := range st.params[2:] {
		switch name {
		case "payload":
			out = append(out, string(p.a.Decision))
		case "hash":
			out = append(out, p.a.DecisionHash[:])
		case "key":
			out = append(out, p.a.KeyHash[:])
		case "n":
			out = append(out, p.lines.n)
		case "l_lines":
			out = append(out, p.lines.lines)
		case "owner":
			out = append(out, p.a.Owner)
		case "until":
			out = append(out, p.a.LeaseUntil)
		default:
			panic("postgres: approve statement parameter " + name + " has no value") // a bug in this file
		}
	}
	return out
}

// Approve applies an approve decision; see turn.ApprovalStore.
func (s *Store) Approve(ctx context.Context, a turn.Approve) (turn.Approved, error) {
	op := fmt.Sprintf("approving call of turn %s/%s (completion %s)", a.Key.SessionID, a.Key.TurnID, sqlstore.Fingerprint(a.KeyHash))
	if err := sqlstore.CheckApprove(a); err != nil {
		return turn.Approved{}, fmt.Errorf("%s: %w", op, err)
	}
	p := approveParams{a: a}
	if err := p.lines.set(a.Key, a.Lines); err != nil {
		return turn.Approved{}, fmt.Errorf("%s: %w", op, err)
	}
	var out turn.Approved
	err := pgx.BeginTxFunc(ctx, s.pool, resolveTx, func(tx pgx.Tx) error {
		var status, reason string
		if err := tx.QueryRow(ctx, sqlLockApproval, a.Key.SessionID, a.Key.TurnID, a.KeyHash[:]).Scan(&status, &reason); err != nil {
			return err // pgx.ErrNoRows: no such turn or key
		}
		if err := sqlstore.CheckApprovable(a.KeyHash, status, reason); err != nil {
			return err
		}
		var applied bool
		var epoch pgtype.Int4
		if err := tx.QueryRow(ctx, approveSQL[p.variant()].sql, p.args()...).Scan(&applied, &epoch); err != nil {
			return err
		}
		if !applied {
			return errors.New("the locked approval was not updated")
		}
		out = turn.Approved{Claimed: epoch.Valid, Epoch: int(epoch.Int32)}
		return nil
	})
	if err != nil {
		return turn.Approved{}, wrap(op, err)
	}
	return out, nil
}

// ClaimApproved claims a waiting turn with an approved key; see
// turn.ApprovalStore.
func (s *Store) ClaimApproved(ctx context.Context, k turn.TurnKey, owner string, until time.Time) (int, bool, error) {
	var epoch int32
	err := s.pool.QueryRow(ctx, sqlClaimApproved, k.SessionID, k.TurnID, owner, until).Scan(&epoch)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, wrap(fmt.Sprintf("claiming turn %s/%s to run its approved calls", k.SessionID, k.TurnID), err)
	}
	return int(epoch), true, nil
}

// ListApprovals returns a page of the calls pending for approval; see
// turn.ApprovalStore.
func (s *Store) ListApprovals(ctx context.Context, after turn.Cursor, limit int) ([]turn.Approval, error) {
	const op = "listing approvals"
	at, sid, tid, idx, err := sqlstore.ParkedCursor(after)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	collect := func(rows pgx.Rows) ([]turn.Approval, error) {
		var r parkedRow
		var args []byte
		return forEach(rows, append(r.dest(), &args), func() (turn.Approval, error) {
			return turn.Approval{ParkedCall: r.parked(), Arguments: bytes.Clone(args)}, nil
		})
	}
	return queryAll(ctx, s.pool, op, collect, ListApprovalsSQL, at, sid, tid, idx, limit)
}
