package postgres

import (
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/turnd/turnd/store/internal/sqlstore"
	"github.com/turnd/turnd/turn"
)

// The write statements (Commit, Resolve, the settling of a turn, RecordLate)
// are assembled from a head, the fragments below and a tail. The head
// defines a CTE named gate: every fragment writes its rows only when gate
// returned a row, so one condition decides for the whole statement (in
// Commit the lease check, in Resolve the completions update). A statement
// includes only the fragments it has rows for, since every INSERT opens its
// table and indexes even when it has nothing to write; each combination is
// assembled and rewritten to positional parameters once, at start-up, and
// prepared once per connection (pgx caches statements by their text).
//
// Data-modifying CTEs all run to completion whether or not the final SELECT
// reads them.
const (
	// Seqs: bump last_seq by the line count; the lines take the seqs up to
	// the new value in order. The session row's lock serialises the
	// session's writers and a rollback returns the seqs: no gaps.
	writeLines = `, seq AS (
    UPDATE sessions SET last_seq = last_seq + @n::bigint
    WHERE id = @session AND EXISTS (SELECT FROM gate)
    RETURNING last_seq
), lines AS (
    INSERT INTO ledger_batches (session_id, turn_id, last_seq, first_seq, lines)
    SELECT @session, @turn, seq.last_seq, seq.last_seq - @n::bigint + 1, @l_lines::json
    FROM seq
)`

	writeResults = `, res AS (
    INSERT INTO results (session_id, turn_id, idx, call_id, name, effect, status, output,
        error_code, error_message, truncated, original_bytes, original_lines, output_id,
        attempts, started_at, finished_at, replayed_from)
    SELECT @session, @turn, r.idx, r.call_id, r.name, r.effect, r.status, r.output::json,
        r.error_code, r.error_message, r.truncated, r.original_bytes, r.original_lines, r.output_id,
        r.attempts, r.started_at, r.finished_at, r.replayed_from
    FROM unnest(@r_idx::integer[], @r_call::text[], @r_name::text[], @r_effect::text[], @r_status::text[],
        @r_output::text[], @r_err_code::text[], @r_err_msg::text[], @r_truncated::boolean[],
        @r_bytes::bigint[], @r_lines::bigint[], @r_output_id::text[], @r_attempts::integer[],
        @r_started::timestamptz[], @r_finished::timestamptz[], @r_replayed::text[])
        AS r (idx, call_id, name, effect, status, output, error_code, error_message, truncated,
            original_bytes, original_lines, output_id, attempts, started_at, finished_at, replayed_from)
    WHERE EXISTS (SELECT FROM gate)
    ON CONFLICT (session_id, call_id, turn_id, idx) DO UPDATE SET
        name = excluded.name, effect = excluded.effect,
        status = excluded.status, output = excluded.output, error_code = excluded.error_code,
        error_message = excluded.error_message, truncated = excluded.truncated,
        original_bytes = excluded.original_bytes, original_lines = excluded.original_lines,
        output_id = excluded.output_id, attempts = excluded.attempts,
        started_at = excluded.started_at, finished_at = excluded.finished_at,
        replayed_from = excluded.replayed_from
)`

	writeOutputs = `, outs AS (
    INSERT INTO outputs (id, session_id, turn_id, call_id, content_type, data, created_at, expires_at)
    SELECT o.id, @session, o.turn_id, o.call_id, o.content_type, o.data, o.created_at, o.expires_at
    FROM unnest(@o_id::text[], @o_turn::text[], @o_call::text[], @o_type::text[], @o_data::bytea[],
        @o_created::timestamptz[], @o_expires::timestamptz[])
        AS o (id, turn_id, call_id, content_type, data, created_at, expires_at)
    WHERE EXISTS (SELECT FROM gate)
)`
)

// Fragment bits: a statement variant's index has bit partX set when it
// includes fragment X. Variants take the fragments in this order.
const (
	partLines = 1 << iota
	partResults
	partOutputs
	partParks   // Commit only
	partWebhook // Commit only; the settling statement numbers its parts itself
)

// variants returns head + tail with every combination of parts between
// them: variant i includes parts[j] when bit j of i is set.
func variants(head, tail string, parts ...string) []positional {
	stmts := make([]positional, 1<<len(parts))
	for i := range stmts {
		sql := head
		for j, p := range parts {
			if i&(1<<j) != 0 {
				sql += p
			}
		}
		stmts[i] = toPositional(sql + tail)
	}
	return stmts
}

