package postgres

import (
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/turnd/turnd/store/internal/sqlstore"
	"github.com/turnd/turnd/turn"
)

// The write statements — Commit (turns.go), Resolve's resolving statement
// and RecordLate's (completions.go) — are a head defining a CTE
// named gate, the fragments below (and writeWebhook, commitParks) and a
// tail; every fragment writes only when gate returned a row. Each
// statement's variants are compiled once (writeVariants) and listed in
// testdata/statements.sql; ARCHITECTURE.md says why they are built so.
const (
	// writeLines moves the session's last_seq past the lines and writes
	// them as one ledger batch taking the seqs up to the new value.
	writeLines = `, seq AS (
    UPDATE sessions SET last_seq = last_seq + @n::bigint
    WHERE id = @session AND EXISTS (SELECT FROM gate)
    RETURNING last_seq
), lines AS (
    INSERT INTO ledger_batches (session_id, turn_id, last_seq, first_seq, lines)
    SELECT @session, @turn, seq.last_seq, seq.last_seq - @n::bigint + 1, @l_lines::json
    FROM seq
)`

	// writeResults upserts the turn's results.
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
    WHERE EXISTS (SELECT FROM gate)` + resultsUpsert + `
)`

	// resultsUpsert makes an insert of results replace the rows they
	// already have.
	resultsUpsert = `
    ON CONFLICT (session_id, call_id, turn_id, idx) DO UPDATE SET
        name = excluded.name, effect = excluded.effect,
        status = excluded.status, output = excluded.output, error_code = excluded.error_code,
        error_message = excluded.error_message, truncated = excluded.truncated,
        original_bytes = excluded.original_bytes, original_lines = excluded.original_lines,
        output_id = excluded.output_id, attempts = excluded.attempts,
        started_at = excluded.started_at, finished_at = excluded.finished_at,
        replayed_from = excluded.replayed_from`

	// writeOutputs inserts kept outputs.
	writeOutputs = `, outs AS (
    INSERT INTO outputs (id, session_id, turn_id, call_id, content_type, data, created_at, expires_at)
    SELECT o.id, @session, o.turn_id, o.call_id, o.content_type, o.data, o.created_at, o.expires_at
    FROM unnest(@o_id::text[], @o_turn_id::text[], @o_call::text[], @o_type::text[], @o_data::bytea[],
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
	partWebhook // Commit only; the resolving statement numbers its parts itself
)

// writeVariants compiles a write statement's variants (see variants) with
// @session and @turn as $1 and $2, so that every write statement's
// arguments start with its turn's key (see writeKeyArgs).
func writeVariants(head, tail string, parts ...string) []statement {
	return variants(head, tail, parts, "session", "turn")
}

// writeKeyArgs starts a write statement's arguments: @session, @turn.
func writeKeyArgs(k turn.TurnKey, n int) []any {
	return append(make([]any, 0, n), k.SessionID, k.TurnID)
}

// linesParams are writeLines' parameters: @n, the number of lines, and
// @l_lines, the lines as a ledger batch (sqlstore.LinesJSON).
type linesParams struct {
	n     int64
	lines string
}

// set encodes lines written under k; none leaves p empty.
func (p *linesParams) set(k turn.TurnKey, lines []turn.Line) error {
	if len(lines) == 0 {
		*p = linesParams{}
		return nil
	}
	batch, err := sqlstore.LinesJSON(k, lines)
	if err != nil {
		return err
	}
	*p = linesParams{n: int64(len(lines)), lines: string(batch)}
	return nil
}

func (p *linesParams) appendArgs(a []any) []any { return append(a, p.n, p.lines) }

// resultCols are the columns of the results a statement writes, one per
// parameter of writeResults (@r_idx … @r_replayed), in its order.
type resultCols struct {
	idx       []int32
	call      []string
	name      []string
	effect    []string
	status    []string
	output    []*string // NULL: no output
	errCode   []*string // NULL: no error
	errMsg    []*string
	truncated []bool
	bytes     []int64
	lines     []int64
	outputID  []string
	attempts  []int32
	started   []pgtype.Timestamptz
	finished  []pgtype.Timestamptz
	replayed  []string
}

// makeResultCols returns columns with room for n rows.
func makeResultCols(n int) resultCols {
	return resultCols{
		idx: make([]int32, 0, n), call: make([]string, 0, n), name: make([]string, 0, n),
		effect: make([]string, 0, n), status: make([]string, 0, n), output: make([]*string, 0, n),
		errCode: make([]*string, 0, n), errMsg: make([]*string, 0, n), truncated: make([]bool, 0, n),
		bytes: make([]int64, 0, n), lines: make([]int64, 0, n), outputID: make([]string, 0, n),
		attempts: make([]int32, 0, n), started: make([]pgtype.Timestamptz, 0, n),
		finished: make([]pgtype.Timestamptz, 0, n), replayed: make([]string, 0, n),
	}
}

// add appends r, whose output is encoded as output (sqlstore.OutputJSON).
func (c *resultCols) add(r *turn.Result, output *string) {
	var code, msg *string
	if r.Error != nil {
		code, msg = &r.Error.Code, &r.Error.Message
	}
	c.idx = append(c.idx, int32(r.Index))
	c.call = append(c.call, r.CallID)
	c.name = append(c.name, r.Name)
	c.effect = append(c.effect, string(r.Effect))
	c.status = append(c.status, string(r.Status))
	c.output = append(c.output, output)
	c.errCode = append(c.errCode, code)
	c.errMsg = append(c.errMsg, msg)
	c.truncated = append(c.truncated, r.Truncated)
	c.bytes = append(c.bytes, r.OriginalBytes)
	c.lines = append(c.lines, r.OriginalLines)
	c.outputID = append(c.outputID, r.OutputID)
	c.attempts = append(c.attempts, int32(r.Attempts))
	c.started = append(c.started, nullTime(r.StartedAt))
	c.finished = append(c.finished, nullTime(r.FinishedAt))
	c.replayed = append(c.replayed, r.ReplayedFrom)
}

func (c *resultCols) appendArgs(a []any) []any {
	return append(a, c.idx, c.call, c.name, c.effect, c.status, c.output, c.errCode, c.errMsg, c.truncated,
		c.bytes, c.lines, c.outputID, c.attempts, c.started, c.finished, c.replayed)
}

// set encodes results into c (emptied first). Results with the same
// Index collapse to the last of them (one statement cannot upsert a row
// twice).
func (c *resultCols) set(results []turn.Result) error {
	rs := sqlstore.Results(results)
	*c = makeResultCols(len(rs))
	for i := range rs {
		out, err := sqlstore.OutputJSON(rs[i].Index, rs[i].Output)
		if err != nil {
			return err
		}
		c.add(&rs[i], nullText(out))
	}
	return nil
}

// outputCols are the columns of the outputs a statement keeps, one per
// parameter of writeOutputs (@o_id … @o_expires), in its order.
type outputCols struct {
	id          []string
	turnID      []string
	call        []string
	contentType []string
	data        [][]byte
	created     []time.Time
	expires     []pgtype.Timestamptz // NULL: never
}

// add appends o, kept by the turn k.
func (c *outputCols) add(k turn.TurnKey, o *turn.Output) {
	data := o.Data
	if data == nil {
		data = []byte{} // data is NOT NULL; nil means empty
	}
	c.id = append(c.id, o.ID)
	c.turnID = append(c.turnID, sqlstore.OutputTurn(*o, k))
	c.call = append(c.call, o.CallID)
	c.contentType = append(c.contentType, o.ContentType)
	c.data = append(c.data, data)
	c.created = append(c.created, o.CreatedAt)
	c.expires = append(c.expires, nullTime(o.ExpiresAt))
}

func (c *outputCols) len() int { return len(c.id) }

func (c *outputCols) appendArgs(a []any) []any {
	return append(a, c.id, c.turnID, c.call, c.contentType, c.data, c.created, c.expires)
}

// set encodes outputs kept by the turn k into c (emptied first).
func (c *outputCols) set(k turn.TurnKey, outputs []turn.Output) {
	*c = outputCols{}
	for i := range outputs {
		c.add(k, &outputs[i])
	}
}

// webhookParams are writeWebhook's parameters (@w_id … @w_created, in its
// order): one webhook, written with a settlement.
type webhookParams struct {
	id, url, event, body string
	next, created        time.Time
}

func (p *webhookParams) appendArgs(a []any) []any {
	return append(a, p.id, p.url, p.event, p.body, p.next, p.created)
}

// The columns of the statements for a batch of turns (the recording
// statement, the set-based resolving one): each row names its turn by its
// 1-based position in the batch (@r_turn, @o_turn, @w_turn), then has the
// columns of the one-turn fragments.

// batchCols are a batch's rows of one kind: @r_turn or @o_turn, each
// row's turn by its position, then the kind's one-turn columns (cols).
type batchCols[C any, P rowCols[C]] struct {
	turn []int64
	cols C
}

// rowCols are the columns of one turn's rows of a kind (resultCols,
// outputCols), as batchCols uses them.
type rowCols[C any] interface {
	*C
	len() int
	appendCols(*C)
	appendArgs([]any) []any
}

// batchResultCols are a batch's results (writeResults' columns).
type batchResultCols = batchCols[resultCols, *resultCols]

// batchOutputCols are a batch's kept outputs (writeOutputs' columns).
type batchOutputCols = batchCols[outputCols, *outputCols]

// addAll appends rows, the rows of the batch's turn ord.
func (c *batchCols[C, P]) addAll(ord int64, rows *C) {
	for range P(rows).len() {
		c.turn = append(c.turn, ord)
	}
	P(&c.cols).appendCols(rows)
}

func (c *batchCols[C, P]) appendArgs(a []any) []any {
	return P(&c.cols).appendArgs(append(a, c.turn))
}

// webhookCols are a batch's webhooks (@w_turn … @w_created).
type webhookCols struct {
	turn    []int64
	id      []string
	url     []string
	event   []string
	body    []string
	next    []time.Time
	created []time.Time
}

// add appends w, the webhook of the batch's turn ord.
func (c *webhookCols) add(ord int64, w webhookParams) {
	c.turn, c.id, c.url = append(c.turn, ord), append(c.id, w.id), append(c.url, w.url)
	c.event, c.body = append(c.event, w.event), append(c.body, w.body)
	c.next, c.created = append(c.next, w.next), append(c.created, w.created)
}

func (c *webhookCols) appendArgs(a []any) []any {
	return append(a, c.turn, c.id, c.url, c.event, c.body, c.next, c.created)
}

// writes are the rows of one turn that a write statement writes with its
// fragments writeLines, writeResults and writeOutputs; a fragment without
// rows is left out of the statement (see parts).
type writes struct {
	lines   linesParams
	results resultCols
	outputs outputCols
}

// set encodes the lines, results and outputs of a write under k.
func (w *writes) set(k turn.TurnKey, lines []turn.Line, results []turn.Result, outputs []turn.Output) error {
	if err := w.lines.set(k, lines); err != nil {
		return err
	}
	if err := w.results.set(results); err != nil {
		return err
	}
	w.outputs.set(k, outputs)
	return nil
}

// parts returns the fragment bits (partLines, partResults, partOutputs) of
// the fragments that have rows.
func (w *writes) parts() int {
	parts := 0
	if w.lines.n > 0 {
		parts |= partLines
	}
	if len(w.results.idx) > 0 {
		parts |= partResults
	}
	if w.outputs.len() > 0 {
		parts |= partOutputs
	}
	return parts
}

// appendArgs appends the parameters of the fragments parts returns.
func (w *writes) appendArgs(a []any) []any {
	parts := w.parts()
	if parts&partLines != 0 {
		a = w.lines.appendArgs(a)
	}
	if parts&partResults != 0 {
		a = w.results.appendArgs(a)
	}
	if parts&partOutputs != 0 {
		a = w.outputs.appendArgs(a)
	}
	return a
}

// resolveParams are the parameters of Resolve's resolving statement
// (resolveSQL): the head's, then its writes' and its webhook's.
type resolveParams struct {
	key         turn.TurnKey
	now         time.Time
	completions completionCols
	status      string
	settled     pgtype.Timestamptz // NULL for a status that is not settled
	// lines are the items' lines; all the same followed by the settling
	// lines, written instead when the statement settles the turn.
	lines, all linesParams
	results    resultCols
	outputs    outputCols
	webhook    *webhookParams // nil: none
}

// completionCols are the completions a resolution resolves, one column per
// array of resolveHead (@c_key … @c_hash), in its order.
type completionCols struct {
	key     [][]byte
	expect  []string
	status  []string
	payload []*string // NULL: no payload
	hash    [][]byte
}

func (c *completionCols) add(it *turn.Resolution, payload *string) {
	c.key = append(c.key, it.KeyHash[:])
	c.expect = append(c.expect, string(it.Expect))
	c.status = append(c.status, string(it.Status))
	c.payload = append(c.payload, payload)
	c.hash = append(c.hash, sqlstore.Hash(it.PayloadHash))
}

func (p *resolveParams) variant() int {
	v := 0
	if len(p.results.idx) > 0 {
		v |= resolveResults
	}
	if p.outputs.len() > 0 {
		v |= resolveOutputs
	}
	if p.webhook != nil {
		v |= resolveHook
	}
	return v
}

func (p *resolveParams) args() []any {
	c := &p.completions
	a := append(writeKeyArgs(p.key, 64), c.key, c.expect, c.status, c.payload, c.hash, p.now, p.status, p.settled,
		p.all.n, p.lines.n, p.all.lines, p.lines.lines)
	if len(p.results.idx) > 0 {
		a = p.results.appendArgs(a)
	}
	if p.outputs.len() > 0 {
		a = p.outputs.appendArgs(a)
	}
	if p.webhook != nil {
		a = p.webhook.appendArgs(a)
	}
	return a
}

// lateParams are the parameters of RecordLate's recording statement
// (recordLateSQL): the head's, the line's and the outputs'.
type lateParams struct {
	key           turn.TurnKey
	hash, keyHash []byte
	lines         linesParams
	outputs       outputCols
}

func (p *lateParams) variant() int {
	if p.outputs.len() > 0 {
		return 1
	}
	return 0
}

func (p *lateParams) args() []any {
	a := p.lines.appendArgs(append(writeKeyArgs(p.key, 16), p.hash, p.keyHash))
	if p.outputs.len() > 0 {
		a = p.outputs.appendArgs(a)
	}
	return a
}

func (c *resultCols) len() int { return len(c.idx) }

// appendCols appends the rows of o.
func (c *resultCols) appendCols(o *resultCols) {
	c.idx = append(c.idx, o.idx...)
	c.call = append(c.call, o.call...)
	c.name = append(c.name, o.name...)
	c.effect = append(c.effect, o.effect...)
	c.status = append(c.status, o.status...)
	c.output = append(c.output, o.output...)
	c.errCode = append(c.errCode, o.errCode...)
	c.errMsg = append(c.errMsg, o.errMsg...)
	c.truncated = append(c.truncated, o.truncated...)
	c.bytes = append(c.bytes, o.bytes...)
	c.lines = append(c.lines, o.lines...)
	c.outputID = append(c.outputID, o.outputID...)
	c.attempts = append(c.attempts, o.attempts...)
	c.started = append(c.started, o.started...)
	c.finished = append(c.finished, o.finished...)
	c.replayed = append(c.replayed, o.replayed...)
}

// appendCols appends the rows of o.
func (c *outputCols) appendCols(o *outputCols) {
	c.id = append(c.id, o.id...)
	c.turnID = append(c.turnID, o.turnID...)
	c.call = append(c.call, o.call...)
	c.contentType = append(c.contentType, o.contentType...)
	c.data = append(c.data, o.data...)
	c.created = append(c.created, o.created...)
	c.expires = append(c.expires, o.expires...)
}
