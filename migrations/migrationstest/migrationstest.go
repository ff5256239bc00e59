// Package migrationstest holds the migration checks both stores' tests
// run: a database of the release before goose adopted in place, every Down
// section against Up's schema, and data kept through a rollback. It is for
// tests only; unlike package migrations it imports turn, for the data.
package migrationstest

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/turnd/turnd/migrations"
	"github.com/turnd/turnd/turn"
)

// Store is a store under test.
type Store interface {
	turn.MigratedStore
	// MigrateTo applies the migrations the database lacks up to version.
	MigrateTo(ctx context.Context, version int) error
	Migrations(ctx context.Context) (*migrations.Runner, error)
}

// Schema describes a store's schema, without the runners' tables: a line
// per column, key, index, … that a migration may change.
type Schema map[string]string

// previous is how the release before goose created its table of applied
// versions, the applied_at it recorded (a day ago, or a fixed time), and a
// time for the session it wrote.
var previous = map[string]struct{ ddl, appliedAt, now string }{
	migrations.Postgres: {`CREATE TABLE schema_migrations (
    version    integer     PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
)`, `now() - interval '1 day'`, `now()`},
	migrations.SQLite: {`CREATE TABLE schema_migrations (
    version    INTEGER NOT NULL PRIMARY KEY,
    applied_at INTEGER NOT NULL
) STRICT`, `1700000000000000`, `0`},
}

// previousRelease brings an empty database to version at as the release
// before goose did: its schema_migrations table, then each file's SQL (the
// Up section; there was no Down section) and the record of its version in
// one transaction; then a session, "old".
func previousRelease(t *testing.T, dialect string, at int, exec func(script string) error) {
	t.Helper()
	ms, err := migrations.List(dialect)
	if err != nil {
		t.Fatal(err)
	}
	p := previous[dialect]
	if err := exec(p.ddl); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms[:at] {
		up, _, _ := strings.Cut(m.SQL, "-- +goose Down")
		script := fmt.Sprintf("BEGIN;\n%s;\nINSERT INTO schema_migrations (version, applied_at) VALUES (%d, %s);\nCOMMIT;", up, m.Version, p.appliedAt)
		if err := exec(script); err != nil {
			t.Fatalf("applying %d as the previous release: %v", m.Version, err)
		}
	}
	if err := exec(`INSERT INTO sessions (id, budget, created_at) VALUES ('old', '{}', ` + p.now + `)`); err != nil {
		t.Fatal(err)
	}
}

// keptTimes counts the versions goose's table holds with the time
// schema_migrations recorded for them.
var keptTimes = map[string]string{
	migrations.Postgres: `SELECT count(*) FROM goose_db_version g JOIN schema_migrations m
ON m.version = g.version_id AND g.tstamp = m.applied_at AT TIME ZONE 'UTC'`,
	migrations.SQLite: `SELECT count(*) FROM goose_db_version g JOIN schema_migrations m
ON m.version = g.version_id AND g.tstamp = datetime(m.applied_at / 1000000, 'unixepoch')`,
}

// Adoption is an empty database for the previous release to bring to At,
// and how to reach it.
type Adoption struct {
	Dialect string
	At      int
	// Replicas are stores on the database, Replicas[0] the one checked;
	// they migrate at once.
	Replicas []Store
	// Exec runs a script of several statements; Query a query of one row
	// into dest.
	Exec  func(script string) error
	Query func(query string, dest ...any) error
	// Schema describes the database's schema; Want is a new database's.
	Schema func() Schema
	Want   Schema
}

