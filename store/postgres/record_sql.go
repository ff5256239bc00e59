package postgres

import (
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// The recording statement (RecordTurn's group commit) records a batch of
// whole turns, each all or nothing: a turn is inserted only if its session
// exists, its id is free and none of its call ids is answered in the
// session, and only an inserted turn's lines, results, outputs and webhook
// are written. Its final SELECT returns one row per turn: its position
// (ord), whether it was inserted, whether its session exists and whether it
// was refused for an answered call. ARCHITECTURE.md ("store/postgres:
// statements") explains its CTEs, its LIMIT 1 probes and its batching.
const (
	recordHead = `WITH answered AS MATERIALIZED (
    SELECT c.turn
    FROM unnest(@c_turn::bigint[], @c_session::text[], @c_id::text[]) AS c (turn, session_id, call_id)
    CROSS JOIN LATERAL (SELECT FROM results r WHERE r.session_id = c.session_id AND r.call_id = c.call_id
        AND r.status <> 'started' AND r.status <> '' AND r.replayed_from = '' LIMIT 1) r
), batch AS (
    SELECT b.*,
        (SELECT true FROM sessions s WHERE s.id = b.session_id LIMIT 1) IS NOT NULL AS session_found,
        EXISTS (SELECT FROM answered a WHERE a.turn = b.ord) AS answered
    FROM unnest(@t_session::text[], @t_id::text[], @t_status::text[], @t_mode::text[], @t_policy::text[],
        @t_calls::text[], @t_hash::text[], @t_created::timestamptz[], @t_settled::timestamptz[], @t_nlines::bigint[],
        @t_lines::text[])
        WITH ORDINALITY AS b (session_id, id, status, mode, failure_policy, calls, hash, created_at, settled_at, nlines, lines, ord)
), t AS (
    INSERT INTO turns (session_id, id, status, mode, failure_policy, calls, hash, created_at, settled_at)
    SELECT b.session_id, b.id, b.status, b.mode, b.failure_policy, b.calls::json, b.hash, b.created_at, b.settled_at
    FROM batch b
    WHERE b.session_found AND NOT b.answered`

	// recordOnConflict makes a taken turn id a refusal of its turn alone
	// (variants with recordSafe).
	recordOnConflict = `
    ON CONFLICT (session_id, id) DO NOTHING`

	recordSteps = `
    RETURNING session_id, id
), ins AS (
    SELECT b.ord, b.session_id, b.id, b.nlines, b.lines
    FROM batch b JOIN t ON t.session_id = b.session_id AND t.id = b.id
), seq AS (
    UPDATE sessions s SET last_seq = s.last_seq + i.nlines
    FROM ins i
    WHERE s.id = i.session_id
    RETURNING s.id, i.id AS turn_id, s.last_seq - i.nlines AS base, i.nlines, i.lines
), lines AS (
    INSERT INTO ledger_batches (session_id, turn_id, last_seq, first_seq, lines)
    SELECT q.id, q.turn_id, q.base + q.nlines, q.base + 1, q.lines::json
    FROM seq q
)`

	recordTail = `
SELECT b.ord, EXISTS (SELECT FROM ins i WHERE i.ord = b.ord), b.session_found,
    CASE WHEN b.answered THEN (SELECT true FROM turns t WHERE t.session_id = b.session_id AND t.id = b.id LIMIT 1) IS NULL
        ELSE false END
FROM batch b`
)

// recordBody inserts the recorded turns' lines and results;
// recordOutputs their kept outputs, recordWebhooks their webhooks.
var (
	recordBody     = recordSteps + batchResults("ins", "id", "")
	recordOutputs  = batchOutputs("ins")
	recordWebhooks = batchWebhooks("ins", "id")
)

// batchWebhooks is the fragment of a statement for a batch of turns that
// inserts their webhooks (webhookCols), each naming its turn by its ord in
// the CTE named calls, as in batchResults.
func batchWebhooks(calls, turnID string) string {
	return `, hooks AS (
    INSERT INTO webhooks (id, session_id, turn_id, url, event, body, next_attempt_at, created_at)
    SELECT w.id, i.session_id, i.` + turnID + `, w.url, w.event, w.body::json, w.next_attempt_at, w.created_at
    FROM unnest(@w_turn::bigint[], @w_id::text[], @w_url::text[], @w_event::text[], @w_body::text[],
        @w_next::timestamptz[], @w_created::timestamptz[])
        AS w (turn, id, url, event, body, next_attempt_at, created_at)
    JOIN ` + calls + ` i ON i.ord = w.turn
)`
}

// batchResults is the fragment of a statement for a batch of turns that
// inserts their results (@r_turn, then writeResults' columns), each row
// naming its turn by its position, ord, in the CTE named calls, which
// gives the session and (in its column turnID) the turn's id and holds only
// the turns that write; tail follows the insert (resultsUpsert, or
// nothing).
func batchResults(calls, turnID, tail string) string {
	return `, res AS (
    INSERT INTO results (session_id, turn_id, idx, call_id, name, effect, status, output,
        error_code, error_message, truncated, original_bytes, original_lines, output_id,
        attempts, started_at, finished_at, replayed_from)
    SELECT i.session_id, i.` + turnID + `, r.idx, r.call_id, r.name, r.effect, r.status, r.output::json,
        r.error_code, r.error_message, r.truncated, r.original_bytes, r.original_lines, r.output_id,
        r.attempts, r.started_at, r.finished_at, r.replayed_from
    FROM unnest(@r_turn::bigint[], @r_idx::integer[], @r_call::text[], @r_name::text[], @r_effect::text[],
        @r_status::text[], @r_output::text[], @r_err_code::text[], @r_err_msg::text[], @r_truncated::boolean[],
        @r_bytes::bigint[], @r_lines::bigint[], @r_output_id::text[], @r_attempts::integer[],
        @r_started::timestamptz[], @r_finished::timestamptz[], @r_replayed::text[])
        AS r (turn, idx, call_id, name, effect, status, output, error_code, error_message, truncated,
            original_bytes, original_lines, output_id, attempts, started_at, finished_at, replayed_from)
    JOIN ` + calls + ` i ON i.ord = r.turn` + tail + `
)`
}

// batchOutputs is the fragment of a statement for a batch of turns that
// inserts their kept outputs (@o_turn, then writeOutputs' columns), each
// row naming its turn by its position, ord, in the CTE named calls, which
// gives the session and holds only the turns that write.
func batchOutputs(calls string) string {
	return `, outs AS (
    INSERT INTO outputs (id, session_id, turn_id, call_id, content_type, data, created_at, expires_at)
    SELECT o.id, i.session_id, o.turn_id, o.call_id, o.content_type, o.data, o.created_at, o.expires_at
    FROM unnest(@o_turn::bigint[], @o_id::text[], @o_turn_id::text[], @o_call::text[], @o_type::text[],
        @o_data::bytea[], @o_created::timestamptz[], @o_expires::timestamptz[])
        AS o (turn, id, turn_id, call_id, content_type, data, created_at, expires_at)
    JOIN ` + calls + ` i ON i.ord = o.turn
)`
}

// recordSafe is the bit of recordSQL's index that adds recordOnConflict;
// without it a taken turn id fails the whole statement with a unique
// violation of turns_pkey (see execRecord).
const recordSafe = 4

// recordSQL holds the recording statement's variants: bit 0 with outputs,
// bit 1 with webhooks, bit 2 (recordSafe) with ON CONFLICT
// (testdata/statements.sql lists them).
var recordSQL = append(variants(recordHead+recordBody, recordTail, []string{recordOutputs, recordWebhooks}),
	variants(recordHead+recordOnConflict+recordBody, recordTail, []string{recordOutputs, recordWebhooks})...)

// recordParams are the recording statement's parameters, one column per
// array, for a batch of turns; rows of calls, results, outputs and webhooks
// name their turn by its 1-based position in the batch.
type recordParams struct {
	calls    callCols
	turns    turnCols
	results  batchResultCols
	outputs  batchOutputCols
	webhooks webhookCols
}

// callCols are the call ids of a batch's turns (@c_turn, @c_session,
// @c_id), checked for answers.
type callCols struct {
	turn    []int64
	session []string
	id      []string
}

// turnCols are a batch's turns (@t_session … @t_lines, in recordHead's
// order).
type turnCols struct {
	session []string
	id      []string
	status  []string
	mode    []string
	policy  []string
	calls   []string // JSON
	hash    []string
	created []time.Time
	settled []pgtype.Timestamptz // NULL: not settled
	nlines  []int64
	lines   []string // a ledger batch (sqlstore.LinesJSON)
}

// makeRecordParams returns parameters with room for batch.
func makeRecordParams(batch []*recordCall) recordParams {
	var nc, nr int
	for _, c := range batch {
		nc += len(c.rec.r.Turn.Calls)
		nr += len(c.rec.res)
	}
	n := len(batch)
	return recordParams{
		calls: callCols{turn: make([]int64, 0, nc), session: make([]string, 0, nc), id: make([]string, 0, nc)},
		turns: turnCols{
			session: make([]string, 0, n), id: make([]string, 0, n), status: make([]string, 0, n),
			mode: make([]string, 0, n), policy: make([]string, 0, n), calls: make([]string, 0, n),
			hash: make([]string, 0, n), created: make([]time.Time, 0, n), settled: make([]pgtype.Timestamptz, 0, n),
			nlines: make([]int64, 0, n), lines: make([]string, 0, n),
		},
		results: batchResultCols{turn: make([]int64, 0, nr), cols: makeResultCols(nr)},
	}
}

// add appends the rows of e, the next turn of the batch.
func (p *recordParams) add(e *encodedRecord) {
	ord := int64(len(p.turns.id) + 1)
	t := &e.r.Turn
	p.turns.session = append(p.turns.session, t.SessionID)
	p.turns.id = append(p.turns.id, t.ID)
	p.turns.status = append(p.turns.status, string(t.Status))
	p.turns.mode = append(p.turns.mode, string(t.Mode))
	p.turns.policy = append(p.turns.policy, string(t.FailurePolicy))
	p.turns.calls = append(p.turns.calls, string(e.calls))
	p.turns.hash = append(p.turns.hash, t.Hash)
	p.turns.created = append(p.turns.created, t.CreatedAt)
	p.turns.settled = append(p.turns.settled, nullTime(t.SettledAt))
	p.turns.nlines = append(p.turns.nlines, int64(len(e.r.Lines)))
	p.turns.lines = append(p.turns.lines, string(e.lines))
	for _, call := range t.Calls {
		p.calls.turn = append(p.calls.turn, ord)
		p.calls.session = append(p.calls.session, t.SessionID)
		p.calls.id = append(p.calls.id, call.ID)
	}
	for j := range e.res {
		p.results.turn = append(p.results.turn, ord)
		p.results.cols.add(&e.res[j], e.outs[j])
	}
	for j := range e.r.Outputs {
		p.outputs.turn = append(p.outputs.turn, ord)
		p.outputs.cols.add(e.key, &e.r.Outputs[j])
	}
	if w := e.r.Webhook; w != nil {
		p.webhooks.add(ord, webhookParamsOf(w))
	}
}

// variant returns the index in recordSQL of the statement p is for,
// without ON CONFLICT.
func (p *recordParams) variant() int {
	v := 0
	if len(p.outputs.turn) > 0 {
		v |= 1
	}
	if len(p.webhooks.turn) > 0 {
		v |= 2
	}
	return v
}

// args returns p in the order of recordSQL[p.variant()]'s parameters (and
// of its recordSafe twin's).
func (p *recordParams) args() []any {
	c, t := &p.calls, &p.turns
	a := make([]any, 0, 64)
	a = append(a, c.turn, c.session, c.id)
	a = append(a, t.session, t.id, t.status, t.mode, t.policy, t.calls, t.hash, t.created, t.settled, t.nlines, t.lines)
	a = p.results.appendArgs(a)
	if len(p.outputs.turn) > 0 {
		a = p.outputs.appendArgs(a)
	}
	if len(p.webhooks.turn) > 0 {
		a = p.webhooks.appendArgs(a)
	}
	return a
}
