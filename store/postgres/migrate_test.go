package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/turnd/turnd/internal/pgtest"
	"github.com/turnd/turnd/internal/testnet"
	"github.com/turnd/turnd/migrations"
	"github.com/turnd/turnd/migrations/migrationstest"
	"github.com/turnd/turnd/store/postgres"
	"github.com/turnd/turnd/turn"
	"github.com/turnd/turnd/turn/storetest"
)

func open(t *testing.T, url string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(t.Context(), url, postgres.Options{MaxConns: 4})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// A schema that was never migrated is behind: Ping refuses it until Migrate
// has run. Several replicas migrating at once all succeed and the schema
// ends up at the latest version exactly once.
func TestMigrate(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t) // migrated
	url := emptySchema(t, s)
	latest := migrations.Latest(migrations.Postgres)

	fresh := open(t, url)
	current, got, err := fresh.SchemaVersion(t.Context())
	if err != nil || current != 0 || got != latest {
		t.Fatalf("SchemaVersion = %d, %d, %v; want 0, %d, nil", current, got, err, latest)
	}
	if err := fresh.Ping(t.Context()); !errors.Is(err, migrations.ErrSchemaBehind) {
		t.Fatalf("Ping of an unmigrated schema: %v, want ErrSchemaBehind", err)
	}

	const replicas = 4
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range replicas {
		r := open(t, url)
		wg.Go(func() {
			<-start
			if err := r.Migrate(t.Context()); err != nil {
				t.Errorf("Migrate: %v", err)
			}
		})
	}
	close(start)
	wg.Wait()

	current, _, err = fresh.SchemaVersion(t.Context())
	if err != nil || current != latest {
		t.Fatalf("SchemaVersion after Migrate = %d, %v; want %d", current, err, latest)
	}
	if err := fresh.Ping(t.Context()); err != nil {
		t.Fatalf("Ping after Migrate: %v", err)
	}
	migrationstest.CheckAppliedOnce(t, query(t, fresh), latest)
	if err := fresh.Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate again: %v", err)
	}
}

