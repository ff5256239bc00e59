package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/turnd/turnd/dispatch"
	"github.com/turnd/turnd/store/internal/sqlstore"
	"github.com/turnd/turnd/turn"
)

// completionColumns are the columns completionRow scans, in order.
const completionColumns = sqlstore.CompletionColumns

const (
	// A key already recorded is left as it is: issuing is idempotent. The
	// turn's foreign key makes a key of an unknown turn turn.ErrNotFound.
	sqlIssueCompletion = `INSERT INTO completions (key_hash, session_id, turn_id, call_idx, call_id, call_name, status, created_at, reason)
VALUES ($1, $2, $3, $4, $5, $6, 'issued', $7, $8)
ON CONFLICT (session_id, key_hash) DO NOTHING`

	sqlGetCompletion = `SELECT ` + completionColumns + ` FROM completions WHERE session_id = $1 AND key_hash = $2`

	// sqlGetDelivery reads a completion with what a delivery needs of its
	// turn: when it was created, its number of calls, and the call's
	// result row (NULLs when it has none; its output and error are not
	// read, see turn.DeliveryTarget).
	sqlGetDelivery = `SELECT c.*, t.created_at, json_array_length(t.calls),
    r.idx IS NOT NULL, r.name, r.effect, r.status, r.attempts, r.started_at, r.finished_at, r.replayed_from
FROM (` + sqlGetCompletion + `) c
JOIN turns t ON t.session_id = $1 AND t.id = c.turn_id
LEFT JOIN results r ON r.session_id = $1 AND r.call_id = c.call_id AND r.turn_id = c.turn_id AND r.idx = c.call_idx`

	// sqlLegacyKey finds the session of a key issued before keys were
	// routed (migration 12); on Citus legacy_keys is a reference table,
	// read on the node that asks.
	sqlLegacyKey = `SELECT session_id FROM legacy_keys WHERE key_hash = $1`

	// resolved_at of an early completion records when its payload arrived;
	// the final resolution overwrites it. An approved key takes an early
	// delivery too: its call's deferred tool hands the key out before its
	// pending answer re-parks the call.
	sqlDeliverEarly = `UPDATE completions SET status = 'early', payload = $3::json, payload_hash = $4, resolved_at = $5
WHERE session_id = $1 AND key_hash = $2 AND status IN ('issued', 'approved')
RETURNING ` + completionColumns

	// The heartbeat clock only moves forward (a replica with a lagging
	// clock does not shorten it) and never past the deadline; LEAST and
	// GREATEST ignore NULLs. Without a heartbeat clock nothing changes.
	sqlHeartbeat = `UPDATE completions SET heartbeat_deadline = CASE WHEN heartbeat_timeout > 0
    THEN LEAST(deadline, GREATEST(heartbeat_deadline, $3::timestamptz + heartbeat_timeout * interval '1 microsecond'))
    ELSE heartbeat_deadline END
WHERE session_id = $1 AND key_hash = $2 AND status = 'pending'
RETURNING ` + completionColumns

	// The condition and order use the expression of the completions_due
	// index: LEAST(deadline, heartbeat_deadline) <= now is "either clock
	// ran out". Ties resolve by key hash, the same way in both stores.
	sqlDueCompletions = `SELECT ` + completionColumns + ` FROM completions
WHERE status = 'pending' AND LEAST(deadline, heartbeat_deadline) <= $1
ORDER BY LEAST(deadline, heartbeat_deadline), key_hash
LIMIT $2`

	// sqlPendingCount is served by the partial index completions_due.
	sqlPendingCount = `SELECT count(*) FROM completions WHERE status = 'pending'`

	sqlTurnCompletions = `SELECT ` + completionColumns + ` FROM completions
WHERE session_id = $1 AND turn_id = $2
ORDER BY call_idx, created_at, key_hash`

	sqlGetSetting    = `SELECT value FROM settings WHERE name = $1`
	sqlInsertSetting = `INSERT INTO settings (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING`
)

