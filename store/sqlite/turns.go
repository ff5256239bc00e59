package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/turnd/turnd/dispatch"
	"github.com/turnd/turnd/store/internal/sqlstore"
	"github.com/turnd/turnd/turn"
)

const (
	// The session upsert creates the session with last_seq 1 (the
	// turn_received line is its first) or bumps the existing last_seq, and
	// returns the session as stored with the line's seq.
	sqlUpsertSession = `INSERT INTO sessions (id, tools, budget, callback_url, metadata, created_at, last_seq)
VALUES (?, ?, ?, ?, ?, ?, 1)
ON CONFLICT (id) DO UPDATE SET last_seq = last_seq + 1
RETURNING tools, budget, callback_url, metadata, created_at, last_seq`

	sqlInsertTurn = `INSERT INTO turns (session_id, id, status, mode, failure_policy, calls, hash, created_at, settled_at, lease_owner, lease_until)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (session_id, id) DO NOTHING`

	// A write's lines are one row (see sqlstore.LinesJSON), all of turn ?2:
	// ?3 is the seq of the last line, ?4 of the first.
	sqlInsertLines = `INSERT INTO ledger_batches (session_id, turn_id, last_seq, first_seq, lines)
VALUES (?, ?, ?, ?, ?)`
)

// ReceiveTurn records r in one transaction; see turn.Store. The session
// upsert runs first (the turn's foreign key needs the session); when the turn
// turns out to exist, the transaction is rolled back, undoing it, and the
// recorded turn is read. ReceiveResult.Session is then left zero.
func (s *Store) ReceiveTurn(ctx context.Context, r turn.Receive) (turn.ReceiveResult, error) {
	rc, err := sqlstore.ReceiveColumns(&r)
	if err != nil {
		return turn.ReceiveResult{}, err
	}
	op, calls, line := rc.Op, rc.Calls, rc.Line
	sessArgs := sessionColumnArgs(r.Session, rc.Session)
	t := r.Turn

	var res turn.ReceiveResult
	exists := false
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		var row sessionRow
		if err := tx.QueryRowContext(ctx, sqlUpsertSession, sessArgs...).Scan(append(row.dest(), &res.Seq)...); err != nil {
			return err
		}
		ins, err := tx.ExecContext(ctx, sqlInsertTurn,
			t.SessionID, t.ID, string(t.Status), string(t.Mode), string(t.FailurePolicy), string(calls), t.Hash,
			micros(t.CreatedAt), nullMicros(t.SettledAt), r.LeaseOwner, nullMicros(r.LeaseUntil))
		if err != nil {
			return err
		}
		if n, err := ins.RowsAffected(); err != nil || n == 0 {
			exists = err == nil
			return errRollback
		}
		if _, err := tx.ExecContext(ctx, sqlInsertLines, t.SessionID, t.ID, res.Seq, res.Seq, string(line)); err != nil {
			return err
		}
		res.Session, err = row.session(t.SessionID)
		return err
	})
	if exists {
		return sqlstore.TurnExists(op, func() (turn.Turn, error) {
			return s.GetTurn(ctx, turn.TurnKey{SessionID: t.SessionID, TurnID: t.ID})
		})
	}
	if err != nil {
		return turn.ReceiveResult{}, wrap(op, err)
	}
	return res, nil
}

// errRollback makes inTx roll back without it being a failure of its own.
var errRollback = errors.New("roll back")

// inTx runs fn in a write transaction (BEGIN IMMEDIATE), committing when fn
// returns nil.
func (s *Store) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		if rerr := tx.Rollback(); rerr != nil && !errors.Is(rerr, sql.ErrTxDone) {
			return errors.Join(err, rerr)
		}
		return err
	}
	return tx.Commit()
}

