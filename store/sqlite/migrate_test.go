package sqlite_test

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/turnd/turnd/migrations"
	"github.com/turnd/turnd/store/sqlite"
	"github.com/turnd/turnd/turn"
)

// previousRelease brings the file at path to version at as the release
// before goose did: schema_migrations(version, applied_at) created by the
// store, each file's SQL (its Up section; the Down section did not exist)
// run in a transaction that records its version.
func previousRelease(t *testing.T, s *sqlite.Store, at int) {
	t.Helper()
	ms, err := migrations.List(migrations.SQLite)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := s.ExecRaw(ctx, `CREATE TABLE schema_migrations (
    version    INTEGER NOT NULL PRIMARY KEY,
    applied_at INTEGER NOT NULL
) STRICT`); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms[:at] {
		up, _, _ := strings.Cut(m.SQL, "-- +goose Down")
		// One statement list: BEGIN, the file, the record, COMMIT.
		q := "BEGIN;\n" + up + fmt.Sprintf(";\nINSERT INTO schema_migrations (version, applied_at) VALUES (%d, %d);\nCOMMIT;", m.Version, int64(1_700_000_000_000_000)+int64(m.Version))
		if err := s.ExecRaw(ctx, q); err != nil {
			t.Fatalf("applying %d as the previous release: %v", m.Version, err)
		}
	}
}

// A file the previous release created and migrated upgrades in place: its
// record of applied versions is adopted (with their times), no applied
// migration runs again, the missing ones are applied, the data stays and
// the schema is the one a new file gets.
func TestMigrateAdoptsPreviousRelease(t *testing.T) {
	t.Parallel()
	latest := migrations.Latest(migrations.SQLite)
	freshPath := filepath.Join(t.TempDir(), "fresh.db")
	if err := open(t, freshPath).Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	want := schemaOf(t, freshPath)
	for _, at := range []int{latest, 9} {
		t.Run(fmt.Sprintf("at %d", at), func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			path := filepath.Join(t.TempDir(), "turnd.db")
			s := open(t, path)
			previousRelease(t, s, at)
			if err := s.ExecRaw(ctx, `INSERT INTO sessions (id, budget, created_at) VALUES ('old', '{}', 0)`); err != nil {
				t.Fatal(err)
			}
			if current, _, err := s.SchemaVersion(ctx); err != nil || current != at {
				t.Fatalf("SchemaVersion of the previous release's file = %d, %v; want %d", current, err, at)
			}
			for range 2 { // the second finds nothing to do
				if err := s.Migrate(ctx); err != nil {
					t.Fatalf("Migrate: %v", err)
				}
			}
			db := rawDB(t, path)
			var rows, versions, top, adopted int
			if err := db.QueryRow(`SELECT count(*), count(DISTINCT version_id), max(version_id) FROM ` + migrations.VersionTable).Scan(&rows, &versions, &top); err != nil ||
				rows != latest+1 || versions != latest+1 || top != latest {
				t.Fatalf("%s has %d rows of %d versions up to %d (%v); want versions 0 to %d, once each", migrations.VersionTable, rows, versions, top, err, latest)
			}
			if err := db.QueryRow(`SELECT count(*) FROM goose_db_version g JOIN schema_migrations m
ON m.version = g.version_id AND g.tstamp = datetime(m.applied_at / 1000000, 'unixepoch')`).Scan(&adopted); err != nil || adopted != at {
				t.Errorf("%d versions kept their time of the previous release (%v), want %d", adopted, err, at)
			}
			if err := s.Ping(ctx); err != nil {
				t.Fatalf("Ping after Migrate: %v", err)
			}
			if _, err := s.GetSession(ctx, "old"); err != nil {
				t.Fatalf("the previous release's session: %v", err)
			}
			if got := schemaOf(t, path); !reflect.DeepEqual(got, want) {
				t.Errorf("adopted schema differs from a new one:\n got %v\nwant %v", got, want)
			}
		})
	}
}

// Every migration's Down section undoes it: a file brought down to version
// v has the schema Up brings a new file to at v, all the way to an empty
// one; and Up from there gives the latest schema again.
func TestMigrateDownTo(t *testing.T) {
	t.Parallel()
	latest := migrations.Latest(migrations.SQLite)
	ctx := t.Context()
	freshPath := filepath.Join(t.TempDir(), "fresh.db")
	fresh := open(t, freshPath)
	want := []map[string]string{schemaOf(t, freshPath)}
	for v := 1; v <= latest; v++ {
		if err := fresh.MigrateTo(ctx, v); err != nil {
			t.Fatalf("MigrateTo %d: %v", v, err)
		}
		want = append(want, schemaOf(t, freshPath))
	}

	path := filepath.Join(t.TempDir(), "turnd.db")
	s := open(t, path)
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := s.Migrations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for v := latest - 1; v >= 0; v-- {
		res, err := r.DownTo(ctx, v)
		if err != nil {
			t.Fatalf("DownTo %d: %v", v, err)
		}
		if len(res) != 1 || res[0].Version != v+1 {
			t.Fatalf("DownTo %d rolled back %+v, want version %d alone", v, res, v+1)
		}
		if current, _, err := s.SchemaVersion(ctx); err != nil || current != v {
			t.Fatalf("SchemaVersion after DownTo %d = %d, %v", v, current, err)
		}
		if got := schemaOf(t, path); !reflect.DeepEqual(got, want[v]) {
			t.Fatalf("schema after DownTo %d differs from version %d's:\n got %v\nwant %v", v, v, got, want[v])
		}
	}
	res, err := r.Up(ctx)
	if err != nil || len(res) != latest {
		t.Fatalf("Up from 0 applied %d migrations (%v), want %d", len(res), err, latest)
	}
	if got := schemaOf(t, path); !reflect.DeepEqual(got, want[latest]) {
		t.Fatalf("schema after Up from 0 differs from the latest:\n got %v\nwant %v", got, want[latest])
	}
}

// Rolling back to version 1 and migrating up again keeps what the ledger
// holds (version 6's Down turns each row back into its lines) byte for
// byte, and the turn with its result.
func TestMigrateDownKeepsLedger(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := open(t, filepath.Join(t.TempDir(), "turnd.db"))
	if err := s.MigrateTo(ctx, 1); err != nil {
		t.Fatalf("MigrateTo 1: %v", err)
	}
	checkUpgrade(t, s)
	before, err := s.Ledger(ctx, "s1", 0, 100, turn.MaxPageBytes)
	if err != nil || len(before) < 4 {
		t.Fatalf("Ledger: %d lines, %v", len(before), err)
	}
	k := turn.TurnKey{SessionID: "s1", TurnID: "t1"}
	turnBefore, err := s.GetTurn(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Migrations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.DownTo(ctx, 1); err != nil {
		t.Fatalf("DownTo 1: %v", err)
	}
	if _, err := r.Up(ctx); err != nil {
		t.Fatalf("Up: %v", err)
	}
	after, err := s.Ledger(ctx, "s1", 0, 100, turn.MaxPageBytes)
	if err != nil || !reflect.DeepEqual(after, before) {
		t.Fatalf("ledger after down and up (%v)\n got %+v\nwant %+v", err, after, before)
	}
	turnAfter, err := s.GetTurn(ctx, k)
	if err != nil || !reflect.DeepEqual(turnAfter.Results, turnBefore.Results) || turnAfter.Status != turnBefore.Status {
		t.Fatalf("turn after down and up (%v)\n got %+v\nwant %+v", err, turnAfter, turnBefore)
	}
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
func schemaOf(t *testing.T, path string) map[string]string {
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
	m := map[string]string{}
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
