package postgres

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/turnd/turnd/dispatch"
	"github.com/turnd/turnd/store/internal/sqlstore"
	"github.com/turnd/turnd/turn"
)

// sqlLookupTurns reads what turns about to run need, for several turns at
// once ($1, $2: their session and turn ids; $3, $4: their call ids, each
// with the 1-based position of its turn). Per turn (ord): one row per
// answered call id (see sqlAnswered for the choice among several answers),
// each carrying the session's columns and whether the turn id is taken; one
// row with NULL answer columns when none is answered; no row when the
// session does not exist.
const sqlLookupTurns = `SELECT q.ord, s.tools, s.budget, s.callback_url, s.metadata, s.created_at,
    EXISTS (SELECT FROM turns t WHERE t.session_id = q.session_id AND t.id = q.turn_id),
    a.turn_id, a.idx, a.call_id, a.name, a.effect, a.status, a.output, a.error_code, a.error_message,
    a.truncated, a.original_bytes, a.original_lines, a.output_id, a.attempts, a.started_at, a.finished_at
FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS q (session_id, turn_id, ord)
JOIN sessions s ON s.id = q.session_id
LEFT JOIN LATERAL (
    SELECT DISTINCT ON (r.call_id) r.turn_id, r.idx, r.call_id, r.name, r.effect, r.status, r.output,
        r.error_code, r.error_message, r.truncated, r.original_bytes, r.original_lines, r.output_id,
        r.attempts, r.started_at, r.finished_at
    FROM results r
    WHERE r.session_id = q.session_id
        AND r.call_id = ANY (ARRAY (SELECT c.call_id FROM unnest($3::bigint[], $4::text[]) AS c (ord, call_id) WHERE c.ord = q.ord))
        AND r.status <> 'started' AND r.status <> '' AND r.replayed_from = ''
    ORDER BY r.call_id, r.finished_at NULLS LAST, r.started_at NULLS LAST, r.turn_id, r.idx
) a ON true`

// maxLookupBatch caps the turns of one lookup statement.
const maxLookupBatch = 64

// lookupCall is one LookupTurn call.
type lookupCall struct {
	sessionID, turnID string
	callIDs           []string
	lk                turn.Lookup
	done              chan error
}

func newLookups(s *Store, par int) *group[*lookupCall, struct{}] {
	return &group[*lookupCall, struct{}]{max: maxLookupBatch, par: par, exec: s.lookupBatch}
}

// LookupTurn reads the session, whether the turn id is taken and the
// answered calls; concurrent calls share one statement (see group). See
// turn.Store.
func (s *Store) LookupTurn(ctx context.Context, sessionID, turnID string, callIDs []string) (turn.Lookup, error) {
	op := fmt.Sprintf("looking up turn %s/%s", sessionID, turnID)
	if err := ctx.Err(); err != nil {
		return turn.Lookup{}, fmt.Errorf("%s: %w", op, err)
	}
	c := &lookupCall{sessionID: sessionID, turnID: turnID, callIDs: callIDs, done: make(chan error, 1),
		lk: turn.Lookup{Answered: map[string]turn.Result{}}}
	s.lookups.do(ctx, c)
	if err := <-c.done; err != nil {
		return turn.Lookup{}, wrap(op, err)
	}
	return c.lk, nil
}

// lookupBatch runs one lookup statement for batch and answers every call.
func (s *Store) lookupBatch(ctx context.Context, batch []*lookupCall) {
	err := s.execLookup(ctx, batch)
	for _, c := range batch {
		c.done <- err
	}
}

