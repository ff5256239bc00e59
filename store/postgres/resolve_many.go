package postgres

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// The set-based resolving statements: a group commit of several Resolves
// (each of its own session: the resolver keys calls by session) sends one
// lock statement and one resolving statement for the whole batch, each
// call's rows named by its 1-based position (ord), instead of a lock and a
// resolving statement per call. They decide as Resolve's per-call
// statements do, call by call; ARCHITECTURE.md ("Resolve's group commit")
// says what the batch saves.
const (
	// sqlLockMany is sqlLockResolve for a batch: for each call in ord
	// order (the batch is sorted by turn key, so that two transactions
	// lock turns in one order) it locks the turn's row, then that call's
	// completions in key order. It returns no row for a call whose turn
	// does not exist and one row of NULL completion columns for a call
	// none of whose keys is its turn's (or that has none). A call's keys
	// are the slice lo:hi (1-based, inclusive; empty when lo > hi) of the
	// batch's keys, which hold each call's keys together, in ord order: a
	// slice per call, where a subquery over all the keys per call would
	// read every key once per call.
	sqlLockMany = `SELECT k.ord, c.key_hash, c.status
FROM unnest($1::text[], $2::text[], $3::integer[], $4::integer[]) WITH ORDINALITY AS k (session_id, turn_id, lo, hi, ord)
CROSS JOIN LATERAL (
    SELECT status FROM turns WHERE session_id = k.session_id AND id = k.turn_id FOR NO KEY UPDATE
) t
LEFT JOIN LATERAL (
    SELECT key_hash, status FROM completions
    WHERE session_id = k.session_id AND turn_id = k.turn_id
        AND key_hash = ANY (($5::bytea[])[k.lo:k.hi])
    ORDER BY key_hash
    FOR UPDATE
) c ON true
ORDER BY k.ord`

	// The gate passes a call whose turn exists and every one of whose
	// items' completions (locked by sqlLockMany) is in its expected
	// status (a call's items are the slice lo:hi of the item columns, as
	// in sqlLockMany); the rest is resolveHead's, per gated call: the settle counts
	// as pending no completion this statement resolves, and a call's lines
	// take their seqs first, its settling lines (when it settles) after
	// them, in one ledger batch.
	resolveManyHead = `WITH b AS (
    SELECT * FROM unnest(@b_session::text[], @b_turn::text[], @b_now::timestamptz[], @b_status::text[],
        @b_settled::timestamptz[], @b_n::bigint[], @b_n_all::bigint[], @b_lines::text[], @b_all::text[],
        @b_lo::integer[], @b_hi::integer[])
        WITH ORDINALITY AS b (session_id, turn_id, now, status, settled_at, n, n_all, lines, all_lines, lo, hi, ord)
), items AS MATERIALIZED (
    SELECT * FROM unnest(@c_ord::bigint[], @c_key::bytea[], @c_expect::text[], @c_status::text[], @c_payload::text[],
        @c_hash::bytea[])
        AS r (ord, key_hash, expect, status, payload, payload_hash)
), gate AS MATERIALIZED (
    SELECT b.* FROM b
    WHERE EXISTS (SELECT FROM turns t WHERE t.session_id = b.session_id AND t.id = b.turn_id)
        AND (SELECT count(*) FROM unnest((@c_key::bytea[])[b.lo:b.hi], (@c_expect::text[])[b.lo:b.hi]) AS r (key_hash, expect)
                JOIN completions c ON c.session_id = b.session_id AND c.key_hash = r.key_hash
                    AND c.turn_id = b.turn_id AND c.status = r.expect)
            = greatest(b.hi - b.lo + 1, 0)
), done AS (
    UPDATE completions c SET status = r.status, payload = r.payload::json, payload_hash = r.payload_hash, resolved_at = g.now
    FROM items r JOIN gate g ON g.ord = r.ord
    WHERE c.session_id = g.session_id AND c.key_hash = r.key_hash AND c.turn_id = g.turn_id
    RETURNING 1
), settle AS MATERIALIZED (
    UPDATE turns t SET status = g.status, settled_at = g.settled_at
    FROM gate g
    WHERE t.session_id = g.session_id AND t.id = g.turn_id AND t.status = 'waiting'
        AND NOT EXISTS (SELECT FROM completions c
            WHERE c.session_id = g.session_id AND c.turn_id = g.turn_id AND c.status IN ('pending', 'early', 'approved')
                AND c.key_hash <> ALL ((@c_key::bytea[])[g.lo:g.hi]))
    RETURNING g.ord, g.session_id, g.turn_id
), seq AS (
    UPDATE sessions s SET last_seq = s.last_seq + w.n
    FROM (SELECT g.ord, g.session_id, g.turn_id,
            CASE WHEN st.ord IS NULL THEN g.n ELSE g.n_all END AS n,
            CASE WHEN st.ord IS NULL THEN g.lines ELSE g.all_lines END AS lines
        FROM gate g LEFT JOIN settle st ON st.ord = g.ord) w
    WHERE s.id = w.session_id AND w.n > 0
    RETURNING w.session_id, w.turn_id, s.last_seq, w.n, w.lines
), lines AS (
    INSERT INTO ledger_batches (session_id, turn_id, last_seq, first_seq, lines)
    SELECT q.session_id, q.turn_id, q.last_seq, q.last_seq - q.n + 1, q.lines::json
    FROM seq q
)`

	resolveManyTail = `
SELECT b.ord, EXISTS (SELECT FROM gate g WHERE g.ord = b.ord), EXISTS (SELECT FROM settle st WHERE st.ord = b.ord)
FROM b
ORDER BY b.ord`
)