const (
	sqlLease = `UPDATE turns SET
    lease_owner = CASE WHEN ?4 THEN NULL ELSE lease_owner END,
    lease_until = CASE WHEN ?4 THEN NULL ELSE COALESCE(?5, lease_until) END,
    status      = CASE WHEN ?6 = '' THEN status ELSE ?6 END,
    settled_at  = CASE WHEN ?6 = '' THEN settled_at ELSE ?7 END
WHERE session_id = ?1 AND id = ?2 AND lease_owner = ?3 AND resumes = ?8`

	sqlAllocSeqs = `UPDATE sessions SET last_seq = last_seq + ? WHERE id = ? RETURNING last_seq`

	sqlUpsertResult = `INSERT INTO results (session_id, turn_id, idx, call_id, name, effect, status, output,
    error_code, error_message, truncated, original_bytes, original_lines, output_id,
    attempts, started_at, finished_at, replayed_from)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (session_id, turn_id, idx) DO UPDATE SET
    call_id = excluded.call_id, name = excluded.name, effect = excluded.effect,
    status = excluded.status, output = excluded.output, error_code = excluded.error_code,
    error_message = excluded.error_message, truncated = excluded.truncated,
    original_bytes = excluded.original_bytes, original_lines = excluded.original_lines,
    output_id = excluded.output_id, attempts = excluded.attempts,
    started_at = excluded.started_at, finished_at = excluded.finished_at,
    replayed_from = excluded.replayed_from`

	sqlInsertOutput = `INSERT INTO outputs (id, session_id, turn_id, call_id, content_type, data, created_at, expires_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)`
)

// sqlPark: an issued completion of this turn becomes pending; an early one
// stays early (its payload waits to be applied) but takes the deadline and
// options too. Pending and resolved completions are left as they are: a
// park never resets a running clock nor reopens a key. An approved call
// whose tool parks it takes a new park, for its tool's work: pending, with
// no reason.
const sqlPark = `UPDATE completions SET
    status             = CASE WHEN status IN ('issued', 'approved') THEN 'pending' ELSE status END,
    reason             = CASE WHEN status = 'approved' THEN '' ELSE reason END,
    deadline           = ?4,
    heartbeat_timeout  = ?5,
    heartbeat_deadline = ?6,
    on_timeout         = ?7,
    on_cancel          = ?8,
    cancel_url         = ?9
WHERE key_hash = ?1 AND session_id = ?2 AND turn_id = ?3 AND status IN ('issued', 'early', 'approved')`

// Commit applies c in one transaction; see turn.Commit. The lease check
// comes first: when it fails, the transaction is rolled back before anything
// else is written. Results with the same Index collapse to the last of them;
// a zero LeaseUntil keeps the lease's current expiry. Parks of keys that are
// not this turn's are ignored.
func (s *Store) Commit(ctx context.Context, c turn.Commit) error {
	op := fmt.Sprintf("committing turn %s/%s", c.Key.SessionID, c.Key.TurnID)
	if err := sqlstore.CheckCommit(c); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	// Encode everything before taking the write lock.
	w, err := encodeWrites(c.Key, c.Lines, c.Results, c.Outputs)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	hook, err := encodeWebhook(c.Key, c.Webhook)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	release := c.Status != "" && sqlstore.ReleasesLease(c.Status)
	until := nullMicros(c.LeaseUntil) // NULL (zero) keeps the current expiry
	settled := nullMicros(c.SettledAt)
	if c.Status != "" && !c.Status.Settled() {
		settled = nil // an unsettled status clears settled_at
	}

	lost := false
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, sqlLease, c.Key.SessionID, c.Key.TurnID, c.LeaseOwner, release, until, string(c.Status), settled, c.LeaseEpoch)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			lost = err == nil
			return errRollback
		}
		if err := w.apply(ctx, tx); err != nil {
			return err
		}
		for _, p := range c.Parks {
			if _, err := tx.ExecContext(ctx, sqlPark, p.KeyHash[:], c.Key.SessionID, c.Key.TurnID,
				nullMicros(p.Deadline), sqlstore.Micros(p.HeartbeatTimeout), nullMicros(p.HeartbeatDeadline),
				p.OnTimeout, p.OnCancel, p.CancelURL); err != nil {
				return err
			}
		}
		return hook.insert(ctx, tx, c.Key)
	})
	if lost {
		return fmt.Errorf("%s: %w", op, turn.ErrLeaseLost)
	}
	return wrap(op, err)
}

// writes is the encoded part of a write that Commit and Resolve share: lines
// (seqs from sessions.last_seq), result upserts and outputs, all under one
// turn key. Encoding happens before the transaction, so that invalid JSON
// fails before the write lock is taken.
type writes struct {
	key      turn.TurnKey
	lines    lines
	results  []turn.Result
	outputs  []any // results[i]'s output, as bound
	keptOuts []turn.Output
}

