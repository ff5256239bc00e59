package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/turnd/turnd/store/internal/sqlstore"
	"github.com/turnd/turnd/turn"
)

// Approvals; see turn.ApprovalStore and the PostgreSQL store's statements.
const (
	sqlApprovalState = `SELECT c.status, c.reason, t.status FROM turns t
JOIN completions c ON c.session_id = t.session_id AND c.turn_id = t.id
WHERE t.session_id = ? AND t.id = ? AND c.key_hash = ?`

	sqlApprove = `UPDATE completions SET status = 'approved', payload = ?3, payload_hash = ?4
WHERE session_id = ?1 AND key_hash = ?2 AND status = 'pending' AND reason = 'approval'`

	sqlClaimApproved = `UPDATE turns SET status = 'running', lease_owner = ?3, lease_until = ?4
WHERE session_id = ?1 AND id = ?2 AND status = 'waiting'
    AND EXISTS (SELECT 1 FROM completions WHERE session_id = ?1 AND turn_id = ?2 AND status = 'approved')
RETURNING resumes`

	sqlListApprovals = `SELECT c.session_id, c.turn_id, c.call_idx, c.call_id, c.call_name, c.deadline, c.heartbeat_timeout,
    c.heartbeat_deadline, c.on_timeout, c.on_cancel, c.created_at, c.reason,
    json_extract(t.calls, '$[' || c.call_idx || '].arguments')
FROM completions c
JOIN turns t ON t.session_id = c.session_id AND t.id = c.turn_id
WHERE c.status = 'pending' AND c.reason = 'approval' AND (c.created_at, c.session_id, c.turn_id, c.call_idx) < (?, ?, ?, ?)
ORDER BY c.created_at DESC, c.session_id DESC, c.turn_id DESC, c.call_idx DESC
LIMIT ?`
)

// Approve applies an approve decision in one transaction; see
// turn.ApprovalStore.
func (s *Store) Approve(ctx context.Context, a turn.Approve) (turn.Approved, error) {
	op := fmt.Sprintf("approving call of turn %s/%s (completion %s)", a.Key.SessionID, a.Key.TurnID, sqlstore.Fingerprint(a.KeyHash))
	if err := sqlstore.CheckApprove(a); err != nil {
		return turn.Approved{}, fmt.Errorf("%s: %w", op, err)
	}
	ls, err := encodeLines(a.Key, a.Lines)
	if err != nil {
		return turn.Approved{}, fmt.Errorf("%s: %w", op, err)
	}
	var out turn.Approved
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		var status, reason, turnStatus string
		if err := tx.QueryRowContext(ctx, sqlApprovalState, a.Key.SessionID, a.Key.TurnID, a.KeyHash[:]).
			Scan(&status, &reason, &turnStatus); err != nil {
			return err // sql.ErrNoRows: no such turn or key
		}
		if err := sqlstore.CheckApprovable(a.KeyHash, status, reason); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, sqlApprove, a.Key.SessionID, a.KeyHash[:], string(a.Decision), a.DecisionHash[:]); err != nil {
			return err
		}
		if err := ls.append(ctx, tx); err != nil {
			return err
		}
		if turnStatus != string(turn.StatusWaiting) {
			return nil
		}
		var epoch int
		if err := tx.QueryRowContext(ctx, sqlClaimApproved, a.Key.SessionID, a.Key.TurnID, a.Owner, micros(a.LeaseUntil)).Scan(&epoch); err != nil {
			return err
		}
		out = turn.Approved{Claimed: true, Epoch: epoch}
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
	var epoch int
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, sqlClaimApproved, k.SessionID, k.TurnID, owner, micros(until)).Scan(&epoch)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, wrap(fmt.Sprintf("claiming turn %s/%s to run its approved calls", k.SessionID, k.TurnID), err)
	}
	return epoch, true, nil
}

// ListApprovals returns a page of the calls pending for approval; see
// turn.ApprovalStore.
func (s *Store) ListApprovals(ctx context.Context, after turn.Cursor, limit int) ([]turn.Approval, error) {
	const op = "listing approvals"
	at, sid, tid, idx, err := sqlstore.ParkedCursor(after)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	scan := func(rows scanner) (turn.Approval, error) {
		var args sql.NullString
		p, err := scanParkedWith(rows, &args)
		a := turn.Approval{ParkedCall: p}
		if args.Valid {
			a.Arguments = json.RawMessage(args.String)
		}
		return a, err
	}
	return queryAll(ctx, s.read, op, collectRows(scan), sqlListApprovals, micros(at), sid, tid, idx, limit)
}