// emptySchema creates another schema next to s's, dropped at the end of the
// test, and returns a URL for it.
func emptySchema(t *testing.T, s *postgres.Store) string {
	t.Helper()
	u := pgtest.URL(t)
	// URL migrated it: undo that by recreating the schema empty.
	s2 := open(t, u)
	var schema string
	if err := s2.Pool().QueryRow(t.Context(), "SELECT current_schema()").Scan(&schema); err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Pool().Exec(t.Context(), "DROP SCHEMA "+schema+" CASCADE; CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	s2.Close()
	return u
}

// The store lives in the schema its URL names: two schemas on one server do
// not see each other's sessions.
func TestSearchPathIsolation(t *testing.T) {
	t.Parallel()
	a, b := pgtest.Store(t), pgtest.Store(t)
	sess := turn.Session{ID: "shared-id", CreatedAt: time.Now()}
	if err := a.CreateSession(t.Context(), sess); err != nil {
		t.Fatal(err)
	}
	if _, err := b.GetSession(t.Context(), "shared-id"); !errors.Is(err, turn.ErrNotFound) {
		t.Fatalf("GetSession in the other schema: %v, want ErrNotFound", err)
	}
	if err := b.CreateSession(t.Context(), sess); err != nil {
		t.Fatalf("CreateSession in the other schema: %v", err)
	}
}

// A server nobody listens on is unavailable, not some other failure.
func TestUnavailable(t *testing.T) {
	t.Parallel()
	addr := testnet.ClosedAddr(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err := postgres.Open(ctx, "postgres://turnd@"+addr+"/postgres?sslmode=disable", postgres.Options{ConnectTimeout: 2 * time.Second})
	if !errors.Is(err, turn.ErrUnavailable) {
		t.Fatalf("Open of a closed port: %v, want ErrUnavailable", err)
	}
}

func TestOpenRejectsBadOptions(t *testing.T) {
	t.Parallel()
	for _, o := range []postgres.Options{{MaxConns: -1}, {MaxConns: 2, MinConns: 3}, {ConnectTimeout: -time.Second}, {GroupStatements: -1}, {GroupStatements: 65}} {
		if _, err := postgres.Open(t.Context(), "postgres://localhost/x", o); err == nil {
			t.Errorf("Open accepted %+v", o)
		}
	}
	if _, err := postgres.Open(t.Context(), "postgres://a b:c/%%", postgres.Options{}); err == nil {
		t.Error("Open accepted a malformed URL")
	}
}

// A schema at version 1, from before deferred completions, is behind; Migrate
// applies the rest and keeps its data, which the completion store then uses.
func TestMigrateFromVersion1(t *testing.T) {
	t.Parallel()
	s := open(t, emptySchema(t, pgtest.Store(t)))
	if err := s.MigrateTo(t.Context(), 1); err != nil {
		t.Fatalf("MigrateTo 1: %v", err)
	}
	checkUpgrade(t, s)
}

// checkUpgrade runs storetest.CheckUpgrade on s, at version 1.
func checkUpgrade(t *testing.T, s *postgres.Store) {
	t.Helper()
	exec := func(ctx context.Context, sql string, args ...any) error {
		_, err := s.Pool().Exec(ctx, sql, args...)
		return err
	}
	storetest.CheckUpgrade(t, s, exec, func(now time.Time) []storetest.Statement {
		data := storetest.UpgradeLineData
		return []storetest.Statement{
			{SQL: `INSERT INTO sessions (id, budget, created_at, last_seq) VALUES ('s1', '{}', $1, 2)`, Args: []any{now}},
			{SQL: `INSERT INTO turns (session_id, id, status, mode, failure_policy, calls, hash, created_at, lease_owner, lease_until)
VALUES ('s1', 't1', 'running', 'ordered', 'isolate', '[{"id":"c0","name":"approve"}]', 'h', $1, 'owner', $2)`, Args: []any{now, now.Add(time.Hour)}},
			{SQL: `INSERT INTO results (session_id, turn_id, idx, call_id, name, effect, status, output, attempts, started_at, finished_at)
VALUES ('s1', 't1', 0, 'c0', 'approve', 'read', 'ok', '"yes"', 1, $1, $1)`, Args: []any{now}},
			{SQL: `INSERT INTO ledger (session_id, seq, turn_id, call_id, kind, at, data) VALUES ('s1', 1, 't1', '', 'turn_received', $1, $2)`, Args: []any{now, data}},
			{SQL: `INSERT INTO ledger (session_id, seq, turn_id, call_id, kind, at) VALUES ('s1', 2, 't1', 'c0', 'call_admitted', $1)`, Args: []any{now.Add(time.Second)}},
		}
	})
}

// TestIndexedIDsCompareAsBytes: every collatable key of every index (a
// text column or an expression) is indexed under "C" (migration 8), so that
// an index descent compares bytes whatever the database's default
// collation. A new index on a text column without COLLATE "C" fails here.
func TestIndexedIDsCompareAsBytes(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t)
	// indcollation covers the key columns only (not INCLUDE ones), 0 for a
	// type without collation; attnum 0 is an expression.
	rows, err := s.Pool().Query(t.Context(), `SELECT ic.relname, COALESCE(a.attname, 'expression ' || k.ord), COALESCE(coll.collname, '')
FROM pg_index i
JOIN pg_class ic ON ic.oid = i.indexrelid
JOIN pg_class tc ON tc.oid = i.indrelid
JOIN pg_namespace n ON n.oid = tc.relnamespace AND n.nspname = current_schema()
CROSS JOIN LATERAL unnest(i.indkey::int2[], i.indcollation::oid[]) WITH ORDINALITY AS k (attnum, coll, ord)
LEFT JOIN pg_attribute a ON a.attrelid = tc.oid AND a.attnum = k.attnum AND k.attnum > 0
LEFT JOIN pg_collation coll ON coll.oid = k.coll
WHERE k.ord <= i.indnkeyatts AND k.coll <> 0
ORDER BY 1, 2`)
	if err != nil {
		t.Fatal(err)
	}
	var index, key, collation string
	n := 0
	if _, err := pgx.ForEachRow(rows, []any{&index, &key, &collation}, func() error {
		n++
		if collation != "C" {
			t.Errorf("index %s keys on %s under collation %q, want \"C\"", index, key, collation)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// sessions(id), turns(session_id, id), results(session_id, call_id,
	// turn_id), ledger_batches(session_id), outputs(id),
	// completions(session_id, turn_id), webhooks(id), settings(name).
	if n < 12 {
		t.Errorf("found %d collatable index keys, want at least 12: is the query still looking in the test's schema?", n)
	}
}

// query runs a query of one row on s into dest.
func query(t *testing.T, s *postgres.Store) func(string, ...any) error {
	return func(q string, dest ...any) error { return s.Pool().QueryRow(t.Context(), q).Scan(dest...) }
}

// A schema the previous release created and migrated upgrades in place,
// with several replicas starting together (see migrationstest).
func TestMigrateAdoptsPreviousRelease(t *testing.T) {
	t.Parallel()
	want := schemaOf(t, pgtest.Store(t))
	for _, at := range []int{migrations.Latest(migrations.Postgres), 9} {
		t.Run(fmt.Sprintf("at %d", at), func(t *testing.T) {
			t.Parallel()
			url := emptySchema(t, pgtest.Store(t))
			s := open(t, url)
			migrationstest.CheckAdoption(t, migrationstest.Adoption{
				Dialect:  migrations.Postgres,
				At:       at,
				Replicas: []migrationstest.Store{s, open(t, url), open(t, url)},
				Exec: func(script string) error {
					_, err := s.Pool().Exec(t.Context(), script) // no arguments: several statements
					return err
				},
				Query:  query(t, s),
				Schema: func() migrationstest.Schema { return schemaOf(t, s) },
				Want:   want,
			})
		})
	}
}

// Every migration's Down section undoes it (see migrationstest).
func TestMigrateDownTo(t *testing.T) {
	t.Parallel()
	fresh := open(t, emptySchema(t, pgtest.Store(t)))
	migrationstest.CheckDownTo(t, fresh, pgtest.Store(t), func(s migrationstest.Store) migrationstest.Schema {
		return schemaOf(t, s.(*postgres.Store))
	})
}

// Rolling back to version 1 and migrating up again keeps the ledger (version
// 6's Down turns each row back into its lines) byte for byte, and the turn
// with its result.
func TestMigrateDownKeepsLedger(t *testing.T) {
	t.Parallel()
	s := open(t, emptySchema(t, pgtest.Store(t)))
	if err := s.MigrateTo(t.Context(), 1); err != nil {
		t.Fatalf("MigrateTo 1: %v", err)
	}
	checkUpgrade(t, s)
	migrationstest.CheckDownKeepsData(t, s, 1)
}

// schemaOf describes s's schema, without the runners' tables: each
// column (type, collation, null, default), index and constraint.
func schemaOf(t *testing.T, s *postgres.Store) migrationstest.Schema {
	t.Helper()
	rows, err := s.Pool().Query(t.Context(), `
SELECT 'column ' || table_name || '.' || column_name,
    data_type || ' ' || COALESCE(collation_name, '') || ' ' || is_nullable || ' ' || COALESCE(column_default, '')
FROM information_schema.columns WHERE table_schema = current_schema()
    AND table_name NOT IN ('goose_db_version', 'schema_migrations')
UNION ALL
SELECT 'index ' || indexname, replace(indexdef, current_schema() || '.', '')
FROM pg_indexes WHERE schemaname = current_schema()
    AND tablename NOT IN ('goose_db_version', 'schema_migrations')
UNION ALL
SELECT 'constraint ' || c.conrelid::regclass::text || '.' || c.conname, pg_get_constraintdef(c.oid)
FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace
WHERE n.nspname = current_schema()
    AND c.conrelid::regclass::text NOT IN ('goose_db_version', 'schema_migrations')`)
	if err != nil {
		t.Fatal(err)
	}
	m := migrationstest.Schema{}
	var k, v string
	if _, err := pgx.ForEachRow(rows, []any{&k, &v}, func() error { m[k] = v; return nil }); err != nil {
		t.Fatal(err)
	}
	return m
}

// Completion keys and output ids issued before version 12 carry no
// session; they keep working after the upgrade, and their rows come
// through a rollback (see migrationstest.CheckLegacyIDs).
func TestMigrateKeepsLegacyIDs(t *testing.T) {
	t.Parallel()
	s := open(t, emptySchema(t, pgtest.Store(t)))
	exec := func(ctx context.Context, sql string, args ...any) error {
		_, err := s.Pool().Exec(ctx, sql, args...)
		return err
	}
	count := func(q string) (n int, err error) { return n, s.Pool().QueryRow(t.Context(), q).Scan(&n) }
	migrationstest.CheckLegacyIDs(t, s, exec, count, func(hash []byte, now time.Time) []migrationstest.Statement {
		return []migrationstest.Statement{
			{SQL: `INSERT INTO sessions (id, budget, callback_url, created_at, last_seq) VALUES ('ls', '{}', 'https://example.test/cb', $1, 2)`, Args: []any{now}},
			{SQL: `INSERT INTO turns (session_id, id, status, mode, failure_policy, calls, hash, created_at)
VALUES ('ls', 'lt', 'waiting', 'ordered', 'isolate', '[{"id":"c0","name":"approve"}]', 'h', $1)`, Args: []any{now}},
			{SQL: `INSERT INTO results (session_id, turn_id, idx, call_id, name, effect, status, attempts, started_at)
VALUES ('ls', 'lt', 0, 'c0', 'approve', 'write', 'pending', 1, $1)`, Args: []any{now}},
			{SQL: `INSERT INTO completions (key_hash, session_id, turn_id, call_idx, call_id, call_name, status, deadline, created_at)
VALUES ($1, 'ls', 'lt', 0, 'c0', 'approve', 'pending', $2, $3)`, Args: []any{hash, now.Add(time.Hour), now}},
			{SQL: `INSERT INTO outputs (id, session_id, turn_id, call_id, data, created_at) VALUES ('out_legacy', 'ls', 'lt', 'c0', 'legacy', $1)`, Args: []any{now}},
			{SQL: `INSERT INTO webhooks (id, session_id, turn_id, url, event, body, next_attempt_at, created_at)
VALUES ('msg_legacy', 'ls', 'lt', 'https://example.test/cb', 'turn.settled', '{}', $1, $1)`, Args: []any{now}},
		}
	})
}