// IssueCompletion records c's key as issued; see turn.CompletionStore. Only
// the identity fields and CreatedAt are stored: a key takes its deadline and
// options when its call parks. A key of a turn that does not exist is
// turn.ErrNotFound.
func (s *Store) IssueCompletion(ctx context.Context, c turn.Completion) error {
	op := fmt.Sprintf("issuing completion %s of turn %s/%s", sqlstore.Fingerprint(c.KeyHash), c.SessionID, c.TurnID)
	_, err := s.pool.Exec(ctx, sqlIssueCompletion,
		c.KeyHash[:], c.SessionID, c.TurnID, int32(c.CallIndex), c.CallID, c.CallName, c.CreatedAt, c.Reason)
	return wrap(op, err)
}

// GetCompletion returns the session's completion with that key hash, or
// turn.ErrNotFound; an empty sessionID finds a legacy key's session in
// legacy_keys first.
func (s *Store) GetCompletion(ctx context.Context, sessionID string, keyHash [32]byte) (turn.Completion, error) {
	op := "getting completion " + sqlstore.Fingerprint(keyHash)
	sessionID, err := s.keySession(ctx, sessionID, keyHash)
	if err != nil {
		return turn.Completion{}, wrap(op, err)
	}
	c, err := scanCompletion(s.pool.QueryRow(ctx, sqlGetCompletion, sessionID, keyHash[:]))
	if err != nil {
		return turn.Completion{}, wrap(op, err)
	}
	return c, nil
}

// GetDelivery returns the session's completion with that key hash and what
// a delivery needs of its turn, in one statement; see turn.CompletionStore.
func (s *Store) GetDelivery(ctx context.Context, sessionID string, keyHash [32]byte) (turn.DeliveryTarget, error) {
	op := "getting completion " + sqlstore.Fingerprint(keyHash)
	sessionID, err := s.keySession(ctx, sessionID, keyHash)
	if err != nil {
		return turn.DeliveryTarget{}, wrap(op, err)
	}
	var (
		r                              completionRow
		created                        pgtype.Timestamptz
		calls                          int32
		name, effect, status, replayed pgtype.Text
		attempts                       pgtype.Int4
		started, finished              pgtype.Timestamptz
		d                              turn.DeliveryTarget
	)
	err = s.pool.QueryRow(ctx, sqlGetDelivery, sessionID, keyHash[:]).Scan(append(r.dest(),
		&created, &calls, &d.Recorded, &name, &effect, &status, &attempts, &started, &finished, &replayed)...)
	if err == nil {
		d.Completion, err = r.completion()
	}
	if err != nil {
		return turn.DeliveryTarget{}, wrap(op, err)
	}
	d.Calls, d.TurnCreatedAt = int(calls), fromNullTime(created)
	if d.Recorded {
		c := d.Completion
		d.Result = turn.Result{Index: c.CallIndex, CallID: c.CallID, Name: name.String, Effect: dispatch.Effect(effect.String),
			Status: turn.CallStatus(status.String), ReplayedFrom: replayed.String, Attempts: int(attempts.Int32),
			StartedAt: fromNullTime(started), FinishedAt: fromNullTime(finished)}
	}
	return d, nil
}

// keySession is sessionID, or for "" (a legacy key's lookup) the session
// legacy_keys maps keyHash to.
func (s *Store) keySession(ctx context.Context, sessionID string, keyHash [32]byte) (string, error) {
	if sessionID != "" {
		return sessionID, nil
	}
	err := s.pool.QueryRow(ctx, sqlLegacyKey, keyHash[:]).Scan(&sessionID)
	return sessionID, err
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
	c, err := scanCompletion(s.pool.QueryRow(ctx, sqlDeliverEarly, sessionID, keyHash[:], nullText(p), sqlstore.Hash(payloadHash), nullTime(now)))
	if errors.Is(err, pgx.ErrNoRows) {
		return s.stateError(ctx, op, sessionID, keyHash, turn.CompletionIssued)
	}
	if err != nil {
		return turn.Completion{}, wrap(op, err)
	}
	return c, nil
}

