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

// checkUpgrade runs storetest.CheckUpgrade on s, at version 1.
func checkUpgrade(t *testing.T, s *sqlite.Store) {
	t.Helper()
	storetest.CheckUpgrade(t, s, s.ExecRaw, func(now time.Time) []storetest.Statement {
		us := now.UnixMicro()
		data := storetest.UpgradeLineData
		return []storetest.Statement{
			{SQL: `INSERT INTO sessions (id, budget, created_at, last_seq) VALUES ('s1', '{}', ?, 2)`, Args: []any{us}},
			{SQL: `INSERT INTO turns (session_id, id, status, mode, failure_policy, calls, hash, created_at, lease_owner, lease_until)
VALUES ('s1', 't1', 'running', 'ordered', 'isolate', '[{"id":"c0","name":"approve"}]', 'h', ?, 'owner', ?)`, Args: []any{us, now.Add(time.Hour).UnixMicro()}},
			{SQL: `INSERT INTO results (session_id, turn_id, idx, call_id, name, effect, status, output, attempts, started_at, finished_at)
VALUES ('s1', 't1', 0, 'c0', 'approve', 'read', 'ok', '"yes"', 1, ?, ?)`, Args: []any{us, us}},
			{SQL: `INSERT INTO ledger (session_id, seq, turn_id, call_id, kind, at, data) VALUES ('s1', 1, 't1', '', 'turn_received', ?, ?)`, Args: []any{us, data}},
			{SQL: `INSERT INTO ledger (session_id, seq, turn_id, call_id, kind, at) VALUES ('s1', 2, 't1', 'c0', 'call_admitted', ?)`, Args: []any{us + 1_000_000}},
		}
	})
}
