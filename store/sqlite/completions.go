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

// completionColumns are the columns scanCompletion reads, in order.
const completionColumns = sqlstore.CompletionColumns

// dueAt is the expression of the completions_due index: the earlier of the
// deadline and the heartbeat deadline that are set (SQLite's min() of
// several arguments is NULL when any is). Queries repeat it verbatim so that
// SQLite uses the index.
const dueAt = `min(coalesce(deadline, heartbeat_deadline), coalesce(heartbeat_deadline, deadline))`

const (
	// A key already recorded is left as it is: issuing is idempotent. The
	// turn's foreign key makes a key of an unknown turn turn.ErrNotFound.
	sqlIssueCompletion = `INSERT INTO completions (key_hash, session_id, turn_id, call_idx, call_id, call_name, status, created_at, reason)
VALUES (?, ?, ?, ?, ?, ?, 'issued', ?, ?)
ON CONFLICT (session_id, key_hash) DO NOTHING`

	sqlGetCompletion = `SELECT ` + completionColumns + ` FROM completions WHERE session_id = ? AND key_hash = ?`

	// sqlLegacyKey finds the session of a key issued before keys were
	// routed (migration 12).
	sqlLegacyKey = `SELECT session_id FROM legacy_keys WHERE key_hash = ?`

	// resolved_at of an early completion records when its payload arrived;
	// the final resolution overwrites it. An approved key takes an early
	// delivery too: its call's deferred tool hands the key out before its
	// pending answer re-parks the call.
	sqlDeliverEarly = `UPDATE completions SET status = 'early', payload = ?3, payload_hash = ?4, resolved_at = ?5
WHERE session_id = ?1 AND key_hash = ?2 AND status IN ('issued', 'approved')
RETURNING ` + completionColumns

	// The heartbeat clock only moves forward and never past the deadline,
	// as in the PostgreSQL store; without a heartbeat clock nothing changes.
	sqlHeartbeat = `UPDATE completions SET heartbeat_deadline = CASE WHEN heartbeat_timeout > 0
    THEN min(coalesce(deadline, ?3 + heartbeat_timeout),
             max(coalesce(heartbeat_deadline, ?3 + heartbeat_timeout), ?3 + heartbeat_timeout))
    ELSE heartbeat_deadline END
WHERE session_id = ?1 AND key_hash = ?2 AND status = 'pending'
RETURNING ` + completionColumns

	sqlDueCompletions = `SELECT ` + completionColumns + ` FROM completions
WHERE status = 'pending' AND ` + dueAt + ` <= ?1
ORDER BY ` + dueAt + `, key_hash
LIMIT ?2`

	// sqlPendingCount is served by the partial index completions_due.
	sqlPendingCount = `SELECT count(*) FROM completions WHERE status = 'pending'`

	sqlTurnCompletions = `SELECT ` + completionColumns + ` FROM completions
WHERE session_id = ? AND turn_id = ?
ORDER BY call_idx, created_at, key_hash`

	sqlGetSetting    = `SELECT value FROM settings WHERE name = ?`
	sqlInsertSetting = `INSERT INTO settings (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING`

	sqlTurnExists = `SELECT 1 FROM turns WHERE session_id = ? AND id = ?`

	sqlCompletionStatus = `SELECT status FROM completions WHERE session_id = ? AND key_hash = ? AND turn_id = ?`

	sqlResolveCompletion = `UPDATE completions SET status = ?3, payload = ?4, payload_hash = ?5, resolved_at = ?6
WHERE session_id = ?1 AND key_hash = ?2`

	// The turn settles when it is waiting and none of its completions is
	// pending or early any more.
	sqlSettle = `UPDATE turns SET status = ?3, settled_at = ?4
WHERE session_id = ?1 AND id = ?2 AND status = 'waiting'
    AND NOT EXISTS (SELECT 1 FROM completions
        WHERE session_id = ?1 AND turn_id = ?2 AND status IN ('pending', 'early', 'approved'))`
)

// IssueCompletion records c's key as issued; see turn.CompletionStore. Only
// the identity fields and CreatedAt are stored: a key takes its deadline and
// options when its call parks. A key of a turn that does not exist is
// turn.ErrNotFound.
func (s *Store) IssueCompletion(ctx context.Context, c turn.Completion) error {
	op := fmt.Sprintf("issuing completion %s of turn %s/%s", sqlstore.Fingerprint(c.KeyHash), c.SessionID, c.TurnID)
	_, err := s.write.ExecContext(ctx, sqlIssueCompletion,
		c.KeyHash[:], c.SessionID, c.TurnID, c.CallIndex, c.CallID, c.CallName, micros(c.CreatedAt), c.Reason)
	return wrap(op, err)
}

