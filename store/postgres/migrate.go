package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3/lock"

	"github.com/turnd/turnd/migrations"
)

// Migration lock timing: a process waiting for another's migrations asks
// for the advisory lock once a second (goose's shortest period), for up to
// an hour; the context bounds it too.
const (
	lockPeriodSeconds = 1
	lockAttempts      = 3600
)

const (
	sqlLockScope = `SELECT current_database(), COALESCE(current_schema(), '')`
	// SchemaVersion's queries: goose's table, else the one of a release
	// before goose (until the first migrate adopts it), else none (0).
	sqlSchemaVersion       = `SELECT COALESCE(max(version_id), 0) FROM ` + migrations.VersionTable
	sqlLegacySchemaVersion = `SELECT COALESCE(max(version), 0) FROM ` + migrations.LegacyTable
)

// Migrations returns a migrations.Runner on the store's database, on
// connections of its own that its Close closes (ending their sessions, and
// so any lock they still hold). It holds a session advisory
// lock while it migrates, keyed by the database and schema, so replicas
// migrating one schema take turns while separate schemas in one database
// (tests, or several deployments) do not wait for each other.
func (s *Store) Migrations(ctx context.Context) (*migrations.Runner, error) {
	var db, schema string
	if err := s.pool.QueryRow(ctx, sqlLockScope).Scan(&db, &schema); err != nil {
		return nil, wrap("migrating postgres schema: reading the schema's name", err)
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "turnd migrations\x00%s\x00%s", db, schema)
	locker, err := lock.NewPostgresSessionLocker(
		lock.WithLockID(int64(h.Sum64())),
		lock.WithLockTimeout(lockPeriodSeconds, lockAttempts),
	)
	if err != nil {
		return nil, fmt.Errorf("migrating postgres schema: %w", err)
	}
	cc := s.pool.Config().ConnConfig
	// goose's table holds times without a zone (now() at the session's
	// TimeZone): in UTC, they read back as what they are.
	cc.RuntimeParams["timezone"] = "UTC"
	sqlDB := stdlib.OpenDB(*cc)
	r, err := migrations.NewRunner(migrations.Config{Dialect: migrations.Postgres, DB: sqlDB, Locker: locker, Close: sqlDB.Close})
	if err != nil {
		sqlDB.Close()
		return nil, fmt.Errorf("migrating postgres schema: %w", err)
	}
	return r, nil
}

// Migrate applies the migrations the database lacks, each in its own
// transaction, in version order, under the migration lock (see
// Migrations): replicas starting together are safe, the first migrates
// and the others wait and then find nothing to do.
func (s *Store) Migrate(ctx context.Context) error {
	return s.migrate(ctx, math.MaxInt)
}

// migrate applies the migrations the database lacks up to version target.
func (s *Store) migrate(ctx context.Context, target int) (err error) {
	r, err := s.Migrations(ctx)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, r.Close()) }()
	_, err = r.UpTo(ctx, target) // target math.MaxInt: every migration, as r.Up
	return wrap("migrating postgres schema", err)
}

// SchemaVersion returns the schema version the database has (0 before the
// first migration) and the latest this binary knows.
func (s *Store) SchemaVersion(ctx context.Context) (current, latest int, err error) {
	latest = migrations.Latest(migrations.Postgres)
	for _, q := range []string{sqlSchemaVersion, sqlLegacySchemaVersion} {
		err = s.pool.QueryRow(ctx, q).Scan(&current)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42P01" { // undefined_table
			continue
		}
		if err != nil {
			return 0, latest, wrap("reading postgres schema version", err)
		}
		return current, latest, nil
	}
	return 0, latest, nil // never migrated
}

// sqlCitusInstalled tells a Citus database from a plain one.
const sqlCitusInstalled = `SELECT EXISTS (SELECT FROM pg_extension WHERE extname = 'citus')`

// ErrNotCitus: Distribute ran on a database without the citus extension.
var ErrNotCitus = errors.New("the database is not a Citus coordinator (no citus extension)")

// Distribute distributes the store's schema, migrated to the latest
// version, on a Citus coordinator: each table by its session, co-located,
// or as a reference table (migrations.Citus, docs/citus.md). Tables already
// distributed are left as they are. On a database without the citus
// extension it fails with ErrNotCitus and changes nothing.
func (s *Store) Distribute(ctx context.Context) error {
	var citus bool
	if err := s.pool.QueryRow(ctx, sqlCitusInstalled).Scan(&citus); err != nil {
		return wrap("distributing the schema: looking for citus", err)
	}
	if !citus {
		return fmt.Errorf("distributing the schema: %w", ErrNotCitus)
	}
	for _, st := range migrations.Citus() {
		if _, err := s.pool.Exec(ctx, st); err != nil {
			return wrap("distributing the schema", err)
		}
	}
	return nil
}
