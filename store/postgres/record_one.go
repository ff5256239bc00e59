package postgres

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/turnd/turnd/turn"
)

// On a sharded database (Options.Sharded) RecordTurn and LookupTurn do
// not group turns of several sessions into one statement, which on Citus
// would be a statement, and a transaction, across shards: each call runs a
// statement of its own that names its one session (routed to its shard).
// The all-read path keeps its single round trip; what it loses is group
// commit's shared commit and WAL flush, which a sharded database spreads
// over its workers instead.

// recordOneHead records one whole turn when its session exists, its id is
// free and none of its call ids is answered in the session (sqlAnswered's
// predicate, one probe of the results key per call id); the write
// fragments then write its lines, results, outputs and webhook.
const (
	recordOneHead = `WITH found AS (
    SELECT FROM sessions WHERE id = @session
), taken AS (
    SELECT FROM turns WHERE session_id = @session AND id = @turn
), answered AS (
    SELECT FROM unnest(@c_ids::text[]) AS c (call_id)
    CROSS JOIN LATERAL (SELECT FROM results r WHERE r.session_id = @session AND r.call_id = c.call_id
        AND r.status <> 'started' AND r.status <> '' AND r.replayed_from = '' LIMIT 1) r
    LIMIT 1
), gate AS (
    INSERT INTO turns (session_id, id, status, mode, failure_policy, calls, hash, created_at, settled_at)
    SELECT @session, @turn, @t_status::text, @t_mode::text, @t_policy::text, @t_calls::json, @t_hash::text,
        @t_created::timestamptz, @t_settled::timestamptz
    WHERE EXISTS (SELECT FROM found) AND NOT EXISTS (SELECT FROM taken) AND NOT EXISTS (SELECT FROM answered)
    ON CONFLICT (session_id, id) DO NOTHING
    RETURNING 1
)`
	recordOneEnd = `
SELECT EXISTS (SELECT FROM gate), EXISTS (SELECT FROM found), EXISTS (SELECT FROM taken), EXISTS (SELECT FROM answered)`

	// sqlLookupTurn is sqlLookupTurns for one turn, its session $1.
	sqlLookupTurn = `SELECT 1::bigint, s.tools, s.budget, s.callback_url, s.metadata, s.created_at, s.approval,
    EXISTS (SELECT FROM turns t WHERE t.session_id = $1 AND t.id = $2),
    a.turn_id, a.idx, a.call_id, a.name, a.effect, a.status, a.output, a.error_code, a.error_message,
    a.truncated, a.original_bytes, a.original_lines, a.output_id, a.attempts, a.started_at, a.finished_at
FROM sessions s
LEFT JOIN LATERAL (
    SELECT DISTINCT ON (r.call_id) r.turn_id, r.idx, r.call_id, r.name, r.effect, r.status, r.output,
        r.error_code, r.error_message, r.truncated, r.original_bytes, r.original_lines, r.output_id,
        r.attempts, r.started_at, r.finished_at
    FROM results r
    WHERE r.session_id = $1 AND r.call_id = ANY ($3::text[])
        AND r.status <> 'started' AND r.status <> '' AND r.replayed_from = ''
    ORDER BY r.call_id, r.finished_at NULLS LAST, r.started_at NULLS LAST, r.turn_id, r.idx
) a ON true
WHERE s.id = $1`
)

// recordOneSQL holds the statement's variants: every record has lines
// (turn_received first) and results (none for a turn without calls write
// no row), so they are always in; bit 0 adds the outputs, bit 1 the
// webhook.
var recordOneSQL = writeVariants(recordOneHead+writeLines+writeResults, recordOneEnd, writeOutputs, writeWebhook)

// The optional parts of recordOneSQL (bits of its variant index).
const (
	recordOneOutputs = 1 << iota
	recordOneWebhook
)

// recordOneParams are recordOneSQL's parameters: the head's, then the
// writes' and the webhook's.
type recordOneParams struct {
	key                               turn.TurnKey
	callIDs                           []string
	status, mode, policy, calls, hash string
	created                           time.Time
	settled                           pgtype.Timestamptz
	writes                            writes
	webhook                           *webhookParams
}

// set encodes e, a checked record.
func (p *recordOneParams) set(e *encodedRecord) error {
	t := e.r.Turn
	*p = recordOneParams{key: e.key, status: string(t.Status), mode: string(t.Mode), policy: string(t.FailurePolicy),
		calls: string(e.calls), hash: t.Hash, created: t.CreatedAt, settled: nullTime(t.SettledAt)}
	for _, c := range t.Calls {
		if !slices.Contains(p.callIDs, c.ID) {
			p.callIDs = append(p.callIDs, c.ID)
		}
	}
	if p.callIDs == nil {
		p.callIDs = []string{}
	}
	if err := p.writes.set(e.key, e.r.Lines, e.r.Results, e.r.Outputs); err != nil {
		return err
	}
	if e.r.Webhook != nil {
		w, err := webhookArgs(e.key, e.r.Webhook)
		if err != nil {
			return err
		}
		p.webhook = w
	}
	return nil
}

func (p *recordOneParams) variant() int {
	v := 0
	if p.writes.outputs.len() > 0 {
		v |= recordOneOutputs
	}
	if p.webhook != nil {
		v |= recordOneWebhook
	}
	return v
}

func (p *recordOneParams) args() []any {
	a := append(writeKeyArgs(p.key, 64), p.callIDs, p.status, p.mode, p.policy, p.calls, p.hash, p.created, p.settled)
	a = p.writes.lines.appendArgs(a)
	a = p.writes.results.appendArgs(a)
	if p.writes.outputs.len() > 0 {
		a = p.writes.outputs.appendArgs(a)
	}
	if p.webhook != nil {
		a = p.webhook.appendArgs(a)
	}
	return a
}

// recordOne is RecordTurn on a sharded database.
func (s *Store) recordOne(ctx context.Context, r turn.Record) error {
	var e encodedRecord
	if err := e.encode(&r); err != nil {
		return err
	}
	var p recordOneParams
	if err := p.set(&e); err != nil {
		return fmt.Errorf("%s: %w", e.op(), err)
	}
	var inserted, found, taken, answered bool
	err := s.pool.QueryRow(ctx, recordOneSQL[p.variant()].sql, p.args()...).Scan(&inserted, &found, &taken, &answered)
	switch {
	case err != nil:
		return wrap(e.op(), err)
	case inserted:
		return nil
	case !found:
		return fmt.Errorf("%s: session: %w", e.op(), turn.ErrNotFound)
	case answered && !taken:
		return fmt.Errorf("%s: %w", e.op(), turn.ErrCallsAnswered)
	}
	return fmt.Errorf("%s: %w", e.op(), turn.ErrTurnExists) // taken, or by a writer meanwhile
}

// lookupOne is LookupTurn on a sharded database: one statement routed to
// the session, on the main pool.
func (s *Store) lookupOne(ctx context.Context, c *lookupCall) error {
	ids := c.callIDs
	if ids == nil {
		ids = []string{}
	}
	return s.scanLookups(ctx, []*lookupCall{c}, s.pool, sqlLookupTurn, c.sessionID, c.turnID, ids)
}
