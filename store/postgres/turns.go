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

// sqlReceiveTurn records a turn, creates its session or moves its last_seq
// and writes the turn_received line, in one statement that writes nothing
// when the turn id is taken (then it returns no row). $1 session id, $2 turn
// id, $3–$11 the turn's other columns, $12–$16 the session's, $17 the line
// as a ledger batch of one (sqlstore.LinesJSON).
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
// calls and writeWebhook when it settles a turn with a webhook. When the
// owner no longer holds the turn no CTE writes a row and the statement
// returns false.
const (
	commitLease = `WITH gate AS (
    UPDATE turns SET
        lease_owner = CASE WHEN @release::boolean THEN NULL ELSE lease_owner END,
        lease_until = CASE WHEN @release::boolean THEN NULL ELSE COALESCE(@until::timestamptz, lease_until) END,
        status      = CASE WHEN @status::text = '' THEN status ELSE @status::text END,
        settled_at  = CASE WHEN @status::text = '' THEN settled_at ELSE @settled::timestamptz END
    WHERE session_id = @session AND id = @turn AND lease_owner = @owner AND resumes = @epoch
    RETURNING 1
)`

	// Parks: an issued completion of this turn becomes pending; an early
	// one stays early (its payload waits to be applied) but takes the
	// deadline and options too. Pending and resolved completions are left
	// as they are: a park never resets a running clock nor reopens a key.
	// An approved call whose tool parks it takes a new park, for its
	// tool's work: pending, with no reason.
	commitParks = `, parks AS (
    UPDATE completions c SET
        status             = CASE WHEN c.status IN ('issued', 'approved') THEN 'pending' ELSE c.status END,
        reason             = CASE WHEN c.status = 'approved' THEN '' ELSE c.reason END,
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
        AND c.status IN ('issued', 'early', 'approved') AND EXISTS (SELECT FROM gate)
)`

	commitEnd = `
SELECT EXISTS (SELECT FROM gate)`
)

// commitSQL holds the Commit statement's variants, indexed by their parts
// (testdata/statements.sql lists them).
var commitSQL = writeVariants(commitLease, commitEnd, writeLines, writeResults, writeOutputs, commitParks, writeWebhook)

// Commit applies c in one statement; see turn.Commit. Results with the same
// Index collapse to the last of them; a zero LeaseUntil keeps the lease's
// current expiry. Parks of keys that are not this turn's are ignored.
func (s *Store) Commit(ctx context.Context, c turn.Commit) error {
	op := fmt.Sprintf("committing turn %s/%s", c.Key.SessionID, c.Key.TurnID)
	if err := sqlstore.CheckCommit(c); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	var p commitParams
	if err := p.set(c); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	var held bool
	if err := s.pool.QueryRow(ctx, commitSQL[p.variant()].sql, p.args()...).Scan(&held); err != nil {
		return wrap(op, err)
	}
	if !held {
		return fmt.Errorf("%s: %w", op, turn.ErrLeaseLost)
	}
	return nil
}

// commitParams are the Commit statement's parameters: commitLease's, then
// the writes', the parks' and the webhook's.
type commitParams struct {
	key     turn.TurnKey
	release bool
	until   pgtype.Timestamptz // NULL keeps the current expiry
	status  string             // "" keeps the current status
	settled pgtype.Timestamptz
	owner   string
	epoch   int32
	writes  writes
	parks   parkCols
	webhook *webhookParams // nil: none
}

// parkCols are the calls a commit parks, one column per parameter of
// commitParks (@p_key … @p_cancel_url), in its order.
type parkCols struct {
	key        [][]byte
	deadline   []pgtype.Timestamptz
	hbTimeout  []int64 // microseconds
	hbDeadline []pgtype.Timestamptz
	onTimeout  []string
	onCancel   []string
	cancelURL  []string
}

func (c *parkCols) add(p *turn.Park) {
	c.key = append(c.key, p.KeyHash[:])
	c.deadline = append(c.deadline, nullTime(p.Deadline))
	c.hbTimeout = append(c.hbTimeout, sqlstore.Micros(p.HeartbeatTimeout))
	c.hbDeadline = append(c.hbDeadline, nullTime(p.HeartbeatDeadline))
	c.onTimeout = append(c.onTimeout, p.OnTimeout)
	c.onCancel = append(c.onCancel, p.OnCancel)
	c.cancelURL = append(c.cancelURL, p.CancelURL)
}

func (c *parkCols) appendArgs(a []any) []any {
	return append(a, c.key, c.deadline, c.hbTimeout, c.hbDeadline, c.onTimeout, c.onCancel, c.cancelURL)
}

// set encodes c.
func (p *commitParams) set(c turn.Commit) error {
	*p = commitParams{
		key: c.Key, owner: c.LeaseOwner, epoch: int32(c.LeaseEpoch), status: string(c.Status),
		release: c.Status != "" && sqlstore.ReleasesLease(c.Status),
		until:   nullTime(c.LeaseUntil),
		settled: nullTime(c.SettledAt),
	}
	if c.Status != "" && !c.Status.Settled() {
		p.settled = pgtype.Timestamptz{} // an unsettled status clears settled_at
	}
	if err := p.writes.set(c.Key, c.Lines, c.Results, c.Outputs); err != nil {
		return err
	}
	for i := range c.Parks {
		p.parks.add(&c.Parks[i])
	}
	if c.Webhook != nil {
		w, err := webhookArgs(c.Key, c.Webhook)
		if err != nil {
			return err
		}
		p.webhook = w
	}
	return nil
}

// variant returns the index in commitSQL of the statement p is for.
func (p *commitParams) variant() int {
	v := p.writes.parts()
	if len(p.parks.key) > 0 {
		v |= partParks
	}
	if p.webhook != nil {
		v |= partWebhook
	}
	return v
}

// args returns p in the order of commitSQL[p.variant()]'s parameters.
func (p *commitParams) args() []any {
	a := append(writeKeyArgs(p.key, 64), p.release, p.until, p.status, p.settled, p.owner, p.epoch)
	a = p.writes.appendArgs(a)
	if len(p.parks.key) > 0 {
		a = p.parks.appendArgs(a)
	}
	if p.webhook != nil {
		a = p.webhook.appendArgs(a)
	}
	return a
}

const (
	sqlGetTurn = `SELECT status, mode, failure_policy, calls, hash, created_at, settled_at
FROM turns WHERE session_id = $1 AND id = $2`

	// sqlGetResults reads a turn's results by one probe of the results key
	// per distinct call id of the turn, fenced by OFFSET 0 (see
	// ARCHITECTURE.md).
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

// sqlClaimTurns takes expired leases of running turns, passing over rows
// other claimers or commits hold (SKIP LOCKED), and counts the claim in
// resumes. A turn claimed $6 (turn.FreeResumes) times or more waits $5
// seconds × 2^(resumes-$6) (at most 64 times that) past its lease's expiry.
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
	if s.sharded {
		return s.claimTurnsSharded(ctx, owner, now, until, backoff, limit)
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
	if s.sharded {
		return s.renewLeasesSharded(ctx, owner, until, keys)
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
