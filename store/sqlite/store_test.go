package sqlite_test

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/turnd/turnd/migrations"
	"github.com/turnd/turnd/store/sqlite"
	"github.com/turnd/turnd/turn"
	"github.com/turnd/turnd/turn/storetest"
)

// open opens a store on path and closes it at the end of the test.
func open(t *testing.T, path string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) turn.Store {
		s := open(t, filepath.Join(t.TempDir(), "turnd.db"))
		if err := s.Migrate(t.Context()); err != nil {
			t.Fatalf("Migrate: %v", err)
		}
		return s
	})
}

func TestMigrate(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "turnd.db")
	s := open(t, path)
	latest := migrations.Latest(migrations.SQLite)
	current, got, err := s.SchemaVersion(t.Context())
	if err != nil || current != 0 || got != latest {
		t.Fatalf("SchemaVersion = %d, %d, %v; want 0, %d, nil", current, got, err, latest)
	}
	if err := s.Ping(t.Context()); !errors.Is(err, migrations.ErrSchemaBehind) {
		t.Fatalf("Ping of an unmigrated file: %v, want ErrSchemaBehind", err)
	}
	for range 2 { // a second run finds nothing to do
		if err := s.Migrate(t.Context()); err != nil {
			t.Fatalf("Migrate: %v", err)
		}
	}
	if current, _, err = s.SchemaVersion(t.Context()); err != nil || current != latest {
		t.Fatalf("SchemaVersion after Migrate = %d, %v; want %d", current, err, latest)
	}
	if err := s.Ping(t.Context()); err != nil {
		t.Fatalf("Ping: %v", err)
	}

	// The file keeps the schema: reopened, it is current.
	s.Close()
	again := open(t, path)
	if err := again.Ping(t.Context()); err != nil {
		t.Fatalf("Ping after reopening: %v", err)
	}
}

func TestOpenRejectsPaths(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"", ":memory:", "file:x.db", "a?b.db", "a#b.db"} {
		if s, err := sqlite.Open(t.Context(), p); err == nil {
			s.Close()
			t.Errorf("Open(%q) accepted", p)
		}
	}
}

// A file at version 1, from before deferred completions, is behind; Migrate
// applies the rest and keeps its data, which the completion store then uses.
func TestMigrateFromVersion1(t *testing.T) {
	t.Parallel()
	s := open(t, filepath.Join(t.TempDir(), "turnd.db"))
	if err := s.MigrateTo(t.Context(), 1); err != nil {
		t.Fatalf("MigrateTo 1: %v", err)
	}
	checkUpgrade(t, s)
}

// checkUpgrade checks that s, at version 1, migrates to the latest version
// with its data — a session, a running turn with a result, ledger lines
// with and without data — and that the store's writes work on the result.
// The data is written with version 1's SQL, as that release wrote it.
func checkUpgrade(t *testing.T, s *sqlite.Store) {
	t.Helper()
	ctx := t.Context()
	if current, _, err := s.SchemaVersion(ctx); err != nil || current != 1 {
		t.Fatalf("SchemaVersion = %d, %v; want 1", current, err)
	}
	if err := s.Ping(ctx); !errors.Is(err, migrations.ErrSchemaBehind) {
		t.Fatalf("Ping at version 1: %v, want ErrSchemaBehind", err)
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	us := now.UnixMicro()
	data := storetest.UpgradeLineData
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO sessions (id, budget, created_at, last_seq) VALUES ('s1', '{}', ?, 2)`, []any{us}},
		{`INSERT INTO turns (session_id, id, status, mode, failure_policy, calls, hash, created_at, lease_owner, lease_until)
VALUES ('s1', 't1', 'running', 'ordered', 'isolate', '[{"id":"c0","name":"approve"}]', 'h', ?, 'owner', ?)`, []any{us, now.Add(time.Hour).UnixMicro()}},
		{`INSERT INTO results (session_id, turn_id, idx, call_id, name, effect, status, output, attempts, started_at, finished_at)
VALUES ('s1', 't1', 0, 'c0', 'approve', 'read', 'ok', '"yes"', 1, ?, ?)`, []any{us, us}},
		{`INSERT INTO ledger (session_id, seq, turn_id, call_id, kind, at, data) VALUES ('s1', 1, 't1', '', 'turn_received', ?, ?)`, []any{us, data}},
		{`INSERT INTO ledger (session_id, seq, turn_id, call_id, kind, at) VALUES ('s1', 2, 't1', 'c0', 'call_admitted', ?)`, []any{us + 1_000_000}},
	} {
		if err := s.ExecRaw(ctx, q.sql, q.args...); err != nil {
			t.Fatalf("writing version 1 data: %v\n%s", err, q.sql)
		}
	}

	storetest.CheckUpgraded(t, s, now)
}
