package postgres

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

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
const sqlLookupTurns = `SELECT q.ord, s.tools, s.budget, s.callback_url, s.metadata, s.created_at, s.approval,
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

// lookupParams are sqlLookupTurns' parameters for a batch of lookups: each
// lookup's session and turn ids ($1, $2) and each of its call ids with its
// 1-based position ($3, $4).
type lookupParams struct {
	session, turn []string
	callTurn      []int64
	callID        []string
}

// add appends c, the next lookup of the batch.
func (p *lookupParams) add(c *lookupCall) {
	p.session, p.turn = append(p.session, c.sessionID), append(p.turn, c.turnID)
	for _, id := range c.callIDs {
		p.callTurn, p.callID = append(p.callTurn, int64(len(p.session))), append(p.callID, id)
	}
}

func (p *lookupParams) args() []any {
	if p.callID == nil { // an array, not NULL
		return []any{p.session, p.turn, []int64{}, []string{}}
	}
	return []any{p.session, p.turn, p.callTurn, p.callID}
}

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
	if s.sharded {
		if err := s.lookupOne(ctx, c); err != nil {
			return turn.Lookup{}, wrap(op, err)
		}
		return c.lk, nil
	}
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
	var p lookupParams
	for _, c := range batch {
		p.add(c)
	}
	return s.scanLookups(ctx, batch, s.groupPool, sqlLookupTurns, p.args()...)
}

// scanLookups runs query, sqlLookupTurns or a statement of its rows, on
// pool and answers batch's lookups from its rows.
func (s *Store) scanLookups(ctx context.Context, batch []*lookupCall, pool *pgxpool.Pool, query string, args ...any) error {
	rows, err := pool.Query(ctx, query, args...)
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
	if s.sharded {
		return s.recordOne(ctx, r)
	}
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
// call; a batch that fails as a whole is tried call by call (eachAlone).
func (s *Store) recordBatch(ctx context.Context, batch []*recordCall) {
	outcomes, err := s.execRecord(ctx, batch)
	if eachAlone(ctx, batch, err, s.recordBatch) {
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
	if err := distinctSessions(batch, func(c *recordCall) string { return c.rec.key.SessionID }); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	p := makeRecordParams(batch)
	for _, c := range batch {
		p.add(&c.rec)
	}
	args := p.args()
	outcomes, err := s.execRecordSQL(ctx, batch, p.variant(), args)
	if turnTaken(err) {
		outcomes, err = s.execRecordSQL(ctx, batch, p.variant()|recordSafe, args)
	}
	return outcomes, err
}

// distinctSessions checks that no two calls of batch (whose sessions
// session gives) are of one session: the group statements give each call
// all of its session's seqs of the statement. The groups' keys keep them
// apart (see newRecorder, newResolver); a batch that breaks this is
// refused whole rather than written wrong.
func distinctSessions[C any](batch []C, session func(C) string) error {
	if len(batch) < 2 {
		return nil
	}
	seen := make(map[string]struct{}, len(batch))
	for _, c := range batch {
		id := session(c)
		if _, dup := seen[id]; dup {
			return fmt.Errorf("two calls of session %s in one statement", id)
		}
		seen[id] = struct{}{}
	}
	return nil
}

// turnTaken reports whether err is a unique violation of turns' key: a
// turn id of the batch taken before the statement, or by a writer that
// committed it meanwhile.
func turnTaken(err error) bool { return uniqueViolation(err) == "turns_pkey" }

// recordNames name recordSQL's variants as statements prepared for
// execBinary: turnd_record_<variant>.
var recordNames = func() []string {
	names := make([]string, len(recordSQL))
	for i := range names {
		names[i] = "turnd_record_" + strconv.Itoa(i)
	}
	return names
}()

// execRecordSQL runs recordSQL[variant] with args for batch (see
// execRecord), through execBinary when the pool prepares statements.
func (s *Store) execRecordSQL(ctx context.Context, batch []*recordCall, variant int, args []any) ([]error, error) {
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
		err = s.execBinary(ctx, recordNames[variant], stmt, args, 4, func(v [][]byte) error {
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
		if rows, err = s.groupPool.Query(ctx, stmt.sql, args...); err != nil {
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
