package migrations

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"path"
	"strings"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"
	"github.com/pressly/goose/v3/lock"
)

// VersionTable is the table the runner records applied versions in, one
// row per version (goose's format, version 0 first).
const VersionTable = goose.DefaultTablename

// LegacyTable is where releases before the goose runner recorded applied
// versions: schema_migrations(version, applied_at). A database that has it
// and no VersionTable is adopted (see Runner).
const LegacyTable = "schema_migrations"

// Config configures a Runner.
type Config struct {
	// Dialect is Postgres or SQLite.
	Dialect string
	// DB is the database the migrations run on. The Runner does not close
	// it.
	DB *sql.DB
	// Locker, if set, is held on the migrating connection while
	// migrations run, so that processes migrating one database take
	// turns. Nil for SQLite, whose write lock serves one process.
	Locker lock.SessionLocker
	// Close, if set, is called by the Runner's Close: DB's owner closes
	// what it opened for the Runner.
	Close func() error
}

// Result is one migration applied or rolled back.
type Result struct {
	Version  int
	Name     string
	Duration time.Duration
}

// Status is one migration and whether the database has it.
type Status struct {
	Version   int
	Name      string
	Applied   bool
	AppliedAt time.Time // zero when not applied
}

// Runner applies and rolls back the embedded migrations of one dialect with
// goose. Every method first adopts a database of a release before goose:
// when it has LegacyTable and no VersionTable, VersionTable is created and
// filled from it, in one transaction under Locker, so that nothing applied
// runs again.
type Runner struct {
	provider *goose.Provider
	store    database.Store
	db       *sql.DB
	locker   lock.SessionLocker
	close    func() error
	queries  dialectQueries
}

// dialectQueries are the statements that differ between the dialects.
type dialectQueries struct {
	goose database.Dialect
	// exists reports whether the table named by its one argument exists
	// in the schema being migrated; the name is inlined, as goose does.
	exists string
	// seed copies LegacyTable's versions into VersionTable, with their
	// times.
	seed string
}

var dialects = map[string]dialectQueries{
	Postgres: {
		goose:  database.DialectPostgres,
		exists: `SELECT EXISTS (SELECT 1 FROM pg_tables WHERE (current_schema() IS NULL OR schemaname = current_schema()) AND tablename = '%s')`,
		seed: `INSERT INTO ` + VersionTable + ` (version_id, is_applied, tstamp)
SELECT version, true, applied_at AT TIME ZONE 'UTC' FROM ` + LegacyTable + ` ORDER BY version`,
	},
	SQLite: {
		goose:  database.DialectSQLite3,
		exists: `SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = '%s')`,
		seed: `INSERT INTO ` + VersionTable + ` (version_id, is_applied, tstamp)
SELECT version, 1, datetime(applied_at / 1000000, 'unixepoch') FROM ` + LegacyTable + ` ORDER BY version`,
	},
}

// NewRunner returns a Runner for c.Dialect's migrations on c.DB.
func NewRunner(c Config) (*Runner, error) {
	q, ok := dialects[c.Dialect]
	if !ok {
		return nil, fmt.Errorf("migrations: unknown dialect %q", c.Dialect)
	}
	if _, err := List(c.Dialect); err != nil {
		return nil, err
	}
	fsys, err := FS(c.Dialect)
	if err != nil {
		return nil, err
	}
	store, err := database.NewStore(q.goose, VersionTable)
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	opts := []goose.ProviderOption{
		goose.WithDisableGlobalRegistry(true), // SQL files only, never Go migrations registered elsewhere
		goose.WithLogger(goose.NopLogger()),
	}
	if c.Locker != nil {
		opts = append(opts, goose.WithSessionLocker(c.Locker))
	}
	p, err := goose.NewProvider(q.goose, c.DB, fsys, opts...)
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	return &Runner{provider: p, store: store, db: c.DB, locker: c.Locker, close: c.Close, queries: q}, nil
}

// Close calls Config.Close, if set.
func (r *Runner) Close() error {
	if r.close == nil {
		return nil
	}
	return r.close()
}

// Up applies every migration the database lacks, each in its own
// transaction, and returns them in order.
func (r *Runner) Up(ctx context.Context) ([]Result, error) {
	return r.UpTo(ctx, math.MaxInt)
}