// resolveManySQL holds the set-based resolving statement's variants,
// indexed by the parts any call of the batch has: results, outputs,
// webhook (resolveResults, resolveOutputs, resolveHook).
var resolveManySQL = variants(resolveManyHead, resolveManyTail,
	[]string{batchResults("gate", "turn_id", resultsUpsert), batchOutputs("gate"), batchWebhooks("settle", "turn_id")})

// resolveManyParams are the set-based resolving statement's parameters,
// the calls' resolveParams as columns: one row per call (@b_…), and the
// rows of every call's items, results, outputs and webhook, each naming
// its call by ord. sqlLockMany takes the calls' keys and items from them
// (lockArgs).
type resolveManyParams struct {
	calls    manyCallCols
	itemOrd  []int64
	items    completionCols
	results  batchResultCols
	outputs  batchOutputCols
	webhooks webhookCols
}

// manyCallCols are the batch's calls (@b_session … @b_all).
type manyCallCols struct {
	session, turn []string
	now           []time.Time
	status        []string
	settled       []pgtype.Timestamptz
	n, nAll       []int64
	lines, all    []string
	// lo and hi bound each call's items in the item columns (1-based,
	// inclusive; lo > hi for none).
	lo, hi []int32
}

// sortedByTurn returns batch sorted by turn key: the order in which
// sqlLockMany locks the calls' turns.
func sortedByTurn(batch []*resolveCall) []*resolveCall {
	sorted := slices.Clone(batch)
	slices.SortFunc(sorted, func(a, b *resolveCall) int {
		return cmp.Or(cmp.Compare(a.b.Key.SessionID, b.b.Key.SessionID), cmp.Compare(a.b.Key.TurnID, b.b.Key.TurnID))
	})
	return sorted
}

// manyArgs encodes batch (sorted by sortedByTurn; each call of its own
// session) as the set-based resolving statement's parameters.
func manyArgs(batch []*resolveCall) resolveManyParams {
	n := len(batch)
	var ni, nr int
	for _, c := range batch {
		ni += len(c.p.completions.key)
		nr += len(c.p.results.idx)
	}
	p := resolveManyParams{
		calls: manyCallCols{session: make([]string, 0, n), turn: make([]string, 0, n), now: make([]time.Time, 0, n),
			status: make([]string, 0, n), settled: make([]pgtype.Timestamptz, 0, n), n: make([]int64, 0, n),
			nAll: make([]int64, 0, n), lines: make([]string, 0, n), all: make([]string, 0, n),
			lo: make([]int32, 0, n), hi: make([]int32, 0, n)},
		itemOrd: make([]int64, 0, ni),
		items: completionCols{key: make([][]byte, 0, ni), expect: make([]string, 0, ni), status: make([]string, 0, ni),
			payload: make([]*string, 0, ni), hash: make([][]byte, 0, ni)},
		results: batchResultCols{turn: make([]int64, 0, nr), cols: makeResultCols(nr)},
	}
	for i, c := range batch {
		ord := int64(i + 1)
		cp := &c.p
		p.calls.session = append(p.calls.session, cp.key.SessionID)
		p.calls.turn = append(p.calls.turn, cp.key.TurnID)
		p.calls.now = append(p.calls.now, cp.now)
		p.calls.status = append(p.calls.status, cp.status)
		p.calls.settled = append(p.calls.settled, cp.settled)
		p.calls.n = append(p.calls.n, cp.lines.n)
		p.calls.nAll = append(p.calls.nAll, cp.all.n)
		p.calls.lines = append(p.calls.lines, cp.lines.lines)
		p.calls.all = append(p.calls.all, cp.all.lines)
		p.calls.lo = append(p.calls.lo, int32(len(p.itemOrd)+1))
		p.calls.hi = append(p.calls.hi, int32(len(p.itemOrd)+len(cp.completions.key)))
		for range cp.completions.key {
			p.itemOrd = append(p.itemOrd, ord)
		}
		p.items.key = append(p.items.key, cp.completions.key...)
		p.items.expect = append(p.items.expect, cp.completions.expect...)
		p.items.status = append(p.items.status, cp.completions.status...)
		p.items.payload = append(p.items.payload, cp.completions.payload...)
		p.items.hash = append(p.items.hash, cp.completions.hash...)
		p.results.addAll(ord, &cp.results)
		p.outputs.addAll(ord, &cp.outputs)
		if cp.webhook != nil {
			p.webhooks.add(ord, *cp.webhook)
		}
	}
	return p
}

