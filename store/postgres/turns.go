package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/turnd/turnd/dispatch"
	"github.com/turnd/turnd/store/internal/sqlstore"
	"github.com/turnd/turnd/turn"
)

// sqlReceiveTurn records a turn in one statement (one round trip, one
// transaction). The turn insert comes first: when the turn id is taken it
// inserts nothing, and every later step is conditioned on it, so a duplicate
// writes nothing. The session upsert then either creates the session with
// last_seq 1 (the turn_received line is its first) or bumps the existing
// last_seq; ON CONFLICT DO UPDATE locks and returns the committed row even
// when a concurrent receive created it after this statement's snapshot. Its
// RETURNING row is the session as stored and carries the line's seq.
//
// $1 session id, $2 turn id, $3–$11 the turn's other columns, $12–$16 the
// session's, $17 the line as a ledger batch of one (sqlstore.LinesJSON).
const sqlReceiveTurn = `WITH t AS (
    INSERT INTO turns (session_id, id, status, mode, failure_policy, calls, hash, created_at, settled_at, lease_owner, lease_until)
    VALUES ($1, $2, $3, $4, $5, $6::json, $7, $8, $9, $10, $11)
    ON CONFLICT (session_id, id) DO NOTHING
    RETURNING 1
), s AS (
    INSERT INTO sessions (id, tools, budget, callback_url, metadata, created_at, last_seq)
    SELECT $1, $12::json, $13::json, $14::text, $15::json, $16::timestamptz, 1
    WHERE EXISTS (SELECT FROM t)
    ON CONFLICT (id) DO UPDATE SET last_seq = sessions.last_seq + 1
    RETURNING tools, budget, callback_url, metadata, created_at, last_seq
), l AS (
    INSERT INTO ledger_batches (session_id, turn_id, last_seq, first_seq, lines)
    SELECT $1, $2, s.last_seq, s.last_seq, $17::json
    FROM s
)
SELECT tools, budget, callback_url, metadata, created_at, last_seq FROM s`

// ReceiveTurn records r in one statement; see turn.Store. On
// turn.ErrTurnExists the recorded turn is read afterwards (the rare path),
// and ReceiveResult.Session is left zero.
func (s *Store) ReceiveTurn(ctx context.Context, r turn.Receive) (turn.ReceiveResult, error) {
	rc, err := sqlstore.ReceiveColumns(&r)
	if err != nil {
		return turn.ReceiveResult{}, err
	}
	op, calls, line := rc.Op, rc.Calls, rc.Line
	sess := sessionColumnArgs(r.Session, rc.Session)
	t := r.Turn
	args := []any{
		t.SessionID, t.ID, string(t.Status), string(t.Mode), string(t.FailurePolicy), calls, t.Hash,
		t.CreatedAt, nullTime(t.SettledAt), r.LeaseOwner, nullTime(r.LeaseUntil),
	}
	args = append(args, sess[1:]...) // the session id is $1
	args = append(args, string(line))

	var row sessionRow
	var seq int64
	err = s.pool.QueryRow(ctx, sqlReceiveTurn, args...).Scan(append(row.dest(), &seq)...)
	if errors.Is(err, pgx.ErrNoRows) {
		return sqlstore.TurnExists(op, func() (turn.Turn, error) {
			return s.GetTurn(ctx, turn.TurnKey{SessionID: t.SessionID, TurnID: t.ID})
		})
	}
	if err != nil {
		return turn.ReceiveResult{}, wrap(op, err)
	}
	stored, err := row.session(t.SessionID)
	if err != nil {
		return turn.ReceiveResult{}, fmt.Errorf("%s: %w", op, err)
	}
	return turn.ReceiveResult{Session: stored, Seq: seq}, nil
}