func encodeWrites(k turn.TurnKey, ls []turn.Line, results []turn.Result, outputs []turn.Output) (writes, error) {
	encoded, err := encodeLines(k, ls)
	if err != nil {
		return writes{}, err
	}
	w := writes{key: k, lines: encoded, results: sqlstore.Results(results), keptOuts: outputs}
	w.outputs = make([]any, len(w.results))
	for i, r := range w.results {
		o, err := sqlstore.OutputJSON(r.Index, r.Output)
		if err != nil {
			return writes{}, err
		}
		w.outputs[i] = nullText(o)
	}
	return w, nil
}

// apply writes w in tx: the lines, then the results, then the outputs.
func (w writes) apply(ctx context.Context, tx *sql.Tx) error {
	if err := w.lines.append(ctx, tx); err != nil {
		return err
	}
	for i, r := range w.results {
		var code, msg any
		if r.Error != nil {
			code, msg = r.Error.Code, r.Error.Message
		}
		if _, err := tx.ExecContext(ctx, sqlUpsertResult, w.key.SessionID, w.key.TurnID, r.Index,
			r.CallID, r.Name, string(r.Effect), string(r.Status), w.outputs[i], code, msg,
			r.Truncated, r.OriginalBytes, r.OriginalLines, r.OutputID, r.Attempts,
			nullMicros(r.StartedAt), nullMicros(r.FinishedAt), r.ReplayedFrom); err != nil {
			return err
		}
	}
	for _, o := range w.keptOuts {
		data := o.Data
		if data == nil {
			data = []byte{} // data is NOT NULL; nil means empty
		}
		if _, err := tx.ExecContext(ctx, sqlInsertOutput, o.ID, w.key.SessionID, sqlstore.OutputTurn(o, w.key),
			o.CallID, o.ContentType, data, micros(o.CreatedAt), nullMicros(o.ExpiresAt)); err != nil {
			return err
		}
	}
	return nil
}

// lines are ledger lines of one turn key, encoded as one ledger row.
type lines struct {
	key   turn.TurnKey
	n     int
	batch []byte // sqlstore.LinesJSON
}

func encodeLines(k turn.TurnKey, ls []turn.Line) (lines, error) {
	if len(ls) == 0 {
		return lines{key: k}, nil
	}
	batch, err := sqlstore.LinesJSON(k, ls)
	if err != nil {
		return lines{}, err
	}
	return lines{key: k, n: len(ls), batch: batch}, nil
}

// append allocates the lines' seqs by bumping the session's last_seq (gap
// free: the transaction that takes them writes them or returns them) and
// inserts them as one row.
func (ls lines) append(ctx context.Context, tx *sql.Tx) error {
	if ls.n == 0 {
		return nil
	}
	var last int64
	if err := tx.QueryRowContext(ctx, sqlAllocSeqs, ls.n, ls.key.SessionID).Scan(&last); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, sqlInsertLines, ls.key.SessionID, ls.key.TurnID, last, last-int64(ls.n)+1, string(ls.batch))
	return err
}

const (
	sqlGetTurn = `SELECT status, mode, failure_policy, calls, hash, created_at, settled_at
FROM turns WHERE session_id = ? AND id = ?`

	sqlGetResults = `SELECT ` + resultColumns + `
FROM results WHERE session_id = ? AND turn_id = ? ORDER BY idx`
)

// GetTurn returns the turn with its results in call order, read in one
// read transaction so both come from the same snapshot.
func (s *Store) GetTurn(ctx context.Context, k turn.TurnKey) (turn.Turn, error) {
	op := fmt.Sprintf("getting turn %s/%s", k.SessionID, k.TurnID)
	t, err := s.getTurn(ctx, k)
	if err != nil {
		return turn.Turn{}, wrap(op, err)
	}
	return t, nil
}