// CheckAdoption checks that a database of the previous release (brought
// to a.At, with a session) upgrades in place: the replicas migrating together all succeed, goose's table gets
// the adopted versions with their times and then the missing ones, each
// once (nothing ran twice), a session written before is still there, and
// the schema is a new database's.
func CheckAdoption(t *testing.T, a Adoption) {
	t.Helper()
	ctx := t.Context()
	s := a.Replicas[0]
	previousRelease(t, a.Dialect, a.At, a.Exec)
	if current, _, err := s.SchemaVersion(ctx); err != nil || current != a.At {
		t.Fatalf("SchemaVersion of the previous release's database = %d, %v; want %d", current, err, a.At)
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for _, r := range a.Replicas {
		wg.Go(func() {
			<-start
			if err := r.Migrate(ctx); err != nil {
				t.Errorf("Migrate: %v", err)
			}
		})
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	_, latest, _ := s.SchemaVersion(ctx)
	CheckAppliedOnce(t, a.Query, latest)
	var kept int
	if err := a.Query(keptTimes[a.Dialect], &kept); err != nil || kept != a.At {
		t.Errorf("%d versions kept their time of the previous release (%v), want %d", kept, err, a.At)
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping after Migrate: %v", err)
	}
	if _, err := s.GetSession(ctx, "old"); err != nil {
		t.Fatalf("the previous release's session: %v", err)
	}
	if got := a.Schema(); !reflect.DeepEqual(got, a.Want) {
		t.Errorf("adopted schema differs from a new one: %s", diff(got, a.Want))
	}
}

// CheckAppliedOnce checks that goose's table records versions 0 to latest,
// each once.
func CheckAppliedOnce(t *testing.T, query func(query string, dest ...any) error, latest int) {
	t.Helper()
	var rows, versions, top int
	err := query("SELECT count(*), count(DISTINCT version_id), max(version_id) FROM "+migrations.VersionTable, &rows, &versions, &top)
	if err != nil || rows != latest+1 || versions != latest+1 || top != latest {
		t.Fatalf("%s has %d rows of %d versions up to %d (%v); want versions 0 to %d, once each", migrations.VersionTable, rows, versions, top, err, latest)
	}
}

// CheckDownTo checks that every Down section undoes its Up: s, at the
// latest version, brought down one version at a time has at each the
// schema that fresh, an empty database brought up one version at a time,
// had; and Up from 0 gives the latest schema again.
func CheckDownTo(t *testing.T, fresh, s Store, schema func(Store) Schema) {
	t.Helper()
	ctx := t.Context()
	_, latest, err := s.SchemaVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []Schema{schema(fresh)}
	for v := 1; v <= latest; v++ {
		if err := fresh.MigrateTo(ctx, v); err != nil {
			t.Fatalf("MigrateTo %d: %v", v, err)
		}
		want = append(want, schema(fresh))
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
		if got := schema(s); !reflect.DeepEqual(got, want[v]) {
			t.Fatalf("schema after DownTo %d differs from version %d's: %s", v, v, diff(got, want[v]))
		}
	}
	res, err := r.Up(ctx)
	if err != nil || len(res) != latest {
		t.Fatalf("Up from 0 applied %d migrations (%v), want %d", len(res), err, latest)
	}
	if got := schema(s); !reflect.DeepEqual(got, want[latest]) {
		t.Fatalf("schema after Up from 0 differs from the latest: %s", diff(got, want[latest]))
	}
}

// CheckDownKeepsData rolls s back to version and up again, and checks that
// session s1's ledger and turn t1 (status and results) come through
// unchanged.
func CheckDownKeepsData(t *testing.T, s Store, version int) {
	t.Helper()
	ctx := t.Context()
	k := turn.TurnKey{SessionID: "s1", TurnID: "t1"}
	snapshot := func() (lines []turn.Line, tu turn.Turn) {
		t.Helper()
		lines, err := s.Ledger(ctx, k.SessionID, 0, 100, turn.MaxPageBytes)
		if err != nil {
			t.Fatalf("Ledger: %v", err)
		}
		if tu, err = s.GetTurn(ctx, k); err != nil {
			t.Fatalf("GetTurn: %v", err)
		}
		return lines, tu
	}
	lines, tu := snapshot()
	if len(lines) < 2 {
		t.Fatalf("the ledger holds %d lines: nothing to check", len(lines))
	}
	r, err := s.Migrations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.DownTo(ctx, version); err != nil {
		t.Fatalf("DownTo %d: %v", version, err)
	}
	if _, err := r.Up(ctx); err != nil {
		t.Fatalf("Up: %v", err)
	}
	after, tuAfter := snapshot()
	if !reflect.DeepEqual(after, lines) {
		t.Fatalf("ledger after down and up\n got %+v\nwant %+v", after, lines)
	}
	if tuAfter.Status != tu.Status || !reflect.DeepEqual(tuAfter.Results, tu.Results) {
		t.Fatalf("turn after down and up\n got %+v\nwant %+v", tuAfter, tu)
	}
}

// diff lists the lines of two schemas that differ.
func diff(got, want Schema) string {
	var out []string
	for k, v := range got {
		if w, ok := want[k]; !ok || w != v {
			out = append(out, fmt.Sprintf("\n  got  %s: %s", k, v))
		}
	}
	for k, w := range want {
		if v, ok := got[k]; !ok || w != v {
			out = append(out, fmt.Sprintf("\n  want %s: %s", k, w))
		}
	}
	sort.Strings(out)
	return strings.Join(out, "")
}