// GetCompletion returns the session's completion with that key hash, or
// turn.ErrNotFound; an empty sessionID finds a legacy key's session in
// legacy_keys first.
func (s *Store) GetCompletion(ctx context.Context, sessionID string, keyHash [32]byte) (turn.Completion, error) {
	op := "getting completion " + sqlstore.Fingerprint(keyHash)
	if sessionID == "" {
		if err := s.read.QueryRowContext(ctx, sqlLegacyKey, keyHash[:]).Scan(&sessionID); err != nil {
			return turn.Completion{}, wrap(op, err)
		}
	}
	c, err := scanCompletion(s.read.QueryRowContext(ctx, sqlGetCompletion, sessionID, keyHash[:]))
	if err != nil {
		return turn.Completion{}, wrap(op, err)
	}
	return c, nil
}

// GetDelivery returns the session's completion with that key hash and what
// a delivery needs of its turn; see turn.CompletionStore. The embedded
// store reads the two one after the other: a read costs it no round trip.
func (s *Store) GetDelivery(ctx context.Context, sessionID string, keyHash [32]byte) (turn.DeliveryTarget, error) {
	return turn.ReadDelivery(ctx, s, sessionID, keyHash)
}

// DeliverEarly keeps payload on an issued completion and marks it early;
// see turn.CompletionStore. now is kept as the completion's ResolvedAt (when
// the payload arrived) until the completion is resolved.
func (s *Store) DeliverEarly(ctx context.Context, sessionID string, keyHash [32]byte, payload json.RawMessage, payloadHash [32]byte, now time.Time) (turn.Completion, error) {
	op := "delivering early to completion " + sqlstore.Fingerprint(keyHash)
	p, err := sqlstore.RawJSON("payload", payload)
	if err != nil {
		return turn.Completion{}, fmt.Errorf("%s: %w", op, err)
	}
	return s.conditional(ctx, op, sessionID, keyHash, turn.CompletionIssued, sqlDeliverEarly,
		sessionID, keyHash[:], nullText(p), sqlstore.Hash(payloadHash), nullMicros(now))
}

// Heartbeat extends a pending completion's heartbeat clock; see
// turn.CompletionStore. The clock moves to now + HeartbeatTimeout, capped
// at the Deadline, and never back; a completion without a heartbeat clock
// is returned unchanged.
func (s *Store) Heartbeat(ctx context.Context, sessionID string, keyHash [32]byte, now time.Time) (turn.Completion, error) {
	op := "extending heartbeat of completion " + sqlstore.Fingerprint(keyHash)
	return s.conditional(ctx, op, sessionID, keyHash, turn.CompletionPending, sqlHeartbeat, sessionID, keyHash[:], micros(now))
}

// conditional runs update, which changes the completion only when it is in
// status want and returns it; otherwise it returns the completion as it is
// with turn.ErrCompletionState (or turn.ErrNotFound), read in the same
// transaction.
func (s *Store) conditional(ctx context.Context, op, sessionID string, keyHash [32]byte, want turn.CompletionStatus, update string, args ...any) (turn.Completion, error) {
	var c turn.Completion
	var state error
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		c, err = scanCompletion(tx.QueryRowContext(ctx, update, args...))
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if c, err = scanCompletion(tx.QueryRowContext(ctx, sqlGetCompletion, sessionID, keyHash[:])); err != nil {
			return err
		}
		state = sqlstore.StateError(keyHash, c.Status, want)
		return nil
	})
	if err != nil {
		return turn.Completion{}, wrap(op, err)
	}
	if state != nil {
		return c, fmt.Errorf("%s: %w", op, state)
	}
	return c, nil
}

// DueCompletions returns up to limit pending completions whose deadline or
// heartbeat deadline is at or before now, the earliest first (ties by key
// hash, as in the PostgreSQL store).
func (s *Store) DueCompletions(ctx context.Context, now time.Time, limit int) ([]turn.Completion, error) {
	if limit <= 0 {
		return []turn.Completion{}, nil
	}
	return queryAll(ctx, s.read, "reading due completions", collectCompletions, sqlDueCompletions, micros(now), limit)
}

// PendingCount returns how many calls are parked on a completion key, in
// the whole database: every replica's.
func (s *Store) PendingCount(ctx context.Context) (int64, error) {
	var n int64
	if err := s.read.QueryRowContext(ctx, sqlPendingCount).Scan(&n); err != nil {
		return 0, wrap("counting pending completions", err)
	}
	return n, nil
}

// TurnCompletions returns the completions of a turn in call order (none for
// an unknown turn).
func (s *Store) TurnCompletions(ctx context.Context, k turn.TurnKey) ([]turn.Completion, error) {
	op := fmt.Sprintf("reading completions of turn %s/%s", k.SessionID, k.TurnID)
	return queryAll(ctx, s.read, op, collectCompletions, sqlTurnCompletions, k.SessionID, k.TurnID)
}

