package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/turnd/turnd/store/internal/sqlstore"
	"github.com/turnd/turnd/turn"
)

// Resolve's group commit: calls that arrive while a resolution runs are
// resolved together, next, in one transaction sent as one pipeline (see
// group), each call's statements as it would send them alone, so that
// concurrent deliveries share a round trip, a commit and its WAL flush.
// ARCHITECTURE.md, "store/postgres: statements", Resolve, says why.

// maxResolveBatch is the most resolutions one transaction takes.
const maxResolveBatch = 32

// resolveCall is one Resolve in the resolver: its batch encoded, and what
// its statements answered.
type resolveCall struct {
	b    *turn.ResolveBatch
	p    resolveParams
	done chan error
	// passed: the resolving statement's gate passed; settled: it settled
	// the turn; statuses: the locked completions' (nil: no turn).
	passed, settled bool
	statuses        map[[32]byte]turn.CompletionStatus
}

func newResolver(s *Store, par int) *group[*resolveCall, string] {
	// Keyed by session, as the recorder: two transactions running at once
	// never lock the same turn or session row, and a transaction's turns
	// are of as many sessions.
	return &group[*resolveCall, string]{
		max: maxResolveBatch,
		par: par,
		// A second transaction starts beside a running one at 8 waiting
		// calls, as fewer share too little of its commit.
		wait: 8,
		key:  func(c *resolveCall) string { return c.b.Key.SessionID },
		exec: s.resolveBatch,
	}
}

// Resolve applies b in one transaction, shared with concurrent calls (see
// group); see turn.CompletionStore and the statements above. A key that is
// not a completion of b's turn, or a turn that does not exist, is
// turn.ErrNotFound; a completion not in its item's Expect status is
// turn.ErrCompletionState, naming the completion and its status. Either
// way nothing of b is written. Once queued the call waits for its outcome
// whatever ctx does, as RecordTurn's.
func (s *Store) Resolve(ctx context.Context, b turn.ResolveBatch) (bool, error) {
	if err := sqlstore.CheckResolve(b); err != nil {
		return false, fmt.Errorf("%s: %w", resolveOp(b.Key), err)
	}
	p, err := resolveArgs(b)
	if err != nil {
		return false, fmt.Errorf("%s: %w", resolveOp(b.Key), err)
	}
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("%s: %w", resolveOp(b.Key), err)
	}
	c := &resolveCall{b: &b, p: p, done: make(chan error, 1)}
	if s.sharded {
		// On Citus a transaction of several sessions would span shards.
		s.resolveBatch(context.WithoutCancel(ctx), []*resolveCall{c})
	} else {
		s.resolver.do(ctx, c)
	}
	return c.outcome(<-c.done)
}

// resolveOp names a Resolve of turn k in its errors: built only for an
// error, as most resolutions end without one.
func resolveOp(k turn.TurnKey) string {
	return "resolving completions of turn " + k.SessionID + "/" + k.TurnID
}

// outcome is what Resolve returns for c, whose transaction ended with err.
func (c *resolveCall) outcome(err error) (bool, error) {
	if !c.passed || err != nil {
		return c.failed(err)
	}
	return c.settled, nil
}

// failed is outcome for a call that did not pass or whose transaction
// failed.
func (c *resolveCall) failed(err error) (bool, error) {
	b := c.b
	op := resolveOp(b.Key)
	if err != nil {
		return false, wrap(op, err)
	}
	if c.statuses == nil {
		return false, wrap(op, pgx.ErrNoRows) // the turn does not exist
	}
	if err := sqlstore.CheckExpected(b.Items, c.statuses); err != nil {
		return false, fmt.Errorf("%s: %w", op, err)
	}
	return false, fmt.Errorf("%s: the resolution did not pass its checks", op)
}

// resolveBatch resolves batch in one transaction and answers every call;
// a batch that fails as a whole is tried call by call (eachAlone).
func (s *Store) resolveBatch(ctx context.Context, batch []*resolveCall) {
	err := s.execResolve(ctx, batch)
	if eachAlone(ctx, batch, err, s.resolveBatch) {
		return
	}
	for _, c := range batch {
		c.done <- err
	}
}

// execResolve sends batch's transaction: BEGIN, each call's locks and
// resolving statement, COMMIT; and reads what each call's statements
// answered into it. A batch of several calls, each of its own session (as
// the resolver takes them), is sent as the set-based statements instead
// (execResolveMany).
func (s *Store) execResolve(ctx context.Context, batch []*resolveCall) error {
	if len(batch) > 1 {
		return s.execResolveMany(ctx, batch)
	}
	return s.sendResolve(ctx, func(pb *pgx.Batch) {
		for _, c := range batch {
			k := c.b.Key
			pb.Queue(sqlLockResolve, c.p.completions.key, k.SessionID, k.TurnID)
			pb.Queue(resolveSQL[c.p.variant()].sql, c.p.args()...)
		}
	}, func(br pgx.BatchResults) error { return readResolve(br, batch) })
}

