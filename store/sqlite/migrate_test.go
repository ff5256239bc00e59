package sqlite_test

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/turnd/turnd/migrations"
	"github.com/turnd/turnd/migrations/migrationstest"
)

// A file the previous release created and migrated upgrades in place (see
// migrationstest).
func TestMigrateAdoptsPreviousRelease(t *testing.T) {
	t.Parallel()
	freshPath := filepath.Join(t.TempDir(), "fresh.db")
	if err := open(t, freshPath).Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	want := schemaOf(t, freshPath)
	for _, at := range []int{migrations.Latest(migrations.SQLite), 9} {
		t.Run(fmt.Sprintf("at %d", at), func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "turnd.db")
			s := open(t, path)
			migrationstest.CheckAdoption(t, migrationstest.Adoption{
				Dialect:  migrations.SQLite,
				At:       at,
				Replicas: []migrationstest.Store{s},
				Exec:     func(script string) error { return s.ExecRaw(t.Context(), script) },
				Query: func(q string, dest ...any) error {
					return rawDB(t, path).QueryRowContext(t.Context(), q).Scan(dest...)
				},
				Schema: func() migrationstest.Schema { return schemaOf(t, path) },
				Want:   want,
			})
		})
	}
}

// Every migration's Down section undoes it (see migrationstest).
func TestMigrateDownTo(t *testing.T) {
	t.Parallel()
	paths := map[migrationstest.Store]string{}
	store := func(name string) migrationstest.Store {
		path := filepath.Join(t.TempDir(), name)
		s := open(t, path)
		paths[s] = path
		return s
	}
	fresh, s := store("fresh.db"), store("turnd.db")
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	migrationstest.CheckDownTo(t, fresh, s, func(s migrationstest.Store) migrationstest.Schema {
		return schemaOf(t, paths[s])
	})
}

// Rolling back to version 1 and migrating up again keeps the ledger (version
// 6's Down turns each row back into its lines) byte for byte, and the turn
// with its result.
func TestMigrateDownKeepsLedger(t *testing.T) {
	t.Parallel()
	s := open(t, filepath.Join(t.TempDir(), "turnd.db"))
	if err := s.MigrateTo(t.Context(), 1); err != nil {
		t.Fatalf("MigrateTo 1: %v", err)
	}
	checkUpgrade(t, s)
	migrationstest.CheckDownKeepsData(t, s, 1)
}

// rawDB opens the file at path read-only, for the tests' own queries.
func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=query_only(1)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// schemaOf describes the schema of the file at path, without the runners'
// tables: each table (strict or not), column (type, null, default, key),
// foreign key and index (a key's own index is in its columns). Tables are described by their columns, not their CREATE
// statements, whose text a rebuild changes.
func schemaOf(t *testing.T, path string) migrationstest.Schema {
	t.Helper()
	rows, err := rawDB(t, path).QueryContext(t.Context(), `
SELECT 'table ' || l.name, l.strict FROM pragma_table_list l
WHERE l.schema = 'main' AND l.type = 'table' AND l.name NOT LIKE 'sqlite_%'
    AND l.name NOT IN ('goose_db_version', 'schema_migrations')
UNION ALL
SELECT 'column ' || m.name || '.' || c.name, c.type || ' ' || c."notnull" || ' ' || COALESCE(c.dflt_value, '') || ' ' || c.pk
FROM sqlite_schema m, pragma_table_info(m.name) c
WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%' AND m.name NOT IN ('goose_db_version', 'schema_migrations')
UNION ALL
SELECT 'foreign key ' || m.name || '.' || f."from", f."table" || '.' || f."to" || ' ' || f.on_delete
FROM sqlite_schema m, pragma_foreign_key_list(m.name) f
WHERE m.type = 'table'
UNION ALL
SELECT 'index ' || m.name, m.sql FROM sqlite_schema m
WHERE m.type = 'index' AND m.sql IS NOT NULL AND m.tbl_name NOT IN ('goose_db_version', 'schema_migrations')`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	m := migrationstest.Schema{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			t.Fatal(err)
		}
		m[k] = v
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return m
}

// Completion keys and output ids issued before version 12 carry no
// session; they keep working after the upgrade, and their rows come
// through a rollback (see migrationstest.CheckLegacyIDs).
func TestMigrateKeepsLegacyIDs(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "turnd.db")
	s := open(t, path)
	count := func(q string) (n int, err error) {
		return n, rawDB(t, path).QueryRowContext(t.Context(), q).Scan(&n)
	}
	migrationstest.CheckLegacyIDs(t, s, s.ExecRaw, count, func(hash []byte, now time.Time) []migrationstest.Statement {
		us := now.UnixMicro()
		return []migrationstest.Statement{
			{SQL: `INSERT INTO sessions (id, budget, callback_url, created_at, last_seq) VALUES ('ls', '{}', 'https://example.test/cb', ?, 2)`, Args: []any{us}},
			{SQL: `INSERT INTO turns (session_id, id, status, mode, failure_policy, calls, hash, created_at)
VALUES ('ls', 'lt', 'waiting', 'ordered', 'isolate', '[{"id":"c0","name":"approve"}]', 'h', ?)`, Args: []any{us}},
			{SQL: `INSERT INTO results (session_id, turn_id, idx, call_id, name, effect, status, attempts, started_at)
VALUES ('ls', 'lt', 0, 'c0', 'approve', 'write', 'pending', 1, ?)`, Args: []any{us}},
			{SQL: `INSERT INTO completions (key_hash, session_id, turn_id, call_idx, call_id, call_name, status, deadline, created_at)
VALUES (?, 'ls', 'lt', 0, 'c0', 'approve', 'pending', ?, ?)`, Args: []any{hash, now.Add(time.Hour).UnixMicro(), us}},
			{SQL: `INSERT INTO outputs (id, session_id, turn_id, call_id, data, created_at) VALUES ('out_legacy', 'ls', 'lt', 'c0', CAST('legacy' AS BLOB), ?)`, Args: []any{us}},
			{SQL: `INSERT INTO webhooks (id, session_id, turn_id, url, event, body, next_attempt_at, created_at)
VALUES ('msg_legacy', 'ls', 'lt', 'https://example.test/cb', 'turn.settled', '{}', ?, ?)`, Args: []any{us, us}},
		}
	})
}