// Secret returns the completion secret, storing generate's first; see
// turn.CompletionStore. Callers racing on a new file each may generate one:
// the insert keeps the first and every caller reads that back.
func (s *Store) Secret(ctx context.Context, generate func() (string, error)) (string, error) {
	get := func() (string, error) {
		var v string
		err := s.read.QueryRowContext(ctx, sqlGetSetting, sqlstore.SecretName).Scan(&v)
		return v, wrap("reading completion secret", err)
	}
	insert := func(v string) error {
		_, err := s.write.ExecContext(ctx, sqlInsertSetting, sqlstore.SecretName, v)
		return wrap("storing completion secret", err)
	}
	return sqlstore.Secret(get, insert, generate)
}

// RecordLate's statements: the completion's late payload hashes (of the
// key of turn k), their update with one more, the count of one dropped.
const (
	sqlLateHashes = `SELECT late_hashes FROM completions WHERE session_id = ? AND key_hash = ? AND turn_id = ?`
	sqlAddLate    = `UPDATE completions SET late_hashes = ? WHERE session_id = ? AND key_hash = ?`
	sqlDropLate   = `UPDATE completions SET late_dropped = late_dropped + 1 WHERE session_id = ? AND key_hash = ?`
)

// RecordLate records a late delivery at most once per payload hash and at
// most l.Max times per key, in one write transaction (which serialises
// concurrent deliveries); see turn.CompletionStore.
func (s *Store) RecordLate(ctx context.Context, k turn.TurnKey, l turn.Late) (turn.LateOutcome, error) {
	op := fmt.Sprintf("recording a late completion of turn %s/%s", k.SessionID, k.TurnID)
	if err := sqlstore.CheckLate(k, l); err != nil {
		return "", fmt.Errorf("%s: %w", op, err)
	}
	w, err := encodeWrites(k, []turn.Line{l.Line}, nil, l.Outputs)
	if err != nil {
		return "", fmt.Errorf("%s: %w", op, err)
	}
	var outcome turn.LateOutcome
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		var hashes []byte
		if err := tx.QueryRowContext(ctx, sqlLateHashes, k.SessionID, l.KeyHash[:], k.TurnID).Scan(&hashes); err != nil {
			return err // sql.ErrNoRows: wrap makes it turn.ErrNotFound
		}
		outcome = sqlstore.LateDecision(hashes, l)
		switch outcome {
		case turn.LateRepeated:
			return nil
		case turn.LateDropped:
			_, err := tx.ExecContext(ctx, sqlDropLate, k.SessionID, l.KeyHash[:])
			return err
		}
		if _, err := tx.ExecContext(ctx, sqlAddLate, append(hashes, l.PayloadHash[:]...), k.SessionID, l.KeyHash[:]); err != nil {
			return err
		}
		return w.apply(ctx, tx)
	})
	if err != nil {
		return "", wrap(op, err)
	}
	return outcome, nil
}

// Resolve applies b in one transaction; see turn.CompletionStore. BEGIN
// IMMEDIATE (and the store's single write connection) serialises it with
// every other write, so the statuses it checks cannot change before it
// writes, and the count of the turn's open completions sees every
// resolution before it. A key that is not a completion of b's turn, or a
// turn that does not exist, is turn.ErrNotFound; a completion not in its
// item's Expect status is turn.ErrCompletionState, naming the completion
// and its status. Either way nothing is written.
func (s *Store) Resolve(ctx context.Context, b turn.ResolveBatch) (bool, error) {
	op := fmt.Sprintf("resolving completions of turn %s/%s", b.Key.SessionID, b.Key.TurnID)
	if err := sqlstore.CheckResolve(b); err != nil {
		return false, fmt.Errorf("%s: %w", op, err)
	}
	r, err := encodeResolve(b)
	if err != nil {
		return false, fmt.Errorf("%s: %w", op, err)
	}
	settled := false
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		if err := checkResolvable(ctx, tx, b); err != nil {
			return err
		}
		if err := r.resolve(ctx, tx, b); err != nil {
			return err
		}
		var err error
		settled, err = r.settle(ctx, tx, b)
		return err
	})
	if err != nil {
		return false, wrap(op, err)
	}
	return settled, nil
}

// resolved is a ResolveBatch encoded for its statements: the completions'
// payloads, the writes, and what settling the turn adds.
type resolved struct {
	payloads    []any
	writes      writes
	settleLines lines
	hook        webhook
	settledAt   any // as in Commit: only a settled status has a settled_at
}