func (s *Store) execLookup(ctx context.Context, batch []*lookupCall) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	sids, tids := make([]string, len(batch)), make([]string, len(batch))
	var cords []int64
	var cids []string
	for i, c := range batch {
		sids[i], tids[i] = c.sessionID, c.turnID
		for _, id := range c.callIDs {
			cords, cids = append(cords, int64(i+1)), append(cids, id)
		}
	}
	if cids == nil {
		cords, cids = []int64{}, []string{}
	}
	rows, err := s.groupPool.Query(ctx, sqlLookupTurns, sids, tids, cords, cids)
	if err != nil {
		return err
	}
	var (
		ord                                  int64
		row                                  sessionRow
		turnFound                            bool
		turnID, callID, name, effect, status pgtype.Text
		outputID, errCode, errMsg            pgtype.Text
		idx, attempts                        pgtype.Int4
		output                               []byte
		truncated                            pgtype.Bool
		nbytes, nlines                       pgtype.Int8
		started, finished                    pgtype.Timestamptz
	)
	dest := append([]any{&ord}, row.dest()...)
	dest = append(dest, &turnFound, &turnID, &idx, &callID, &name, &effect, &status, &output, &errCode, &errMsg,
		&truncated, &nbytes, &nlines, &outputID, &attempts, &started, &finished)
	_, err = pgx.ForEachRow(rows, dest, func() error {
		i := int(ord) - 1
		if i < 0 || i >= len(batch) {
			return fmt.Errorf("row for turn %d of %d", ord, len(batch))
		}
		lk := &batch[i].lk
		if !lk.SessionFound {
			sess, err := row.session(batch[i].sessionID)
			if err != nil {
				return err
			}
			lk.SessionFound, lk.Session, lk.TurnFound = true, sess, turnFound
		}
		if !callID.Valid {
			return nil
		}
		r := turn.Result{
			Index: int(idx.Int32), CallID: callID.String, Name: name.String,
			Effect: dispatch.Effect(effect.String), Status: turn.CallStatus(status.String), Output: output,
			Truncated: truncated.Bool, OriginalBytes: nbytes.Int64, OriginalLines: nlines.Int64,
			OutputID: outputID.String, Attempts: int(attempts.Int32),
			StartedAt: fromNullTime(started), FinishedAt: fromNullTime(finished), ReplayedFrom: turnID.String,
		}
		if errCode.Valid {
			r.Error = &turn.CallError{Code: errCode.String, Message: errMsg.String}
		}
		lk.Answered[r.CallID] = r
		return nil
	})
	return err
}