// The Commit statement is its lease check (the gate, see writes.go)
// followed by the write fragments it has rows for, commitParks when it parks
// calls and writeWebhook when it settles a turn with a webhook: 32
// variants, indexed by their parts.
//
// Everything hangs off the lease check: when the owner no longer holds the
// turn, gate is empty and no other CTE writes a row; the statement then
// returns false. The lease update locks the turn's row first, as Resolve
// does, so commits and resolutions of one turn take their locks in the same
// order (turn, then completions and session) and never deadlock.
const (
	commitLease = `WITH gate AS (
    UPDATE turns SET
        lease_owner = CASE WHEN @release::boolean THEN NULL ELSE lease_owner END,
        lease_until = CASE WHEN @release::boolean THEN NULL ELSE COALESCE(@until::timestamptz, lease_until) END,
        status      = CASE WHEN @status::text = '' THEN status ELSE @status::text END,
        settled_at  = CASE WHEN @status::text = '' THEN settled_at ELSE @settled::timestamptz END
    WHERE session_id = @session AND id = @turn AND lease_owner = @owner
    RETURNING 1
)`

	// Parks: an issued completion of this turn becomes pending; an early
	// one stays early (its payload waits to be applied) but takes the
	// deadline and options too. Pending and resolved completions are left
	// as they are: a park never resets a running clock nor reopens a key.
	commitParks = `, parks AS (
    UPDATE completions c SET
        status             = CASE WHEN c.status = 'issued' THEN 'pending' ELSE c.status END,
        deadline           = p.deadline,
        heartbeat_timeout  = p.heartbeat_timeout,
        heartbeat_deadline = p.heartbeat_deadline,
        on_timeout         = p.on_timeout,
        on_cancel          = p.on_cancel,
        cancel_url         = p.cancel_url
    FROM unnest(@p_key::bytea[], @p_deadline::timestamptz[], @p_hb_timeout::bigint[],
        @p_hb_deadline::timestamptz[], @p_on_timeout::text[], @p_on_cancel::text[], @p_cancel_url::text[])
        AS p (key_hash, deadline, heartbeat_timeout, heartbeat_deadline, on_timeout, on_cancel, cancel_url)
    WHERE c.key_hash = p.key_hash AND c.session_id = @session AND c.turn_id = @turn
        AND c.status IN ('issued', 'early') AND EXISTS (SELECT FROM gate)
)`

	commitEnd = `
SELECT EXISTS (SELECT FROM gate)`
)

// commitSQL holds the statement for each combination of parts, rewritten to
// positional parameters once here: pgx can bind pgx.NamedArgs itself, but it
// would lex the statement on every commit.
var commitSQL = variants(commitLease, commitEnd, writeLines, writeResults, writeOutputs, commitParks, writeWebhook)

// Commit applies c in one statement; see turn.Commit. Results with the same
// Index collapse to the last of them; a zero LeaseUntil keeps the lease's
// current expiry. Parks of keys that are not this turn's are ignored.
func (s *Store) Commit(ctx context.Context, c turn.Commit) error {
	op := fmt.Sprintf("committing turn %s/%s", c.Key.SessionID, c.Key.TurnID)
	if err := sqlstore.CheckCommit(c); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	parts, args, err := commitArgs(c)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	var held bool
	stmt := commitSQL[parts]
	if err := s.pool.QueryRow(ctx, stmt.sql, stmt.args(args)...).Scan(&held); err != nil {
		return wrap(op, err)
	}
	if !held {
		return fmt.Errorf("%s: %w", op, turn.ErrLeaseLost)
	}
	return nil
}