// linesArgs encodes lines written under k as the arguments of writeLines;
// it returns partLines, or 0 when there are none.
func linesArgs(args map[string]any, k turn.TurnKey, lines []turn.Line) (int, error) {
	n := len(lines)
	if n == 0 {
		return 0, nil
	}
	batch, err := sqlstore.LinesJSON(k, lines)
	if err != nil {
		return 0, err
	}
	args["n"], args["l_lines"] = int64(n), string(batch)
	return partLines, nil
}

// resultsArgs encodes results as the arguments of writeResults; it returns
// partResults, or 0 when there are none. Results with the same Index
// collapse to the last of them (one statement cannot upsert a row twice).
func resultsArgs(args map[string]any, results []turn.Result) (int, error) {
	rs := sqlstore.Results(results)
	m := len(rs)
	if m == 0 {
		return 0, nil
	}
	idx, attempts := make([]int32, m), make([]int32, m)
	calls, names, effects, statuses := make([]string, m), make([]string, m), make([]string, m), make([]string, m)
	outputs, codes, msgs := make([]*string, m), make([]*string, m), make([]*string, m)
	truncated := make([]bool, m)
	nbytes, nlines := make([]int64, m), make([]int64, m)
	outputIDs, replayed := make([]string, m), make([]string, m)
	started, finished := make([]pgtype.Timestamptz, m), make([]pgtype.Timestamptz, m)
	for i, r := range rs {
		out, err := sqlstore.OutputJSON(r.Index, r.Output)
		if err != nil {
			return 0, err
		}
		idx[i], attempts[i] = int32(r.Index), int32(r.Attempts)
		calls[i], names[i], effects[i], statuses[i] = r.CallID, r.Name, string(r.Effect), string(r.Status)
		outputs[i] = nullText(out)
		if r.Error != nil {
			codes[i], msgs[i] = &r.Error.Code, &r.Error.Message
		}
		truncated[i], nbytes[i], nlines[i] = r.Truncated, r.OriginalBytes, r.OriginalLines
		outputIDs[i], replayed[i] = r.OutputID, r.ReplayedFrom
		started[i], finished[i] = nullTime(r.StartedAt), nullTime(r.FinishedAt)
	}
	args["r_idx"], args["r_call"], args["r_name"], args["r_effect"], args["r_status"] = idx, calls, names, effects, statuses
	args["r_output"], args["r_err_code"], args["r_err_msg"], args["r_truncated"] = outputs, codes, msgs, truncated
	args["r_bytes"], args["r_lines"], args["r_output_id"], args["r_attempts"] = nbytes, nlines, outputIDs, attempts
	args["r_started"], args["r_finished"], args["r_replayed"] = started, finished, replayed
	return partResults, nil
}

// outputsArgs encodes outputs written under k as the arguments of
// writeOutputs; it returns partOutputs, or 0 when there are none.
func outputsArgs(args map[string]any, k turn.TurnKey, outputs []turn.Output) int {
	n := len(outputs)
	if n == 0 {
		return 0
	}
	ids, turns, calls, types := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	data := make([][]byte, n)
	created, expires := make([]pgtype.Timestamptz, n), make([]pgtype.Timestamptz, n)
	for i, o := range outputs {
		ids[i], turns[i], calls[i], types[i] = o.ID, sqlstore.OutputTurn(o, k), o.CallID, o.ContentType
		data[i] = o.Data
		if data[i] == nil {
			data[i] = []byte{} // data is NOT NULL; nil means empty
		}
		created[i], expires[i] = pgtype.Timestamptz{Time: o.CreatedAt, Valid: true}, nullTime(o.ExpiresAt)
	}
	args["o_id"], args["o_turn"], args["o_call"], args["o_type"] = ids, turns, calls, types
	args["o_data"], args["o_created"], args["o_expires"] = data, created, expires
	return partOutputs
}

// writeArgs encodes the lines, results and outputs of a write under k and
// returns the parts the statement needs.
func writeArgs(args map[string]any, k turn.TurnKey, lines []turn.Line, results []turn.Result, outputs []turn.Output) (int, error) {
	pl, err := linesArgs(args, k, lines)
	if err != nil {
		return 0, err
	}
	pr, err := resultsArgs(args, results)
	if err != nil {
		return 0, err
	}
	return pl | pr | outputsArgs(args, k, outputs), nil
}