// lockArgs are sqlLockMany's arguments: the calls' turn keys and the
// bounds of their items, and the items' keys.
func (p *resolveManyParams) lockArgs() []any {
	return []any{p.calls.session, p.calls.turn, p.calls.lo, p.calls.hi, p.items.key}
}

func (p *resolveManyParams) variant() int {
	v := 0
	if len(p.results.turn) > 0 {
		v |= resolveResults
	}
	if len(p.outputs.turn) > 0 {
		v |= resolveOutputs
	}
	if len(p.webhooks.turn) > 0 {
		v |= resolveHook
	}
	return v
}

func (p *resolveManyParams) args() []any {
	b, c := &p.calls, &p.items
	a := make([]any, 0, 64)
	a = append(a, b.session, b.turn, b.now, b.status, b.settled, b.n, b.nAll, b.lines, b.all, b.lo, b.hi,
		p.itemOrd, c.key, c.expect, c.status, c.payload, c.hash)
	if len(p.results.turn) > 0 {
		a = p.results.appendArgs(a)
	}
	if len(p.outputs.turn) > 0 {
		a = p.outputs.appendArgs(a)
	}
	if len(p.webhooks.turn) > 0 {
		a = p.webhooks.appendArgs(a)
	}
	return a
}

// execResolveMany sends batch's transaction (BEGIN, sqlLockMany, the
// set-based resolving statement, COMMIT) as one pipeline and reads what
// each call's rows answered into it.
func (s *Store) execResolveMany(ctx context.Context, batch []*resolveCall) error {
	// The statement moves each session's last_seq once: a second call of a
	// session would lose its lines.
	if err := distinctSessions(batch, func(c *resolveCall) string { return c.b.Key.SessionID }); err != nil {
		return fmt.Errorf("resolving: %w", err)
	}
	sorted := sortedByTurn(batch)
	rp := manyArgs(sorted)
	return s.sendResolve(ctx, func(pb *pgx.Batch) {
		pb.Queue(sqlLockMany, rp.lockArgs()...)
		pb.Queue(resolveManySQL[rp.variant()].sql, rp.args()...)
	}, func(br pgx.BatchResults) error { return readResolveMany(br, sorted) })
}

// readResolveMany reads the results of execResolveMany's pipeline into
// each call of sorted.
func readResolveMany(br pgx.BatchResults, sorted []*resolveCall) error {
	if _, err := br.Exec(); err != nil {
		return err
	}
	for _, c := range sorted {
		c.passed, c.settled, c.statuses = false, false, nil
	}
	var (
		ord         int64
		key         []byte
		status      *string
		passed, set bool
	)
	call := func() (*resolveCall, error) {
		if ord < 1 || ord > int64(len(sorted)) {
			return nil, fmt.Errorf("resolving statement answered call %d of %d", ord, len(sorted))
		}
		return sorted[ord-1], nil
	}
	rows, err := br.Query()
	if err != nil {
		return err
	}
	_, err = pgx.ForEachRow(rows, []any{&ord, &key, &status}, func() error {
		c, err := call()
		if err != nil {
			return err
		}
		return c.locked(key, status)
	})
	if err != nil {
		return err
	}
	if rows, err = br.Query(); err != nil {
		return err
	}
	_, err = pgx.ForEachRow(rows, []any{&ord, &passed, &set}, func() error {
		c, err := call()
		if err != nil {
			return err
		}
		c.passed, c.settled = passed, set
		return nil
	})
	if err != nil {
		return err
	}
	_, err = br.Exec()
	return err
}