// encodeResolve encodes b's payloads, writes and settle rows; an error
// names what could not be encoded.
func encodeResolve(b turn.ResolveBatch) (resolved, error) {
	var r resolved
	r.payloads = make([]any, len(b.Items))
	for i, it := range b.Items {
		p, err := sqlstore.PayloadJSON(it.KeyHash, it.Payload)
		if err != nil {
			return resolved{}, err
		}
		r.payloads[i] = nullText(p)
	}
	results, outputs := sqlstore.ResolveWrites(b)
	var err error
	if r.writes, err = encodeWrites(b.Key, b.Lines, results, outputs); err != nil {
		return resolved{}, err
	}
	if r.settleLines, err = encodeLines(b.Key, b.SettleLines); err != nil {
		return resolved{}, fmt.Errorf("settle %w", err)
	}
	if r.hook, err = encodeWebhook(b.Key, b.SettleWebhook); err != nil {
		return resolved{}, fmt.Errorf("settle %w", err)
	}
	if b.SettleStatus.Settled() {
		r.settledAt = micros(b.Now)
	}
	return r, nil
}

// checkResolvable checks, in tx, that b's turn exists and that each of
// its completions has the status b expects.
func checkResolvable(ctx context.Context, tx *sql.Tx, b turn.ResolveBatch) error {
	var one int
	if err := tx.QueryRowContext(ctx, sqlTurnExists, b.Key.SessionID, b.Key.TurnID).Scan(&one); err != nil {
		return err // sql.ErrNoRows: wrap makes it turn.ErrNotFound
	}
	statuses := make(map[[32]byte]turn.CompletionStatus, len(b.Items))
	for _, it := range b.Items {
		var st string
		err := tx.QueryRowContext(ctx, sqlCompletionStatus, b.Key.SessionID, it.KeyHash[:], b.Key.TurnID).Scan(&st)
		if errors.Is(err, sql.ErrNoRows) {
			continue // not a completion of this turn: CheckExpected says so
		}
		if err != nil {
			return err
		}
		statuses[it.KeyHash] = turn.CompletionStatus(st)
	}
	return sqlstore.CheckExpected(b.Items, statuses)
}

// resolve records, in tx, each completion's status and payload, and the
// turn's writes.
func (r resolved) resolve(ctx context.Context, tx *sql.Tx, b turn.ResolveBatch) error {
	for i, it := range b.Items {
		if _, err := tx.ExecContext(ctx, sqlResolveCompletion, b.Key.SessionID, it.KeyHash[:], string(it.Status),
			r.payloads[i], sqlstore.Hash(it.PayloadHash), micros(b.Now)); err != nil {
			return err
		}
	}
	return r.writes.apply(ctx, tx)
}

// settle moves, in tx, the turn to b.SettleStatus with its settle lines
// and webhook, and says whether it did: false where the turn was no longer
// running.
func (r resolved) settle(ctx context.Context, tx *sql.Tx, b turn.ResolveBatch) (bool, error) {
	res, err := tx.ExecContext(ctx, sqlSettle, b.Key.SessionID, b.Key.TurnID, string(b.SettleStatus), r.settledAt)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	if err != nil || n == 0 {
		return false, err
	}
	if err := r.settleLines.append(ctx, tx); err != nil {
		return true, err
	}
	return true, r.hook.insert(ctx, tx, b.Key)
}

// queryAll runs query on q and reads its rows with collect, which closes
// them; an error of either is wrapped with op.
func queryAll[T any](ctx context.Context, q querier, op string, collect func(*sql.Rows) ([]T, error), query string, args ...any) ([]T, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	return sqlstore.Collect(op, rows, err, collect, kind)
}

// scanner is a *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

// scanCompletion scans one row of completionColumns.
func scanCompletion(row scanner) (turn.Completion, error) {
	var (
		r                                  sqlstore.CompletionRow
		created                            int64
		deadline, hbDeadline, resolvedTime sql.NullInt64
	)
	if err := row.Scan(r.Dest(&deadline, &hbDeadline, &created, &resolvedTime)...); err != nil {
		return turn.Completion{}, err
	}
	c, err := r.Completion()
	if err != nil {
		return turn.Completion{}, err
	}
	c.Deadline, c.HeartbeatDeadline = fromNullMicros(deadline), fromNullMicros(hbDeadline)
	c.CreatedAt, c.ResolvedAt = fromMicros(created), fromNullMicros(resolvedTime)
	return c, nil
}

// collectCompletions reads rows of completionColumns and closes rows.
var collectCompletions = collectRows(scanCompletion)

// collectRows returns a function that reads rows, a value a row with
// scan, and closes rows; the first error ends it.
func collectRows[T any](scan func(scanner) (T, error)) func(*sql.Rows) ([]T, error) {
	return func(rows *sql.Rows) ([]T, error) {
		defer rows.Close()
		out := []T{}
		for rows.Next() {
			v, err := scan(rows)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		if err := rows.Err(); err != nil {
			return nil, err
		}
		return out, nil
	}
}
