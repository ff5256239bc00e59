package sqlite

import (
	"context"
	"fmt"
	"math"

	"github.com/turnd/turnd/migrations"
)

const (
	sqlHasTable = `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?`
	// SchemaVersion's queries: goose's table, else the one of a release
	// before goose (until the first migrate adopts it), else none (0).
	sqlSchemaVersion       = `SELECT COALESCE(max(version_id), 0) FROM ` + migrations.VersionTable
	sqlLegacySchemaVersion = `SELECT COALESCE(max(version), 0) FROM ` + migrations.LegacyTable
)

// Migrations returns a migrations.Runner on the store's write connection
// (its Close closes nothing). Each migration runs in its own transaction,
// which takes SQLite's write lock first; the store serves one process, so
// no other lock is held.
func (s *Store) Migrations(ctx context.Context) (*migrations.Runner, error) {
	r, err := migrations.NewRunner(migrations.Config{Dialect: migrations.SQLite, DB: s.write})
	if err != nil {
		return nil, fmt.Errorf("migrating sqlite schema: %w", err)
	}
	return r, nil
}

// Migrate applies the migrations the database lacks, each in its own
// transaction, in version order.
func (s *Store) Migrate(ctx context.Context) error {
	return s.migrate(ctx, math.MaxInt)
}

// migrate applies the migrations the database lacks up to version target.
func (s *Store) migrate(ctx context.Context, target int) error {
	r, err := s.Migrations(ctx)
	if err != nil {
		return err
	}
	_, err = r.UpTo(ctx, target) // target math.MaxInt: every migration, as r.Up
	return wrap("migrating sqlite schema", err)
}

// SchemaVersion returns the schema version the database has (0 before the
// first migration) and the latest this binary knows.
func (s *Store) SchemaVersion(ctx context.Context) (current, latest int, err error) {
	latest = migrations.Latest(migrations.SQLite)
	conn, err := s.read.Conn(ctx)
	if err != nil {
		return 0, latest, wrap("reading sqlite schema version", err)
	}
	defer conn.Close()
	for _, t := range []struct{ table, query string }{
		{migrations.VersionTable, sqlSchemaVersion},
		{migrations.LegacyTable, sqlLegacySchemaVersion},
	} {
		var n int
		if err := conn.QueryRowContext(ctx, sqlHasTable, t.table).Scan(&n); err != nil {
			return 0, latest, wrap("reading sqlite schema version", err)
		}
		if n == 0 {
			continue
		}
		if err := conn.QueryRowContext(ctx, t.query).Scan(&current); err != nil {
			return 0, latest, wrap("reading sqlite schema version", err)
		}
		return current, latest, nil
	}
	return 0, latest, nil // never migrated
}
