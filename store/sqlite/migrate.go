package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"time"

	"github.com/turnd/turnd/migrations"
)

const (
	// schema_migrations has to exist before migration 1 can be recorded, so
	// the store creates it rather than a migration file.
	sqlCreateMigrations = `CREATE TABLE IF NOT EXISTS schema_migrations (
    version    INTEGER NOT NULL PRIMARY KEY,
    applied_at INTEGER NOT NULL
) STRICT`
	sqlHasMigrations   = `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'schema_migrations'`
	sqlSchemaVersion   = `SELECT COALESCE(max(version), 0) FROM schema_migrations`
	sqlRecordMigration = `INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`
)

// Migrate applies the migrations the database lacks, each in its own
// transaction. Each transaction re-reads the version under SQLite's write
// lock, so two processes migrating one file at once do not apply a
// migration twice.
func (s *Store) Migrate(ctx context.Context) error {
	return s.migrate(ctx, math.MaxInt)
}

// migrate applies the migrations the database lacks up to version target.
func (s *Store) migrate(ctx context.Context, target int) error {
	all, err := migrations.List(migrations.SQLite)
	if err != nil {
		return fmt.Errorf("migrating sqlite schema: %w", err)
	}
	if _, err := s.write.ExecContext(ctx, sqlCreateMigrations); err != nil {
		return wrap("migrating sqlite schema: creating schema_migrations", err)
	}
	for _, m := range all {
		if m.Version > target {
			break
		}
		if err := s.apply(ctx, m); err != nil {
			return wrap(fmt.Sprintf("migrating sqlite schema: applying %04d_%s", m.Version, m.Name), err)
		}
	}
	return nil
}

func (s *Store) apply(ctx context.Context, m migrations.Migration) error {
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var current int
	if err := tx.QueryRowContext(ctx, sqlSchemaVersion).Scan(&current); err != nil {
		return err
	}
	if m.Version <= current {
		return nil
	}
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, sqlRecordMigration, m.Version, time.Now().UnixMicro()); err != nil {
		return err
	}
	return tx.Commit()
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
	var n int
	if err := conn.QueryRowContext(ctx, sqlHasMigrations).Scan(&n); err != nil {
		return 0, latest, wrap("reading sqlite schema version", err)
	}
	if n == 0 {
		return 0, latest, nil
	}
	if err := conn.QueryRowContext(ctx, sqlSchemaVersion).Scan(&current); err != nil && err != sql.ErrNoRows {
		return 0, latest, wrap("reading sqlite schema version", err)
	}
	return current, latest, nil
}
