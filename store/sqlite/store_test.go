package sqlite_test

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/turnd/turnd/dispatch"
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
	k := turn.TurnKey{SessionID: "s1", TurnID: "t1"}
	data := ` {"calls" : ["c0"], "note": "é \u00e9 <b>"} `
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

	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	if current, latest, err := s.SchemaVersion(ctx); err != nil || current != latest || latest < 2 {
		t.Fatalf("SchemaVersion after Migrate = %d, %d, %v; want the latest (at least 2)", current, latest, err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping after Migrate: %v", err)
	}
	lines, err := s.Ledger(ctx, "s1", 0, 10)
	if err != nil {
		t.Fatalf("Ledger after Migrate: %v", err)
	}
	want := []turn.Line{
		{Seq: 1, SessionID: "s1", TurnID: "t1", Kind: turn.LineTurnReceived, At: now, Data: json.RawMessage(data)},
		{Seq: 2, SessionID: "s1", TurnID: "t1", CallID: "c0", Kind: turn.LineCallAdmitted, At: now.Add(time.Second)},
	}
	if !reflect.DeepEqual(lines, want) {
		t.Fatalf("migrated ledger\n got %+v\nwant %+v", lines, want)
	}
	if tu, err := s.GetTurn(ctx, k); err != nil || tu.Status != turn.StatusRunning || len(tu.Results) != 1 || string(tu.Results[0].Output) != `"yes"` {
		t.Fatalf("migrated turn %+v: %v", tu, err)
	}

	// New lines continue the sequence.
	res, err := s.ReceiveTurn(ctx, upgradeReceive(turn.TurnKey{SessionID: "s1", TurnID: "t2"}, now))
	if err != nil || res.Seq != 3 {
		t.Fatalf("ReceiveTurn after Migrate: seq %d, %v; want 3", res.Seq, err)
	}
	h := sha256.Sum256([]byte("key"))
	c := turn.Completion{KeyHash: h, SessionID: k.SessionID, TurnID: k.TurnID, CallID: "c0", CallName: "approve", Status: turn.CompletionIssued, CreatedAt: now}
	if err := s.IssueCompletion(ctx, c); err != nil {
		t.Fatalf("IssueCompletion for a turn recorded at version 1: %v", err)
	}
	park := turn.Commit{Key: k, LeaseOwner: "owner", Parks: []turn.Park{{KeyHash: h, Deadline: now.Add(time.Hour)}},
		Lines: []turn.Line{{CallID: "c0", Kind: turn.LineCallPending, At: now}}}
	if err := s.Commit(ctx, park); err != nil {
		t.Fatalf("Commit parking: %v", err)
	}
	if got, err := s.GetCompletion(ctx, h); err != nil || got.Status != turn.CompletionPending {
		t.Fatalf("GetCompletion = %v, %v; want it pending", got.Status, err)
	}
	lines, err = s.Ledger(ctx, "s1", 2, 10)
	if err != nil || len(lines) != 2 || lines[0].Seq != 3 || lines[1].Seq != 4 || lines[1].Kind != turn.LineCallPending {
		t.Fatalf("ledger after new writes: %+v, %v", lines, err)
	}
}

func upgradeReceive(k turn.TurnKey, now time.Time) turn.Receive {
	return turn.Receive{
		Session: turn.Session{ID: k.SessionID, CreatedAt: now},
		Turn: turn.Turn{SessionID: k.SessionID, ID: k.TurnID, Status: turn.StatusRunning,
			Mode: dispatch.ModeOrdered, FailurePolicy: dispatch.PolicyIsolate,
			Calls: []turn.Call{{ID: "c0", Name: "approve"}}, Hash: "h", CreatedAt: now},
		Line:       turn.Line{Kind: turn.LineTurnReceived, At: now},
		LeaseOwner: "owner",
		LeaseUntil: now.Add(time.Hour),
	}
}