// sendResolve sends a resolving transaction as one pipeline: BEGIN, the
// statements queue queues, COMMIT; and reads what they answered with read,
// which reads BEGIN's and COMMIT's answers too.
func (s *Store) sendResolve(ctx context.Context, queue func(*pgx.Batch), read func(pgx.BatchResults) error) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	pb := &pgx.Batch{}
	pb.Queue(sqlBeginResolve)
	queue(pb)
	pb.Queue(sqlCommit)
	br := s.pool.SendBatch(ctx, pb)
	err := read(br)
	if cerr := br.Close(); err == nil && cerr != nil {
		err = cerr
	}
	return err
}

// readResolve reads the results of execResolve's pipeline into each call.
func readResolve(br pgx.BatchResults, batch []*resolveCall) error {
	if _, err := br.Exec(); err != nil {
		return err
	}
	for _, c := range batch {
		if err := readResolveCall(br, c); err != nil {
			return err
		}
	}
	_, err := br.Exec()
	return err
}

// readResolveCall reads one call's locks and resolving statement.
func readResolveCall(br pgx.BatchResults, c *resolveCall) error {
	c.passed, c.settled, c.statuses = false, false, nil
	rows, err := br.Query()
	if err != nil {
		return err
	}
	var key []byte
	var status *string
	_, err = pgx.ForEachRow(rows, []any{&key, &status}, func() error { return c.locked(key, status) })
	if err != nil {
		return err
	}
	return br.QueryRow().Scan(&c.passed, &c.settled)
}

// locked takes a row of c's lock statement: its turn exists, and (unless
// status is nil: none of c's keys is the turn's) the completion of key is
// in status.
func (c *resolveCall) locked(key []byte, status *string) error {
	if c.statuses == nil {
		c.statuses = make(map[[32]byte]turn.CompletionStatus)
	}
	if status == nil {
		return nil
	}
	h, err := sqlstore.DecodeHash(key)
	if err != nil {
		return err
	}
	c.statuses[h] = turn.CompletionStatus(*status)
	return nil
}

// resolveArgs encodes the resolving statement's parameters. As in Commit,
// settled_at is set only for a settled status.
func resolveArgs(b turn.ResolveBatch) (resolveParams, error) {
	// Empty columns, not nil: pgx sends a nil slice as NULL, whose
	// cardinality and <> ALL are NULL, not 0 and true.
	n := len(b.Items)
	p := resolveParams{key: b.Key, now: b.Now, status: string(b.SettleStatus), completions: completionCols{
		key: make([][]byte, 0, n), expect: make([]string, 0, n), status: make([]string, 0, n),
		payload: make([]*string, 0, n), hash: make([][]byte, 0, n)}}
	if b.SettleStatus.Settled() {
		p.settled = nullTime(b.Now)
	}
	for i := range b.Items {
		it := &b.Items[i]
		payload, err := sqlstore.PayloadJSON(it.KeyHash, it.Payload)
		if err != nil {
			return resolveParams{}, err
		}
		p.completions.add(it, nullText(payload))
	}
	if err := p.lines.set(b.Key, b.Lines); err != nil {
		return resolveParams{}, err
	}
	var settle linesParams
	if err := settle.set(b.Key, b.SettleLines); err != nil {
		return resolveParams{}, fmt.Errorf("settle %w", err)
	}
	// The items' lines then the settling ones, as one batch: the two
	// encodings spliced ("[a,b]" and "[s]" make "[a,b,s]"), not encoded again.
	switch {
	case p.lines.n == 0:
		p.all = settle
	case settle.n == 0:
		p.all = p.lines
	default:
		p.all = linesParams{n: p.lines.n + settle.n, lines: p.lines.lines[:len(p.lines.lines)-1] + "," + settle.lines[1:]}
	}
	// The statement casts both to json whether it writes them or not.
	for _, l := range []*linesParams{&p.lines, &p.all} {
		if l.n == 0 {
			l.lines = "[]"
		}
	}
	results, outputs := sqlstore.ResolveWrites(b)
	if err := p.results.set(results); err != nil {
		return resolveParams{}, err
	}
	p.outputs.set(b.Key, outputs)
	if b.SettleWebhook != nil {
		w, err := webhookArgs(b.Key, b.SettleWebhook)
		if err != nil {
			return resolveParams{}, fmt.Errorf("settle %w", err)
		}
		p.webhook = w
	}
	return p, nil
}