// UpTo applies the migrations the database lacks up to version.
func (r *Runner) UpTo(ctx context.Context, version int) ([]Result, error) {
	if err := r.adopt(ctx); err != nil {
		return nil, err
	}
	res, err := r.provider.UpTo(ctx, int64(version))
	return results(res), r.err("applying", err)
}

// DownTo rolls back the applied migrations above version, newest first,
// and returns them in that order. DownTo(ctx, 0) leaves an empty schema.
func (r *Runner) DownTo(ctx context.Context, version int) ([]Result, error) {
	if err := r.adopt(ctx); err != nil {
		return nil, err
	}
	res, err := r.provider.DownTo(ctx, int64(version))
	return results(res), r.err("rolling back", err)
}

// Status lists every migration this binary has, in version order, with
// whether the database has it.
func (r *Runner) Status(ctx context.Context) ([]Status, error) {
	if err := r.adopt(ctx); err != nil {
		return nil, err
	}
	sts, err := r.provider.Status(ctx)
	if err != nil {
		return nil, r.err("reading status", err)
	}
	out := make([]Status, 0, len(sts))
	for _, s := range sts {
		st := Status{Version: int(s.Source.Version), Name: name(s.Source.Path), Applied: s.State == goose.StateApplied}
		if st.Applied {
			st.AppliedAt = s.AppliedAt
		}
		out = append(out, st)
	}
	return out, nil
}

func (r *Runner) err(doing string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s %s migrations: %w", doing, r.queries.goose, err)
}

// adopt fills VersionTable from LegacyTable when the database has only the
// latter. The check runs first without the lock, so that a database
// already adopted (or new) costs one query.
func (r *Runner) adopt(ctx context.Context) (err error) {
	conn, err := r.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("adopting %s: %w", LegacyTable, err)
	}
	defer conn.Close()
	if need, err := r.needsAdoption(ctx, conn); err != nil || !need {
		return err
	}
	if r.locker != nil {
		if err := r.locker.SessionLock(ctx, conn); err != nil {
			return fmt.Errorf("adopting %s: taking the migration lock: %w", LegacyTable, err)
		}
		defer func() {
			if uerr := r.locker.SessionUnlock(context.WithoutCancel(ctx), conn); uerr != nil {
				err = errors.Join(err, fmt.Errorf("adopting %s: releasing the migration lock: %w", LegacyTable, uerr))
			}
		}()
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("adopting %s: %w", LegacyTable, err)
	}
	defer tx.Rollback()
	// Again in the transaction: another process may have adopted the
	// database meanwhile.
	if need, err := r.needsAdoption(ctx, tx); err != nil || !need {
		return err
	}
	if err := r.store.CreateVersionTable(ctx, tx); err != nil {
		return fmt.Errorf("adopting %s: creating %s: %w", LegacyTable, VersionTable, err)
	}
	if err := r.store.Insert(ctx, tx, database.InsertRequest{Version: 0}); err != nil {
		return fmt.Errorf("adopting %s: %w", LegacyTable, err)
	}
	if _, err := tx.ExecContext(ctx, r.queries.seed); err != nil {
		return fmt.Errorf("adopting %s: copying its versions: %w", LegacyTable, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("adopting %s: %w", LegacyTable, err)
	}
	return nil
}

// needsAdoption reports whether the database has LegacyTable and not
// VersionTable.
func (r *Runner) needsAdoption(ctx context.Context, q database.DBTxConn) (bool, error) {
	var has [2]bool
	for i, table := range []string{VersionTable, LegacyTable} {
		if err := q.QueryRowContext(ctx, fmt.Sprintf(r.queries.exists, table)).Scan(&has[i]); err != nil {
			return false, fmt.Errorf("adopting %s: looking for %s: %w", LegacyTable, table, err)
		}
	}
	return !has[0] && has[1], nil
}

// results converts goose's results.
func results(in []*goose.MigrationResult) []Result {
	out := make([]Result, 0, len(in))
	for _, r := range in {
		out = append(out, Result{Version: int(r.Source.Version), Name: name(r.Source.Path), Duration: r.Duration})
	}
	return out
}

// name returns the name part of a migration file's path: "init" for
// "0001_init.sql".
func name(p string) string {
	_, n, _ := strings.Cut(strings.TrimSuffix(path.Base(p), ".sql"), "_")
	return n
}
