package postgres

import (
	"context"

	"github.com/turnd/turnd/turn"
)

// MigrateTo applies the migrations the database lacks up to version target,
// to test upgrades from an older schema.
func (s *Store) MigrateTo(ctx context.Context, target int) error { return s.migrate(ctx, target) }

// RecordBatch runs one recording statement for rs, as the group commit
// would for that batch, and returns each record's outcome.
func (s *Store) RecordBatch(ctx context.Context, rs []turn.Record) ([]error, error) {
	batch := make([]*recordCall, len(rs))
	for i := range rs {
		batch[i] = &recordCall{done: make(chan error, 1)}
		if err := batch[i].rec.encode(&rs[i]); err != nil {
			return nil, err
		}
	}
	return s.execRecord(ctx, batch)
}

// ResolveTogether resolves bs in one transaction, as the group commit
// would for that batch, and returns what Resolve would for each.
func (s *Store) ResolveTogether(ctx context.Context, bs []turn.ResolveBatch) ([]bool, []error) {
	batch := make([]*resolveCall, len(bs))
	settled, errs := make([]bool, len(bs)), make([]error, len(bs))
	for i := range bs {
		p, err := resolveArgs(bs[i])
		if err != nil {
			errs[i] = err
			return settled, errs
		}
		batch[i] = &resolveCall{b: &bs[i], p: p, done: make(chan error, 1)}
	}
	s.resolveBatch(ctx, batch)
	for i, c := range batch {
		settled[i], errs[i] = c.outcome(<-c.done)
	}
	return settled, errs
}

// ResolveMany resolves bs (each of a session of its own) with the
// set-based statements alone, as a batch of the group commit is, without
// the call-by-call retry that would hide the batch's failure: it returns
// the batch's error, else what Resolve would return for each.
func (s *Store) ResolveMany(ctx context.Context, bs []turn.ResolveBatch) ([]bool, []error, error) {
	batch := make([]*resolveCall, len(bs))
	for i := range bs {
		p, err := resolveArgs(bs[i])
		if err != nil {
			return nil, nil, err
		}
		batch[i] = &resolveCall{b: &bs[i], p: p}
	}
	if err := s.execResolveMany(ctx, batch); err != nil {
		return nil, nil, err
	}
	settled, errs := make([]bool, len(bs)), make([]error, len(bs))
	for i, c := range batch {
		settled[i], errs[i] = c.outcome(nil)
	}
	return settled, errs, nil
}

// RecordStatements returns the recording statement's variants (see
// recordSQL), as sent to the server.
func RecordStatements() []string {
	sqls := make([]string, len(recordSQL))
	for i, p := range recordSQL {
		sqls[i] = p.sql
	}
	return sqls
}

// LedgerSQL and TurnLedgerSQL are the ledger page queries, for their plans.
const (
	LedgerSQL     = sqlLedger
	TurnLedgerSQL = sqlTurnLedger
)

// Distribution names the column each distributed table is sharded by on
// Citus (see routing_test.go).
var Distribution = distribution