// Heartbeat extends a pending completion's heartbeat clock; see
// turn.CompletionStore. The clock moves to now + HeartbeatTimeout, capped
// at the Deadline, and never back; a completion without a heartbeat clock
// is returned unchanged.
func (s *Store) Heartbeat(ctx context.Context, sessionID string, keyHash [32]byte, now time.Time) (turn.Completion, error) {
	op := "extending heartbeat of completion " + sqlstore.Fingerprint(keyHash)
	c, err := scanCompletion(s.pool.QueryRow(ctx, sqlHeartbeat, sessionID, keyHash[:], now))
	if errors.Is(err, pgx.ErrNoRows) {
		return s.stateError(ctx, op, sessionID, keyHash, turn.CompletionPending)
	}
	if err != nil {
		return turn.Completion{}, wrap(op, err)
	}
	return c, nil
}

// stateError is the answer of a conditional update that matched no row: the
// completion as it is now with turn.ErrCompletionState, or turn.ErrNotFound.
func (s *Store) stateError(ctx context.Context, op, sessionID string, keyHash [32]byte, want turn.CompletionStatus) (turn.Completion, error) {
	c, err := scanCompletion(s.pool.QueryRow(ctx, sqlGetCompletion, sessionID, keyHash[:]))
	if err != nil {
		return turn.Completion{}, wrap(op, err)
	}
	return c, fmt.Errorf("%s: %w", op, sqlstore.StateError(keyHash, c.Status, want))
}

// DueCompletions returns up to limit pending completions whose deadline or
// heartbeat deadline is at or before now, the earliest first.
func (s *Store) DueCompletions(ctx context.Context, now time.Time, limit int) ([]turn.Completion, error) {
	if limit <= 0 {
		return []turn.Completion{}, nil
	}
	return queryAll(ctx, s.pool, "reading due completions", collectCompletions, sqlDueCompletions, now, limit)
}

// PendingCount returns how many calls are parked on a completion key, in
// the whole database: every replica's.
func (s *Store) PendingCount(ctx context.Context) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, sqlPendingCount).Scan(&n); err != nil {
		return 0, wrap("counting pending completions", err)
	}
	return n, nil
}

// TurnCompletions returns the completions of a turn in call order (none for
// an unknown turn).
func (s *Store) TurnCompletions(ctx context.Context, k turn.TurnKey) ([]turn.Completion, error) {
	op := fmt.Sprintf("reading completions of turn %s/%s", k.SessionID, k.TurnID)
	return queryAll(ctx, s.pool, op, collectCompletions, sqlTurnCompletions, k.SessionID, k.TurnID)
}

// Secret returns the completion secret, storing generate's first; see
// turn.CompletionStore. Replicas starting together may each generate one:
// the insert keeps the first committed and every replica reads that back.
func (s *Store) Secret(ctx context.Context, generate func() (string, error)) (string, error) {
	get := func() (string, error) {
		var v string
		err := s.pool.QueryRow(ctx, sqlGetSetting, sqlstore.SecretName).Scan(&v)
		return v, wrap("reading completion secret", err)
	}
	insert := func(v string) error {
		_, err := s.pool.Exec(ctx, sqlInsertSetting, sqlstore.SecretName, v)
		return wrap("storing completion secret", err)
	}
	return sqlstore.Secret(get, insert, generate)
}

// RecordLate's statements. The completion's row is locked first (FOR
// UPDATE), so that concurrent late deliveries to one key decide one after
// another on the hashes it keeps; the recording statement's gate is the
// update that adds the payload's hash, and its lines take their seq from
// last_seq as in Commit. A completion's row implies its turn's (the
// foreign key), so the gate stands for the turn's existence too.
const (
	sqlLockLate = `SELECT late_hashes FROM completions
WHERE session_id = $1 AND key_hash = $2 AND turn_id = $3 FOR UPDATE`

	sqlDropLate = `UPDATE completions SET late_dropped = late_dropped + 1 WHERE session_id = $1 AND key_hash = $2`

	recordLateHead = `WITH gate AS (
    UPDATE completions SET late_hashes = late_hashes || @hash::bytea
    WHERE session_id = @session AND key_hash = @key
    RETURNING 1
)`
)

// recordLateSQL holds the recording statement without and with its
// outputs (bit 0).
var recordLateSQL = writeVariants(recordLateHead+writeLines, commitEnd, writeOutputs)

