package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/turnd/turnd/store/internal/sqlstore"
	"github.com/turnd/turnd/turn"
)

const sqlLookupSession = `SELECT tools, budget, callback_url, metadata, created_at, approval,
    EXISTS (SELECT 1 FROM turns WHERE session_id = ?1 AND id = ?2)
FROM sessions WHERE id = ?1`

// LookupTurn reads the session, whether the turn id is taken and the
// answered calls in one read transaction (one snapshot); see turn.Store.
func (s *Store) LookupTurn(ctx context.Context, sessionID, turnID string, callIDs []string) (turn.Lookup, error) {
	op := fmt.Sprintf("looking up turn %s/%s", sessionID, turnID)
	lk, err := s.lookupTurn(ctx, sessionID, turnID, callIDs)
	if err != nil {
		return turn.Lookup{}, wrap(op, err)
	}
	return lk, nil
}

func (s *Store) lookupTurn(ctx context.Context, sessionID, turnID string, callIDs []string) (turn.Lookup, error) {
	lk := turn.Lookup{Answered: map[string]turn.Result{}}
	tx, err := s.read.BeginTx(ctx, nil)
	if err != nil {
		return turn.Lookup{}, err
	}
	defer tx.Rollback()
	var row sessionRow
	err = tx.QueryRowContext(ctx, sqlLookupSession, sessionID, turnID).Scan(append(row.dest(), &lk.TurnFound)...)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return lk, nil // no session: no turn, no answers
	case err != nil:
		return turn.Lookup{}, err
	}
	lk.SessionFound = true
	if lk.Session, err = row.session(sessionID); err != nil {
		return turn.Lookup{}, err
	}
	if len(callIDs) == 0 {
		return lk, nil
	}
	ids, err := json.Marshal(callIDs)
	if err != nil {
		return turn.Lookup{}, err
	}
	rows, err := tx.QueryContext(ctx, sqlAnswered, sessionID, string(ids))
	if err != nil {
		return turn.Lookup{}, err
	}
	_, err = collectResults(rows, func(turnID string, r *turn.Result) {
		r.ReplayedFrom = turnID
		lk.Answered[r.CallID] = *r
	})
	if err != nil {
		return turn.Lookup{}, err
	}
	return lk, nil
}

const (
	sqlInsertSettledTurn = `INSERT INTO turns (session_id, id, status, mode, failure_policy, calls, hash, created_at, settled_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (session_id, id) DO NOTHING`

	// sqlAnyAnswered reports whether any of the call ids in the JSON array
	// ?2 has an answer in session ?1, with sqlAnswered's predicate.
	sqlAnyAnswered = `SELECT EXISTS (SELECT 1 FROM results
    WHERE session_id = ?1 AND call_id IN (SELECT value FROM json_each(?2))
        AND status <> 'started' AND status <> '' AND replayed_from = '')`
)

// RecordTurn records r in one transaction; see turn.Store. The embedded
// store has one writer connection, so there is no commit to share, and the
// check of the turn's call ids against earlier answers sees every write
// before it.
func (s *Store) RecordTurn(ctx context.Context, r turn.Record) error {
	if err := sqlstore.CheckRecord(&r); err != nil {
		return err
	}
	t := r.Turn
	k := turn.TurnKey{SessionID: t.SessionID, TurnID: t.ID}
	op := fmt.Sprintf("recording turn %s/%s", k.SessionID, k.TurnID)
	calls, err := sqlstore.Calls(t.Calls)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	w, err := encodeWrites(k, r.Lines, r.Results, r.Outputs)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	hook, err := encodeWebhook(k, r.Webhook)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	ids := make([]string, len(t.Calls))
	for i, c := range t.Calls {
		ids[i] = c.ID
	}
	idsJSON, err := json.Marshal(ids)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	var noSession, exists, answered bool
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		var found int
		if err := tx.QueryRowContext(ctx, sqlSessionExists, k.SessionID).Scan(&found); err != nil {
			return err
		}
		if found == 0 {
			noSession = true
			return errRollback
		}
		ins, err := tx.ExecContext(ctx, sqlInsertSettledTurn, k.SessionID, k.TurnID, string(t.Status), string(t.Mode),
			string(t.FailurePolicy), string(calls), t.Hash, micros(t.CreatedAt), nullMicros(t.SettledAt))
		if err != nil {
			return err
		}
		if n, err := ins.RowsAffected(); err != nil || n == 0 {
			exists = err == nil
			return errRollback
		}
		// After the insert: a taken turn id is reported before answered calls.
		if err := tx.QueryRowContext(ctx, sqlAnyAnswered, k.SessionID, string(idsJSON)).Scan(&answered); err != nil {
			return err
		}
		if answered {
			return errRollback
		}
		if err := w.apply(ctx, tx); err != nil {
			return err
		}
		return hook.insert(ctx, tx, k)
	})
	switch {
	case noSession:
		return fmt.Errorf("%s: session: %w", op, turn.ErrNotFound)
	case exists:
		return fmt.Errorf("%s: %w", op, turn.ErrTurnExists)
	case answered:
		return fmt.Errorf("%s: %w", op, turn.ErrCallsAnswered)
	}
	return wrap(op, err)
}