// commitArgs encodes c as the Commit statement's arguments — scalars, then
// one array per column of the lines, results, outputs and parks — and says
// which parts the statement needs.
func commitArgs(c turn.Commit) (int, map[string]any, error) {
	release := c.Status != "" && sqlstore.ReleasesLease(c.Status)
	until := nullTime(c.LeaseUntil) // NULL (zero) keeps the current expiry
	settled := nullTime(c.SettledAt)
	if c.Status != "" && !c.Status.Settled() {
		settled = pgtype.Timestamptz{} // an unsettled status clears settled_at
	}
	args := map[string]any{
		"session": c.Key.SessionID, "turn": c.Key.TurnID, "owner": c.LeaseOwner,
		"until": until, "release": release, "status": string(c.Status), "settled": settled,
	}
	parts, err := writeArgs(args, c.Key, c.Lines, c.Results, c.Outputs)
	if err != nil {
		return 0, nil, err
	}
	if n := len(c.Parks); n > 0 {
		parts |= partParks
		keys := make([][]byte, n)
		deadlines, hbDeadlines := make([]pgtype.Timestamptz, n), make([]pgtype.Timestamptz, n)
		hbTimeouts := make([]int64, n)
		onTimeout, onCancel, cancelURL := make([]string, n), make([]string, n), make([]string, n)
		for i, p := range c.Parks {
			keys[i] = p.KeyHash[:]
			deadlines[i], hbDeadlines[i] = nullTime(p.Deadline), nullTime(p.HeartbeatDeadline)
			hbTimeouts[i] = sqlstore.Micros(p.HeartbeatTimeout)
			onTimeout[i], onCancel[i], cancelURL[i] = p.OnTimeout, p.OnCancel, p.CancelURL
		}
		args["p_key"], args["p_deadline"], args["p_hb_timeout"], args["p_hb_deadline"] = keys, deadlines, hbTimeouts, hbDeadlines
		args["p_on_timeout"], args["p_on_cancel"], args["p_cancel_url"] = onTimeout, onCancel, cancelURL
	}
	if c.Webhook != nil {
		if err := webhookArgs(args, c.Key, c.Webhook); err != nil {
			return 0, nil, err
		}
		parts |= partWebhook
	}
	return parts, args, nil
}

const (
	sqlGetTurn = `SELECT status, mode, failure_policy, calls, hash, created_at, settled_at
FROM turns WHERE session_id = $1 AND id = $2`

	// Results are keyed by call id first (migration 7): a turn's are read
	// by a probe of the whole key per distinct call id of the turn, taken
	// from its row. The probe is a LATERAL subquery fenced by OFFSET 0 so
	// that no plan — in particular the generic plan of this prepared
	// statement, priced on an average session — can turn it into a scan
	// of the session's key range filtered by call id, which grows with
	// the session (an IN or = ANY form was planned that way).
	sqlGetResults = `SELECT r.* FROM (
    SELECT DISTINCT c.call ->> 'id' AS id FROM turns t, json_array_elements(t.calls) AS c (call)
    WHERE t.session_id = $1 AND t.id = $2
) ids
CROSS JOIN LATERAL (
    SELECT ` + resultColumns + ` FROM results
    WHERE session_id = $1 AND call_id = ids.id AND turn_id = $2
    OFFSET 0
) r
ORDER BY r.idx`
)

// GetTurn returns the turn with its results in call order, reading both in
// one round trip.
func (s *Store) GetTurn(ctx context.Context, k turn.TurnKey) (turn.Turn, error) {
	op := fmt.Sprintf("getting turn %s/%s", k.SessionID, k.TurnID)
	b := &pgx.Batch{}
	b.Queue(sqlGetTurn, k.SessionID, k.TurnID)
	b.Queue(sqlGetResults, k.SessionID, k.TurnID)
	br := s.pool.SendBatch(ctx, b)
	t, err := readTurn(br, k)
	if cerr := br.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return turn.Turn{}, wrap(op, err)
	}
	return t, nil
}