// Group commit. RecordTurn calls that arrive while a recording statement
// runs queue up; the next statement records all of them (up to
// maxRecordBatch) in one transaction (see group), so concurrent turns share
// its commit and WAL flush. Each turn still applies all or nothing: the
// statement inserts its turn only if its session exists, none of its call
// ids is answered in the session and its id is free, and writes its lines,
// results, outputs and webhook only if it did. A refused turn leaves the
// others of its batch as they are.
//
// The statement's CTEs, in order: answered lists the turns (by position,
// ord, once per answered call id) one of whose call ids ($c_turn, $c_session, $c_id: each call id with
// its turn's position and session) has an answer in the turn's session —
// the predicate of sqlAnswered, one probe of the results key (session_id,
// call_id, …) per call id, in one pass over the call ids; batch lists the
// turns with their line counts and ledger batches and whether their
// session exists and they are answered; t inserts the turns that pass; ins
// keeps those inserted; seq moves each one's session's last_seq past its
// lines (one update per session row, which also serialises the session's
// writers as every ledger write does) and returns the seq before them with
// the lines, which lines writes; the fragments write the inserted turns'
// other rows. A batch holds at most one turn of a session (the group's key,
// see newRecorder; execRecord checks it): a turn's lines are all its
// session's lines of the statement. The final SELECT says, per turn (in no
// particular order), whether it was inserted, whether its session exists
// and whether it was refused for its answered calls (and not for its turn
// id, taken before the statement began). Every part is there for a reason
// of its own: each node of the plan costs the server time at every run,
// however few its rows (the executor starts, runs and ends it), which a
// statement of one turn pays whole.
//
// The existence checks on tables are LIMIT 1 subqueries rather than
// EXISTS on purpose (the EXISTS on CTEs are fine): pgx prepares the statement, and a plan made while the tables
// were nearly empty (a new database) would otherwise turn EXISTS into a
// hash join over a sequential scan of results, kept with the cached plan
// while the table grows; a subquery with a LIMIT is not pulled up, and is
// planned as an index probe per call id at any table size.
//
// A session's turns are never in two statements running at once (see
// newRecorder), so one statement's answers are committed before the next
// statement of the session checks its calls. Writers of the session outside
// this group (the ordinary path's commits, other replicas) may commit an
// answer after the statement's snapshot was taken: the check is as good as
// reading the answers just before the write, never worse.
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

	// recordOnConflict makes a taken turn id a refusal of its turn alone;
	// see recordSafe.
	recordOnConflict = `
    ON CONFLICT (session_id, id) DO NOTHING`

	recordBody = `
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
), res AS (
    INSERT INTO results (session_id, turn_id, idx, call_id, name, effect, status, output,
        error_code, error_message, truncated, original_bytes, original_lines, output_id,
        attempts, started_at, finished_at, replayed_from)
    SELECT i.session_id, i.id, r.idx, r.call_id, r.name, r.effect, r.status, r.output::json,
        r.error_code, r.error_message, r.truncated, r.original_bytes, r.original_lines, r.output_id,
        r.attempts, r.started_at, r.finished_at, r.replayed_from
    FROM unnest(@r_turn::bigint[], @r_idx::integer[], @r_call::text[], @r_name::text[], @r_effect::text[],
        @r_status::text[], @r_output::text[], @r_err_code::text[], @r_err_msg::text[], @r_truncated::boolean[],
        @r_bytes::bigint[], @r_lines::bigint[], @r_output_id::text[], @r_attempts::integer[],
        @r_started::timestamptz[], @r_finished::timestamptz[], @r_replayed::text[])
        AS r (turn, idx, call_id, name, effect, status, output, error_code, error_message, truncated,
            original_bytes, original_lines, output_id, attempts, started_at, finished_at, replayed_from)
    JOIN ins i ON i.ord = r.turn
)`

	recordOutputs = `, outs AS (
    INSERT INTO outputs (id, session_id, turn_id, call_id, content_type, data, created_at, expires_at)
    SELECT o.id, i.session_id, o.turn_id, o.call_id, o.content_type, o.data, o.created_at, o.expires_at
    FROM unnest(@o_turn::bigint[], @o_id::text[], @o_turn_id::text[], @o_call::text[], @o_type::text[],
        @o_data::bytea[], @o_created::timestamptz[], @o_expires::timestamptz[])
        AS o (turn, id, turn_id, call_id, content_type, data, created_at, expires_at)
    JOIN ins i ON i.ord = o.turn
)`

	recordWebhooks = `, hooks AS (
    INSERT INTO webhooks (id, session_id, turn_id, url, event, body, next_attempt_at, created_at)
    SELECT w.id, i.session_id, i.id, w.url, w.event, w.body::json, w.next_attempt_at, w.created_at
    FROM unnest(@w_turn::bigint[], @w_id::text[], @w_url::text[], @w_event::text[], @w_body::text[],
        @w_next::timestamptz[], @w_created::timestamptz[])
        AS w (turn, id, url, event, body, next_attempt_at, created_at)
    JOIN ins i ON i.ord = w.turn
)`

	recordTail = `
SELECT b.ord, EXISTS (SELECT FROM ins i WHERE i.ord = b.ord), b.session_found,
    CASE WHEN b.answered THEN (SELECT true FROM turns t WHERE t.session_id = b.session_id AND t.id = b.id LIMIT 1) IS NULL
        ELSE false END
FROM batch b`
)