// lateArgs encodes l written under k as recordLateSQL's parameters.
func lateArgs(k turn.TurnKey, l turn.Late) (lateParams, error) {
	p := lateParams{key: k, keyHash: l.KeyHash[:], hash: l.PayloadHash[:]}
	if err := p.lines.set(k, []turn.Line{l.Line}); err != nil {
		return lateParams{}, err
	}
	p.outputs.set(k, l.Outputs)
	return p, nil
}

// resolveTx is READ COMMITTED whatever the server's default: each statement
// then sees what the writers it queued behind committed (RecordLate's and
// Approve's; Resolve's pipeline begins with sqlBeginResolve, the same
// level).
var resolveTx = pgx.TxOptions{IsoLevel: pgx.ReadCommitted}

// RecordLate records a late delivery at most once per payload hash and at
// most l.Max times per key; see turn.CompletionStore.
func (s *Store) RecordLate(ctx context.Context, k turn.TurnKey, l turn.Late) (turn.LateOutcome, error) {
	op := fmt.Sprintf("recording a late completion of turn %s/%s", k.SessionID, k.TurnID)
	if err := sqlstore.CheckLate(k, l); err != nil {
		return "", fmt.Errorf("%s: %w", op, err)
	}
	args, err := lateArgs(k, l)
	if err != nil {
		return "", fmt.Errorf("%s: %w", op, err)
	}
	var outcome turn.LateOutcome
	err = pgx.BeginTxFunc(ctx, s.pool, resolveTx, func(tx pgx.Tx) error {
		var hashes []byte
		if err := tx.QueryRow(ctx, sqlLockLate, k.SessionID, l.KeyHash[:], k.TurnID).Scan(&hashes); err != nil {
			return err
		}
		outcome = sqlstore.LateDecision(hashes, l)
		switch outcome {
		case turn.LateRepeated:
			return nil
		case turn.LateDropped:
			_, err := tx.Exec(ctx, sqlDropLate, k.SessionID, l.KeyHash[:])
			return err
		}
		var found bool
		if err := tx.QueryRow(ctx, recordLateSQL[args.variant()].sql, args.args()...).Scan(&found); err != nil {
			return err
		}
		if !found {
			return pgx.ErrNoRows
		}
		return nil
	})
	if err != nil {
		return "", wrap(op, err)
	}
	return outcome, nil
}

// Resolve's statements: one transaction, sent as one pipeline (one round
// trip), that locks the turn and then the batch's completions, and then, in
// a statement of its own that sees what the resolvers it queued behind
// committed, checks every item's status, writes the resolutions and settles
// the turn when nothing of it is pending. See ARCHITECTURE.md,
// "store/postgres: statements", Resolve.
const (
	sqlBeginResolve = `begin isolation level read committed`
	sqlCommit       = `commit`

	// sqlLockResolve locks the turn's row, then (the lateral subquery runs
	// for the row locked) the batch's completions in key order; it
	// returns no row for an unknown turn, one row of NULL completion
	// columns when none of the keys is the turn's (or there are none).
	sqlLockResolve = `SELECT c.key_hash, c.status
FROM (SELECT status FROM turns WHERE session_id = $2 AND id = $3 FOR NO KEY UPDATE) t
LEFT JOIN LATERAL (
    SELECT key_hash, status FROM completions
    WHERE session_id = $2 AND key_hash = ANY($1::bytea[]) AND turn_id = $3
    ORDER BY key_hash
    FOR UPDATE
) c ON true`

	// The gate passes when the turn exists and every item's completion
	// (locked by sqlLockResolve) is in its expected status; the settle
	// counts as pending no completion this statement resolves, whose
	// updates it cannot see. The items' lines take their seqs first, the
	// settling lines (when it settles) after them, in one ledger batch.
	resolveHead = `WITH items AS (
    SELECT * FROM unnest(@c_key::bytea[], @c_expect::text[], @c_status::text[], @c_payload::text[], @c_hash::bytea[])
        AS r (key_hash, expect, status, payload, payload_hash)
), gate AS (
    SELECT FROM turns
    WHERE session_id = @session AND id = @turn
        AND (SELECT count(*) FROM completions c JOIN items r ON c.key_hash = r.key_hash AND c.status = r.expect
            WHERE c.session_id = @session AND c.turn_id = @turn) = cardinality(@c_key::bytea[])
), done AS (
    UPDATE completions c SET status = r.status, payload = r.payload::json, payload_hash = r.payload_hash, resolved_at = @now
    FROM items r
    WHERE c.key_hash = r.key_hash AND c.session_id = @session AND c.turn_id = @turn AND EXISTS (SELECT FROM gate)
    RETURNING 1
), settle AS (
    UPDATE turns SET status = @status, settled_at = @settled
    WHERE session_id = @session AND id = @turn AND status = 'waiting' AND EXISTS (SELECT FROM gate)
        AND NOT EXISTS (SELECT FROM completions
            WHERE session_id = @session AND turn_id = @turn AND status IN ('pending', 'early', 'approved')
                AND key_hash <> ALL (@c_key::bytea[]))
    RETURNING 1
), seq AS (
    UPDATE sessions SET last_seq = last_seq + CASE WHEN EXISTS (SELECT FROM settle) THEN @n_all::bigint ELSE @n::bigint END
    WHERE id = @session AND EXISTS (SELECT FROM gate)
        AND CASE WHEN EXISTS (SELECT FROM settle) THEN @n_all::bigint ELSE @n::bigint END > 0
    RETURNING last_seq
), lines AS (
    INSERT INTO ledger_batches (session_id, turn_id, last_seq, first_seq, lines)
    SELECT @session, @turn, seq.last_seq,
        seq.last_seq - CASE WHEN EXISTS (SELECT FROM settle) THEN @n_all::bigint ELSE @n::bigint END + 1,
        CASE WHEN EXISTS (SELECT FROM settle) THEN @l_all::json ELSE @l_lines::json END
    FROM seq
)`
	resolveEnd = `
SELECT EXISTS (SELECT FROM gate), EXISTS (SELECT FROM settle)`
)