func readTurn(br pgx.BatchResults, k turn.TurnKey) (turn.Turn, error) {
	t := turn.Turn{SessionID: k.SessionID, ID: k.TurnID}
	var status, mode, policy string
	var calls []byte
	var created, settled pgtype.Timestamptz
	err := br.QueryRow().Scan(&status, &mode, &policy, &calls, &t.Hash, &created, &settled)
	if err != nil {
		return turn.Turn{}, err
	}
	t.Status, t.Mode, t.FailurePolicy = turn.Status(status), dispatch.Mode(mode), dispatch.FailurePolicy(policy)
	t.CreatedAt, t.SettledAt = fromNullTime(created), fromNullTime(settled)
	if t.Calls, err = sqlstore.DecodeCalls(calls); err != nil {
		return turn.Turn{}, err
	}
	rows, err := br.Query()
	if err != nil {
		return turn.Turn{}, err
	}
	t.Results, err = collectResults(rows, nil)
	if err != nil {
		return turn.Turn{}, err
	}
	return t, nil
}

// sqlClaimTurns takes expired leases of running turns and counts the claim
// in resumes. A turn claimed $6 (turn.FreeResumes) times or more waits $5
// seconds × 2^(resumes-$6) (at most 64 times that) past its lease's expiry. SKIP LOCKED makes concurrent
// claimers pass over each other's rows (and rows a commit is writing)
// instead of waiting; FOR UPDATE re-checks the expiry on the latest row
// version, so a turn claimed and committed meanwhile is not taken twice.
const sqlClaimTurns = `UPDATE turns t SET lease_owner = $1, lease_until = $3, resumes = t.resumes + 1
FROM (
    SELECT session_id, id, lease_owner FROM turns
    WHERE status = 'running'
      AND lease_until < $2::timestamptz - make_interval(secs => CASE WHEN resumes < $6 THEN 0
          ELSE $5::float8 * least(2 ^ (resumes - $6), 64) END)
    ORDER BY lease_until
    LIMIT $4
    FOR UPDATE SKIP LOCKED
) c
WHERE t.session_id = c.session_id AND t.id = c.id
RETURNING t.session_id, t.id, t.resumes, coalesce(c.lease_owner, '')`

// ClaimTurns takes over up to limit running turns whose lease expired
// before now, backing off from turns claimed before; see turn.Store.
func (s *Store) ClaimTurns(ctx context.Context, owner string, now, until time.Time, backoff time.Duration, limit int) ([]turn.Claim, error) {
	if limit <= 0 {
		return []turn.Claim{}, nil
	}
	rows, err := s.pool.Query(ctx, sqlClaimTurns, owner, now, until, limit, backoff.Seconds(), turn.FreeResumes)
	if err != nil {
		return nil, wrap("claiming turns", err)
	}
	claims := []turn.Claim{}
	var c turn.Claim
	_, err = pgx.ForEachRow(rows, []any{&c.SessionID, &c.TurnID, &c.Resumes, &c.PrevOwner}, func() error {
		claims = append(claims, c)
		return nil
	})
	if err != nil {
		return nil, wrap("claiming turns", err)
	}
	return claims, nil
}

const sqlRenewLeases = `UPDATE turns t SET lease_until = $2
FROM unnest($3::text[], $4::text[]) AS k (session_id, id)
WHERE t.session_id = k.session_id AND t.id = k.id AND t.lease_owner = $1
RETURNING t.session_id, t.id`

// RenewLeases extends owner's leases on keys to until and returns, in the
// order given, the keys owner no longer holds.
func (s *Store) RenewLeases(ctx context.Context, owner string, until time.Time, keys []turn.TurnKey) ([]turn.TurnKey, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	sids, tids := keyColumns(keys)
	renewed, err := queryAll(ctx, s.pool, "renewing leases", collectKeys, sqlRenewLeases, owner, until, sids, tids)
	if err != nil {
		return nil, err
	}
	return sqlstore.Lost(keys, renewed), nil
}

// collectKeys reads (session_id, id) rows and closes rows.
func collectKeys(rows pgx.Rows) ([]turn.TurnKey, error) {
	keys := []turn.TurnKey{}
	var k turn.TurnKey
	_, err := pgx.ForEachRow(rows, []any{&k.SessionID, &k.TurnID}, func() error {
		keys = append(keys, k)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return keys, nil
}