// recordSafe is the bit of recordSQL's index that adds recordOnConflict.
//
// Without it a taken turn id fails the whole statement with a unique
// violation of turns_pkey, and execRecord runs the batch again with it.
// The statement is cheaper without: ON CONFLICT is a speculative insertion,
// which probes turns_pkey before inserting into it, takes and releases a
// speculative insertion lock and writes one more WAL record, for every
// turn (about 5% of the server's CPU under workload 1, by perf). A taken
// id is rare on this path: a repost of a turn recorded here takes the
// ordinary path at once (turn.recentIDs). The others cost the whole batch
// (up to maxRecordBatch turns) a failed statement before the rerun: a turn
// recorded by another replica, before a restart, long enough ago that
// recentIDs forgot it, or received on the ordinary path; two posts of one
// id racing before either is recorded. Both runs share the call's 30 s
// deadline.
const recordSafe = 4

// recordSQL holds the recording statement with and without its optional
// fragments: bit 0 outputs, bit 1 webhooks, bit 2 (recordSafe) ON CONFLICT.
var recordSQL = append(variants(recordHead+recordBody, recordTail, recordOutputs, recordWebhooks),
	variants(recordHead+recordOnConflict+recordBody, recordTail, recordOutputs, recordWebhooks)...)

// recordNames name recordSQL's variants as statements prepared for
// execBinary: turnd_record_<variant>.
var recordNames = func() []string {
	names := make([]string, len(recordSQL))
	for i := range names {
		names[i] = "turnd_record_" + strconv.Itoa(i)
	}
	return names
}()

// maxRecordBatch caps the turns of one recording statement.
const maxRecordBatch = 64

// recordCall is one RecordTurn call: its encoded record and where its
// outcome goes.
type recordCall struct {
	rec  encodedRecord
	done chan error
}

func newRecorder(s *Store, par int) *group[*recordCall, string] {
	// Keyed by session: two statements running at once never touch the
	// same session row (nor the same turn key), so they cannot deadlock on
	// each other, and a session's turns of one statement need no ordering.
	return &group[*recordCall, string]{
		max: maxRecordBatch,
		par: par,
		// A second recording statement starts at 16 waiting turns, and a
		// statement that ends beside another leaves fewer than 16 to it
		// (see group). Measured under workload 1 against 8, 12 and 24.
		wait: 16,
		key:  func(c *recordCall) string { return c.rec.key.SessionID },
		exec: s.recordBatch,
	}
}

// RecordTurn records r, sharing the transaction with concurrent calls (see
// group); see turn.Store. Once r is queued the call waits for its outcome
// whatever ctx does (the statement runs with a 30 s timeout): returning
// early would leave the caller not knowing whether r was recorded.
func (s *Store) RecordTurn(ctx context.Context, r turn.Record) error {
	// The call is built in place, on the heap: encodedRecord holds a copy of
	// r, and returning it by value would take kilobytes of the caller's
	// goroutine stack (a turn's wave goroutine, which would grow its stack
	// for it on every turn).
	call := &recordCall{done: make(chan error, 1)}
	if err := call.rec.encode(&r); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", call.rec.op(), err)
	}
	s.records.do(ctx, call)
	return <-call.done
}

// recordBatch runs one recording statement for batch and answers every
// call. When the statement fails as a whole (a deadlock with another
// writer, say), each call of a batch of several is tried alone, so that one
// failure is not everyone's.
func (s *Store) recordBatch(ctx context.Context, batch []*recordCall) {
	outcomes, err := s.execRecord(ctx, batch)
	if err != nil && len(batch) > 1 {
		for _, c := range batch {
			s.recordBatch(ctx, []*recordCall{c})
		}
		return
	}
	for i, c := range batch {
		if err != nil {
			c.done <- wrap(c.rec.op(), err)
			continue
		}
		c.done <- outcomes[i]
	}
}

