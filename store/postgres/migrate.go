package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/turnd/turnd/migrations"
)

// migrateLockClass is the first key of the migration advisory lock; the
// second is a hash of the schema being migrated, so replicas migrating the
// same schema take turns while separate schemas in one database (tests, or
// several deployments) do not wait for each other.
const migrateLockClass = 0x7475726e // "turn"

// unlockTimeout bounds releasing the advisory lock after ctx is done.
const unlockTimeout = 5 * time.Second

const (
	sqlMigrateLock   = `SELECT pg_advisory_lock($1, hashtext(COALESCE(current_schema(), '')))`
	sqlMigrateUnlock = `SELECT pg_advisory_unlock($1, hashtext(COALESCE(current_schema(), '')))`

	// schema_migrations has to exist before migration 1 can be recorded, so
	// the store creates it rather than a migration file.
	sqlCreateMigrations = `CREATE TABLE IF NOT EXISTS schema_migrations (
    version    integer     PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
)`
	sqlSchemaVersion   = `SELECT COALESCE(max(version), 0) FROM schema_migrations`
	sqlRecordMigration = `INSERT INTO schema_migrations (version) VALUES ($1)`
)

// Migrate applies the migrations the database lacks, each in its own
// transaction, in version order. It holds a session advisory lock meanwhile,
// so replicas starting together are safe: the first migrates, the others wait
// and then find nothing to do.
func (s *Store) Migrate(ctx context.Context) error {
	return s.migrate(ctx, math.MaxInt)
}

// migrate applies the migrations the database lacks up to version target.
func (s *Store) migrate(ctx context.Context, target int) (err error) {
	all, err := migrations.List(migrations.Postgres)
	if err != nil {
		return fmt.Errorf("migrating postgres schema: %w", err)
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return wrap("migrating postgres schema: acquiring connection", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, sqlMigrateLock, migrateLockClass); err != nil {
		return wrap("migrating postgres schema: taking advisory lock", err)
	}
	defer func() {
		// Unlock even when ctx is done; if that fails, closing the
		// connection ends its session and so releases the lock.
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unlockTimeout)
		defer cancel()
		if _, uerr := conn.Exec(uctx, sqlMigrateUnlock, migrateLockClass); uerr != nil {
			_ = conn.Conn().Close(uctx)
			if err == nil {
				err = wrap("migrating postgres schema: releasing advisory lock", uerr)
			}
		}
	}()

	if _, err := conn.Exec(ctx, sqlCreateMigrations); err != nil {
		return wrap("migrating postgres schema: creating schema_migrations", err)
	}
	var current int
	if err := conn.QueryRow(ctx, sqlSchemaVersion).Scan(&current); err != nil {
		return wrap("migrating postgres schema: reading version", err)
	}
	for _, m := range all {
		if m.Version <= current || m.Version > target {
			continue
		}
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			// No arguments: pgx sends the file with the simple protocol,
			// which runs several statements.
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, sqlRecordMigration, m.Version)
			return err
		})
		if err != nil {
			return wrap(fmt.Sprintf("migrating postgres schema: applying %04d_%s", m.Version, m.Name), err)
		}
	}
	return nil
}

// SchemaVersion returns the schema version the database has (0 before the
// first migration) and the latest this binary knows.
func (s *Store) SchemaVersion(ctx context.Context) (current, latest int, err error) {
	latest = migrations.Latest(migrations.Postgres)
	err = s.pool.QueryRow(ctx, sqlSchemaVersion).Scan(&current)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P01" { // undefined_table: never migrated
		return 0, latest, nil
	}
	if err != nil {
		return 0, latest, wrap("reading postgres schema version", err)
	}
	return current, latest, nil
}