func (s *Store) getTurn(ctx context.Context, k turn.TurnKey) (turn.Turn, error) {
	tx, err := s.read.BeginTx(ctx, nil)
	if err != nil {
		return turn.Turn{}, err
	}
	defer tx.Rollback()
	t := turn.Turn{SessionID: k.SessionID, ID: k.TurnID}
	var status, mode, policy string
	var calls []byte
	var created int64
	var settled sql.NullInt64
	err = tx.QueryRowContext(ctx, sqlGetTurn, k.SessionID, k.TurnID).Scan(&status, &mode, &policy, &calls, &t.Hash, &created, &settled)
	if err != nil {
		return turn.Turn{}, err
	}
	t.Status, t.Mode, t.FailurePolicy = turn.Status(status), dispatch.Mode(mode), dispatch.FailurePolicy(policy)
	t.CreatedAt, t.SettledAt = fromMicros(created), fromNullMicros(settled)
	if t.Calls, err = sqlstore.DecodeCalls(calls); err != nil {
		return turn.Turn{}, err
	}
	rows, err := tx.QueryContext(ctx, sqlGetResults, k.SessionID, k.TurnID)
	if err != nil {
		return turn.Turn{}, err
	}
	t.Results, err = collectResults(rows, nil)
	if err != nil {
		return turn.Turn{}, err
	}
	return t, nil
}

// sqlClaimCandidates finds running turns whose lease expired before ?1, or,
// for a turn claimed ?4 (turn.FreeResumes) times or more, ?2 microseconds ×
// 2^(resumes-?4) (at most 64 times that) before it; sqlClaimTurn takes one, counting the claim in resumes. They
// run in one transaction on the one write connection, so no two claims
// overlap, and the candidates' owners are those the claims replace.
const (
	sqlClaimCandidates = `SELECT session_id, id, coalesce(lease_owner, '') FROM turns
WHERE status = 'running'
  AND lease_until < ?1 - (CASE WHEN resumes < ?4 THEN 0 ELSE ?2 * min(1 << (resumes - ?4), 64) END)
ORDER BY lease_until
LIMIT ?3`
	sqlClaimTurn = `UPDATE turns SET lease_owner = ?1, lease_until = ?2, resumes = resumes + 1
WHERE session_id = ?3 AND id = ?4
RETURNING resumes`
)

// ClaimTurns takes over up to limit running turns whose lease expired
// before now, backing off from turns claimed before; see turn.Store.
func (s *Store) ClaimTurns(ctx context.Context, owner string, now, until time.Time, backoff time.Duration, limit int) ([]turn.Claim, error) {
	if limit <= 0 {
		return []turn.Claim{}, nil
	}
	var claims []turn.Claim
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, sqlClaimCandidates, micros(now), backoff.Microseconds(), limit, turn.FreeResumes)
		if err != nil {
			return err
		}
		if claims, err = collectClaimCandidates(rows); err != nil {
			return err
		}
		for i := range claims {
			c := &claims[i]
			if err := tx.QueryRowContext(ctx, sqlClaimTurn, owner, micros(until), c.SessionID, c.TurnID).Scan(&c.Resumes); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, wrap("claiming turns", err)
	}
	return claims, nil
}

// collectClaimCandidates reads rows of sqlClaimCandidates and closes rows.
var collectClaimCandidates = collectRows(func(row scanner) (turn.Claim, error) {
	var c turn.Claim
	err := row.Scan(&c.SessionID, &c.TurnID, &c.PrevOwner)
	return c, err
})

// sqlRenewLeases takes the keys as a JSON array of [session, turn] pairs,
// so that one statement renews them all.
const sqlRenewLeases = `UPDATE turns SET lease_until = ?2
WHERE lease_owner = ?1 AND (session_id, id) IN (
    SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?3)
)
RETURNING session_id, id`

// RenewLeases extends owner's leases on keys to until and returns, in the
// order given, the keys owner no longer holds.
func (s *Store) RenewLeases(ctx context.Context, owner string, until time.Time, keys []turn.TurnKey) ([]turn.TurnKey, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	arg, err := keyPairs(keys)
	if err != nil {
		return nil, fmt.Errorf("renewing leases: %w", err)
	}
	renewed, err := queryAll(ctx, s.write, "renewing leases", collectKeys, sqlRenewLeases, owner, micros(until), arg)
	if err != nil {
		return nil, err
	}
	return sqlstore.Lost(keys, renewed), nil
}

// collectKeys reads (session_id, id) rows and closes rows.
var collectKeys = collectRows(func(row scanner) (turn.TurnKey, error) {
	var k turn.TurnKey
	err := row.Scan(&k.SessionID, &k.TurnID)
	return k, err
})