// execRecord runs the recording statement for batch and returns each
// call's outcome: nil, turn.ErrNotFound (no session), turn.ErrCallsAnswered
// or turn.ErrTurnExists. It runs the statement without ON CONFLICT first
// and, when a turn id of the batch was taken, again with it (see
// recordSafe).
func (s *Store) execRecord(ctx context.Context, batch []*recordCall) ([]error, error) {
	if err := distinctSessions(batch); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	args, parts := recordArgs(batch)
	outcomes, err := s.execRecordSQL(ctx, batch, args, parts)
	if turnTaken(err) {
		outcomes, err = s.execRecordSQL(ctx, batch, args, parts|recordSafe)
	}
	return outcomes, err
}

// distinctSessions checks that no two calls of batch record turns of one
// session: the statement gives each turn all of its session's seqs of the
// statement. The recorder's key keeps them apart (see newRecorder); a
// batch that breaks this is refused whole rather than written wrong.
func distinctSessions(batch []*recordCall) error {
	if len(batch) < 2 {
		return nil
	}
	seen := make(map[string]struct{}, len(batch))
	for _, c := range batch {
		id := c.rec.key.SessionID
		if _, dup := seen[id]; dup {
			return fmt.Errorf("recording turns: two turns of session %s in one statement", id)
		}
		seen[id] = struct{}{}
	}
	return nil
}

// turnTaken reports whether err is a unique violation of turns' key: a
// turn id of the batch taken before the statement, or by a writer that
// committed it meanwhile.
func turnTaken(err error) bool { return uniqueViolation(err) == "turns_pkey" }

// execRecordSQL runs recordSQL[variant] with args for batch (see
// execRecord).
func (s *Store) execRecordSQL(ctx context.Context, batch []*recordCall, args map[string]any, variant int) ([]error, error) {
	stmt := recordSQL[variant]
	outcomes := make([]error, len(batch))
	seen := 0
	outcome := func(ord int64, inserted, sessionFound, answered bool) error {
		i := int(ord) - 1
		if i < 0 || i >= len(batch) {
			return fmt.Errorf("recording turns: row for turn %d of %d", ord, len(batch))
		}
		seen++
		switch {
		case inserted:
		case !sessionFound:
			outcomes[i] = fmt.Errorf("%s: session: %w", batch[i].rec.op(), turn.ErrNotFound)
		case answered:
			outcomes[i] = fmt.Errorf("%s: %w", batch[i].rec.op(), turn.ErrCallsAnswered)
		default:
			outcomes[i] = fmt.Errorf("%s: %w", batch[i].rec.op(), turn.ErrTurnExists)
		}
		return nil
	}
	var err error
	if s.binary {
		err = s.execBinary(ctx, recordNames[variant], stmt, stmt.args(args), 4, func(v [][]byte) error {
			ord, err := binaryInt8(v[0])
			if err != nil {
				return err
			}
			var flags [3]bool
			for j := range flags {
				if flags[j], err = binaryBool(v[j+1]); err != nil {
					return err
				}
			}
			return outcome(ord, flags[0], flags[1], flags[2])
		})
	} else {
		var rows pgx.Rows
		if rows, err = s.groupPool.Query(ctx, stmt.sql, stmt.args(args)...); err != nil {
			return nil, err
		}
		var (
			ord                              int64
			inserted, sessionFound, answered bool
		)
		_, err = pgx.ForEachRow(rows, []any{&ord, &inserted, &sessionFound, &answered}, func() error {
			return outcome(ord, inserted, sessionFound, answered)
		})
	}
	if err != nil {
		return nil, err
	}
	if seen != len(batch) {
		return nil, fmt.Errorf("recording turns: %d answers for %d turns", seen, len(batch))
	}
	return outcomes, nil
}

// encodedRecord is a turn.Record checked and encoded for the recording
// statement (invalid JSON fails its own call, before it joins a batch).
type encodedRecord struct {
	key   turn.TurnKey
	r     turn.Record
	calls []byte
	lines []byte    // the lines as a ledger batch (sqlstore.LinesJSON)
	outs  []*string // result outputs
	res   []turn.Result
}

