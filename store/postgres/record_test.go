package postgres_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/turnd/turnd/internal/pgtest"
	"github.com/turnd/turnd/store/postgres"
	"github.com/turnd/turnd/turn"
	"github.com/turnd/turnd/turn/storetest"
)

// TestRecordBatchRefusals: one recording statement with a taken turn id,
// an answered call id, a missing session and two fresh turns. The
// statement without ON CONFLICT fails on the taken id and the batch runs
// again with it (the prepared statements show which ran); each turn gets
// its own outcome, the fresh ones are written with gap-free ledgers, and
// the refused ones write nothing.
func TestRecordBatchRefusals(t *testing.T) {
	t.Parallel()
	// Statements prepared and cached by pgx (its default mode, whose
	// prepared statements show which variant ran), and described before
	// each run (describe_exec), whose are not checked.
	for _, mode := range []string{"", "describe_exec"} {
		t.Run("mode="+mode, func(t *testing.T) {
			t.Parallel()
			var params []string
			if mode != "" {
				params = []string{"default_query_exec_mode", mode}
			}
			testRecordBatchRefusals(t, pgtest.StoreWith(t, postgres.Options{HealthCheckPeriod: time.Hour}, params...), mode == "")
		})
	}
}

func testRecordBatchRefusals(t *testing.T, s *postgres.Store, prepared bool) {
	ctx := t.Context()
	for _, id := range []string{"taken", "answered", "fresh1", "fresh2"} {
		if err := s.CreateSession(ctx, turn.Session{ID: id, CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.RecordTurn(ctx, storetest.WholeTurn("taken", "t1", 2)); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordTurn(ctx, storetest.WholeTurn("answered", "a1", 2)); err != nil {
		t.Fatal(err)
	}
	// A fresh batch runs the statement without ON CONFLICT only.
	outcomes, err := s.RecordBatch(ctx, []turn.Record{storetest.WholeTurn("fresh1", "f0", 1), storetest.WholeTurn("fresh2", "g0", 1)})
	if err != nil || outcomes[0] != nil || outcomes[1] != nil {
		t.Fatalf("fresh batch: %v, %v", outcomes, err)
	}
	if fast, safe := recordVariantsPrepared(t, s); prepared && (!fast || safe) {
		t.Fatalf("after a fresh batch: statement without ON CONFLICT prepared %v, with it %v; want true, false", fast, safe)
	}
	ledgerBefore := ledgerOf(t, s, "taken")

	// a2 reuses a1's first call id (WholeTurn names them <turn>-c<i>); the
	// repost of t1 has call ids of its own, so that only its turn id is
	// taken (answered calls are checked first, and need no conflict).
	answered := storetest.WholeTurnWithCalls("answered", "a2", "a1-c0")
	taken := storetest.WholeTurnWithCalls("taken", "t1", "new-c0", "new-c1")
	batch := []turn.Record{
		storetest.WholeTurn("fresh1", "f1", 3),
		taken,
		answered,
		storetest.WholeTurn("missing", "m1", 1),
		storetest.WholeTurn("fresh2", "g1", 2),
	}
	outcomes, err = s.RecordBatch(ctx, batch)
	if err != nil {
		t.Fatalf("RecordBatch: %v", err)
	}
	want := []error{nil, turn.ErrTurnExists, turn.ErrCallsAnswered, turn.ErrNotFound, nil}
	for i, w := range want {
		if (w == nil) != (outcomes[i] == nil) || (w != nil && !errors.Is(outcomes[i], w)) {
			t.Errorf("turn %s/%s: outcome %v, want %v", batch[i].Turn.SessionID, batch[i].Turn.ID, outcomes[i], w)
		}
	}
	if _, safe := recordVariantsPrepared(t, s); prepared && !safe {
		t.Error("the batch with a taken turn id did not run the statement with ON CONFLICT")
	}

	for _, c := range []struct {
		session string
		turns   []string
		lines   int
	}{{"fresh1", []string{"f0", "f1"}, 4 + 8}, {"fresh2", []string{"g0", "g1"}, 4 + 6}} {
		lines := ledgerOf(t, s, c.session)
		if len(lines) != c.lines {
			t.Errorf("session %s: %d ledger lines, want %d", c.session, len(lines), c.lines)
		}
		for i, l := range lines {
			if l.Seq != int64(i+1) {
				t.Fatalf("session %s: line %d has seq %d: the ledger has a gap", c.session, i, l.Seq)
			}
		}
		for _, id := range c.turns {
			if _, err := s.GetTurn(ctx, turn.TurnKey{SessionID: c.session, TurnID: id}); err != nil {
				t.Errorf("turn %s/%s: %v", c.session, id, err)
			}
		}
	}
	if got := ledgerOf(t, s, "taken"); len(got) != len(ledgerBefore) {
		t.Errorf("the taken turn's session has %d ledger lines, had %d", len(got), len(ledgerBefore))
	}
	if _, err := s.GetTurn(ctx, turn.TurnKey{SessionID: "answered", TurnID: "a2"}); !errors.Is(err, turn.ErrNotFound) {
		t.Errorf("turn answered/a2, refused: %v, want ErrNotFound", err)
	}
}

// TestRecordBatchOneSessionTwice: the recording statement gives a turn
// all of its session's seqs of the statement, so a batch with two turns of
// one session is refused whole, writing nothing (the group commit never
// makes one).
func TestRecordBatchOneSessionTwice(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := pgtest.Store(t)
	if err := s.CreateSession(ctx, turn.Session{ID: "s", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	_, err := s.RecordBatch(ctx, []turn.Record{storetest.WholeTurn("s", "t1", 1), storetest.WholeTurn("s", "t2", 2)})
	if err == nil || !strings.Contains(err.Error(), "two calls of session s in one statement") {
		t.Fatalf("a batch with two turns of one session: %v, want it refused", err)
	}
	if lines := ledgerOf(t, s, "s"); len(lines) != 0 {
		t.Errorf("the refused batch wrote %d ledger lines", len(lines))
	}
	for _, id := range []string{"t1", "t2"} {
		if _, err := s.GetTurn(ctx, turn.TurnKey{SessionID: "s", TurnID: id}); !errors.Is(err, turn.ErrNotFound) {
			t.Errorf("turn s/%s of the refused batch: %v, want ErrNotFound", id, err)
		}
	}
}

// TestRecordStatementsPrepare: every variant of the recording statement
// (outputs, webhooks, ON CONFLICT, and their combinations) is valid SQL
// against the schema, including those no other test runs.
func TestRecordStatementsPrepare(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t)
	c, err := s.GroupPool().Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	sqls := postgres.RecordStatements()
	if len(sqls) != 8 {
		t.Fatalf("%d recording statements, want 8 (outputs × webhooks × ON CONFLICT)", len(sqls))
	}
	for i, sql := range sqls {
		if _, err := c.Conn().Prepare(t.Context(), fmt.Sprintf("record_check_%d", i), sql); err != nil {
			t.Errorf("variant %d: %v", i, err)
		}
		if strings.Contains(sql, "ON CONFLICT (session_id, id) DO NOTHING") != (i&4 != 0) {
			t.Errorf("variant %d: ON CONFLICT on turns is %v, want %v", i, !(i&4 != 0), i&4 != 0)
		}
	}
}

// recordVariantsPrepared reports whether the group connections prepared
// the recording statement without ON CONFLICT (variant 0) and with it
// (variant 4), for turns without outputs or webhooks.
func recordVariantsPrepared(t *testing.T, s *postgres.Store) (fast, safe bool) {
	t.Helper()
	ctx := t.Context()
	for _, c := range s.GroupPool().AcquireAllIdle(ctx) {
		rows, err := c.Query(ctx, `SELECT statement FROM pg_prepared_statements`)
		if err != nil {
			c.Release()
			t.Fatal(err)
		}
		stmts, err := pgx.CollectRows(rows, pgx.RowTo[string])
		c.Release()
		if err != nil {
			t.Fatal(err)
		}
		fast = fast || slices.Contains(stmts, postgres.RecordStatements()[0])
		safe = safe || slices.Contains(stmts, postgres.RecordStatements()[4])
	}
	return fast, safe
}

func ledgerOf(t *testing.T, s *postgres.Store, session string) []turn.Line {
	t.Helper()
	lines, err := s.Ledger(t.Context(), session, 0, 1000, turn.MaxPageBytes)
	if err != nil {
		t.Fatal(fmt.Errorf("ledger of %s: %w", session, err))
	}
	return lines
}