// resolveWebhook inserts the settling webhook when the statement settles
// the turn: writeWebhook, gated by settle.
var resolveWebhook = webhookFragment("settle")

// resolveSQL holds the resolving statement's variants, indexed by its
// parts: results, outputs, webhook.
var resolveSQL = writeVariants(resolveHead, resolveEnd, writeResults, writeOutputs, resolveWebhook)

// The resolving statement's parts (bits of its variant index).
const (
	resolveResults = 1 << iota
	resolveOutputs
	resolveHook
)

// queryAll runs query on q and reads its rows with collect, which closes
// them; an error of either is wrapped with op.
func queryAll[T any](ctx context.Context, q *pgxpool.Pool, op string, collect func(pgx.Rows) ([]T, error), query string, args ...any) ([]T, error) {
	rows, err := q.Query(ctx, query, args...)
	return sqlstore.Collect(op, rows, err, collect, kind)
}

// scanCompletion scans one row of completionColumns.
func scanCompletion(row pgx.Row) (turn.Completion, error) {
	var r completionRow
	if err := row.Scan(r.dest()...); err != nil {
		return turn.Completion{}, err
	}
	return r.completion()
}

// collectCompletions reads rows of completionColumns and closes rows.
func collectCompletions(rows pgx.Rows) ([]turn.Completion, error) {
	var r completionRow
	return forEach(rows, r.dest(), r.completion)
}

// forEach reads rows into dest, one value a row from row (which reads dest),
// and closes rows; the first error ends it.
func forEach[T any](rows pgx.Rows, dest []any, row func() (T, error)) ([]T, error) {
	out := []T{}
	_, err := pgx.ForEachRow(rows, dest, func() error {
		v, err := row()
		if err != nil {
			return err
		}
		out = append(out, v)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// completionRow scans completionColumns.
type completionRow struct {
	sqlstore.CompletionRow
	deadline, hbDeadline, created, resolved pgtype.Timestamptz
}

func (r *completionRow) dest() []any {
	return r.Dest(&r.deadline, &r.hbDeadline, &r.created, &r.resolved)
}

func (r *completionRow) completion() (turn.Completion, error) {
	c, err := r.Completion()
	if err != nil {
		return turn.Completion{}, err
	}
	c.Deadline, c.HeartbeatDeadline = fromNullTime(r.deadline), fromNullTime(r.hbDeadline)
	c.CreatedAt, c.ResolvedAt = fromNullTime(r.created), fromNullTime(r.resolved)
	return c, nil
}