// op names the recording in errors.
func (e *encodedRecord) op() string {
	return fmt.Sprintf("recording turn %s/%s", e.key.SessionID, e.key.TurnID)
}

// encode checks r and encodes it into e.
func (e *encodedRecord) encode(r *turn.Record) error {
	if err := sqlstore.CheckRecord(r); err != nil {
		return err
	}
	e.key = turn.TurnKey{SessionID: r.Turn.SessionID, TurnID: r.Turn.ID}
	e.r = *r
	var err error
	if e.calls, err = sqlstore.Calls(r.Turn.Calls); err != nil {
		return fmt.Errorf("%s: %w", e.op(), err)
	}
	if e.lines, err = sqlstore.LinesJSON(e.key, r.Lines); err != nil {
		return fmt.Errorf("%s: %w", e.op(), err)
	}
	e.res = sqlstore.Results(r.Results)
	e.outs = make([]*string, len(e.res))
	for i, res := range e.res {
		out, err := sqlstore.OutputJSON(res.Index, res.Output)
		if err != nil {
			return fmt.Errorf("%s: %w", e.op(), err)
		}
		e.outs[i] = nullText(out)
	}
	return nil
}

// recordArgs lays batch out as the recording statement's arrays (rows of
// lines, results, outputs and webhooks name their turn by its 1-based
// position) and says which optional fragments the statement needs.
func recordArgs(batch []*recordCall) (map[string]any, int) {
	n := len(batch)
	var nr int
	for _, c := range batch {
		nr += len(c.rec.res)
	}
	tSession, tID, tStatus, tMode, tPolicy := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	tCalls, tHash := make([]string, n), make([]string, n)
	tCreated, tSettled := make([]pgtype.Timestamptz, n), make([]pgtype.Timestamptz, n)
	tLines := make([]int64, n)

	tBatch := make([]string, n)
	var nc int
	for _, c := range batch {
		nc += len(c.rec.r.Turn.Calls)
	}
	cTurn, cSession, cID := make([]int64, 0, nc), make([]string, 0, nc), make([]string, 0, nc)

	rTurn := make([]int64, 0, nr)
	rIdx, rAttempts := make([]int32, 0, nr), make([]int32, 0, nr)
	rCall, rName, rEffect, rStatus := make([]string, 0, nr), make([]string, 0, nr), make([]string, 0, nr), make([]string, 0, nr)
	rOutput, rCode, rMsg := make([]*string, 0, nr), make([]*string, 0, nr), make([]*string, 0, nr)
	rTruncated := make([]bool, 0, nr)
	rBytes, rLines := make([]int64, 0, nr), make([]int64, 0, nr)
	rOutputID, rReplayed := make([]string, 0, nr), make([]string, 0, nr)
	rStarted, rFinished := make([]pgtype.Timestamptz, 0, nr), make([]pgtype.Timestamptz, 0, nr)

	var oTurn []int64
	var oID, oTurnID, oCall, oType []string
	var oData [][]byte
	var oCreated, oExpires []pgtype.Timestamptz
	var wTurn []int64
	var wID, wURL, wEvent, wBody []string
	var wNext, wCreated []pgtype.Timestamptz

	for i, c := range batch {
		e, ord := &c.rec, int64(i+1)
		t := e.r.Turn
		tSession[i], tID[i], tStatus[i], tMode[i], tPolicy[i] = t.SessionID, t.ID, string(t.Status), string(t.Mode), string(t.FailurePolicy)
		tCalls[i], tHash[i] = string(e.calls), t.Hash
		tCreated[i], tSettled[i] = pgtype.Timestamptz{Time: t.CreatedAt, Valid: true}, nullTime(t.SettledAt)
		tLines[i] = int64(len(e.r.Lines))
		tBatch[i] = string(e.lines)
		for _, call := range t.Calls {
			cTurn, cSession, cID = append(cTurn, ord), append(cSession, t.SessionID), append(cID, call.ID)
		}
		for j, r := range e.res {
			rTurn = append(rTurn, ord)
			rIdx, rAttempts = append(rIdx, int32(r.Index)), append(rAttempts, int32(r.Attempts))
			rCall, rName, rEffect, rStatus = append(rCall, r.CallID), append(rName, r.Name), append(rEffect, string(r.Effect)), append(rStatus, string(r.Status))
			rOutput = append(rOutput, e.outs[j])
			var code, msg *string
			if r.Error != nil {
				code, msg = &r.Error.Code, &r.Error.Message
			}
			rCode, rMsg = append(rCode, code), append(rMsg, msg)
			rTruncated, rBytes, rLines = append(rTruncated, r.Truncated), append(rBytes, r.OriginalBytes), append(rLines, r.OriginalLines)
			rOutputID, rReplayed = append(rOutputID, r.OutputID), append(rReplayed, r.ReplayedFrom)
			rStarted, rFinished = append(rStarted, nullTime(r.StartedAt)), append(rFinished, nullTime(r.FinishedAt))
		}
		for _, o := range e.r.Outputs {
			data := o.Data
			if data == nil {
				data = []byte{} // data is NOT NULL; nil means empty
			}
			oTurn, oID, oTurnID = append(oTurn, ord), append(oID, o.ID), append(oTurnID, sqlstore.OutputTurn(o, e.key))
			oCall, oType, oData = append(oCall, o.CallID), append(oType, o.ContentType), append(oData, data)
			oCreated, oExpires = append(oCreated, pgtype.Timestamptz{Time: o.CreatedAt, Valid: true}), append(oExpires, nullTime(o.ExpiresAt))
		}
		if w := e.r.Webhook; w != nil {
			wTurn, wID, wURL, wEvent, wBody = append(wTurn, ord), append(wID, w.ID), append(wURL, w.URL), append(wEvent, w.Event), append(wBody, string(w.Body))
			wNext, wCreated = append(wNext, pgtype.Timestamptz{Time: sqlstore.WebhookDue(w), Valid: true}), append(wCreated, pgtype.Timestamptz{Time: w.CreatedAt, Valid: true})
		}
	}
	args := map[string]any{
		"t_session": tSession, "t_id": tID, "t_status": tStatus, "t_mode": tMode, "t_policy": tPolicy,
		"t_calls": tCalls, "t_hash": tHash, "t_created": tCreated, "t_settled": tSettled, "t_nlines": tLines,
		"t_lines": tBatch, "c_turn": cTurn, "c_session": cSession, "c_id": cID,
		"r_turn": rTurn, "r_idx": rIdx, "r_call": rCall, "r_name": rName, "r_effect": rEffect, "r_status": rStatus,
		"r_output": rOutput, "r_err_code": rCode, "r_err_msg": rMsg, "r_truncated": rTruncated, "r_bytes": rBytes,
		"r_lines": rLines, "r_output_id": rOutputID, "r_attempts": rAttempts, "r_started": rStarted,
		"r_finished": rFinished, "r_replayed": rReplayed,
	}
	parts := 0
	if len(oTurn) > 0 {
		parts |= 1
		args["o_turn"], args["o_id"], args["o_turn_id"], args["o_call"] = oTurn, oID, oTurnID, oCall
		args["o_type"], args["o_data"], args["o_created"], args["o_expires"] = oType, oData, oCreated, oExpires
	}
	if len(wTurn) > 0 {
		parts |= 2
		args["w_turn"], args["w_id"], args["w_url"], args["w_event"] = wTurn, wID, wURL, wEvent
		args["w_body"], args["w_next"], args["w_created"] = wBody, wNext, wCreated
	}
	return args, parts
}
