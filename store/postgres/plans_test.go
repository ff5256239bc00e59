package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/turnd/turnd/internal/pgtest"
	"github.com/turnd/turnd/store/postgres"
	"github.com/turnd/turnd/turn"
	"github.com/turnd/turnd/turn/storetest"
)

// planStore opens a store for these tests, with params added to its
// connection string; the pool's health check, which takes idle connections
// too, waits beyond the test. They count plans in pg_prepared_statements
// (PostgreSQL 14 and later).
func planStore(t *testing.T, params ...string) *postgres.Store {
	t.Helper()
	s := pgtest.StoreWith(t, postgres.Options{HealthCheckPeriod: time.Hour}, params...)
	var version int
	if err := s.Pool().QueryRow(t.Context(), "SELECT current_setting('server_version_num')::int").Scan(&version); err != nil {
		t.Fatal(err)
	}
	if version < 140000 {
		t.Skipf("PostgreSQL %d counts no plans in pg_prepared_statements", version)
	}
	return s
}

// lightLoad records n turns of one call and looks n turns up, one after
// another (each a batch of its own, as under a light load).
func lightLoad(t *testing.T, s *postgres.Store, n int) {
	t.Helper()
	ctx := t.Context()
	if err := s.CreateSession(ctx, turn.Session{ID: "light", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		tid := fmt.Sprintf("t%d", i)
		if _, err := s.LookupTurn(ctx, "light", tid, []string{tid + "-c0"}); err != nil {
			t.Fatal(err)
		}
		if err := s.RecordTurn(ctx, storetest.WholeTurn("light", tid, 1)); err != nil {
			t.Fatal(err)
		}
	}
}

// groupPlans counts the plans the group connections made for the prepared
// statements whose text starts with prefix: custom (planned for the values
// at hand) and generic (planned once).
func groupPlans(t *testing.T, s *postgres.Store, prefix string) (custom, generic int64) {
	t.Helper()
	ctx := t.Context()
	for _, c := range s.GroupPool().AcquireAllIdle(ctx) {
		var cu, ge int64
		err := c.QueryRow(ctx, `SELECT coalesce(sum(custom_plans), 0), coalesce(sum(generic_plans), 0)
FROM pg_prepared_statements WHERE starts_with(statement, $1)`, prefix).Scan(&cu, &ge)
		c.Release()
		if err != nil {
			t.Fatal(err)
		}
		custom, generic = custom+cu, generic+ge
	}
	return custom, generic
}

// planCacheMode is the plan_cache_mode of a connection of pool.
func planCacheMode(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var mode string
	if err := pool.QueryRow(ctx, "SHOW plan_cache_mode").Scan(&mode); err != nil {
		t.Fatal(err)
	}
	return mode
}

const (
	recordPrefix = "WITH answered AS"
	lookupPrefix = "SELECT q.ord"
)

// TestGroupStatementsPlanOnce: the recording and lookup statements use
// their generic plans, not plans for each batch's values, however small the
// first batches are; other statements keep PostgreSQL's default.
func TestGroupStatementsPlanOnce(t *testing.T) {
	t.Parallel()
	s := planStore(t)
	lightLoad(t, s, 12)
	for _, st := range []struct{ what, prefix string }{{"recording", recordPrefix}, {"looking up", lookupPrefix}} {
		if custom, generic := groupPlans(t, s, st.prefix); custom != 0 || generic != 12 {
			t.Errorf("%s 12 turns one at a time: %d custom and %d generic plans, want 0 and 12", st.what, custom, generic)
		}
	}
	if mode := planCacheMode(t, s.Pool()); mode != "auto" {
		t.Errorf("the main pool's plan_cache_mode is %q, want PostgreSQL's default (auto)", mode)
	}
}

// TestGroupStatementsNoPlanCache: on a pool that does not prepare its
// statements (as behind a transaction-pooling proxy) there is no plan to
// cache, and the group connections are left as they are.
func TestGroupStatementsNoPlanCache(t *testing.T) {
	t.Parallel()
	s := planStore(t, "default_query_exec_mode", "describe_exec")
	if mode := planCacheMode(t, s.GroupPool()); mode != "auto" {
		t.Errorf("group pool plan_cache_mode %q with describe_exec, want auto", mode)
	}
}

// TestGroupStatementsPlanCacheModeFromURL: a plan_cache_mode in the
// connection string, as a parameter or in options, is left as it is (here
// PostgreSQL's default, under which each of the first lone batches is
// planned for its values).
func TestGroupStatementsPlanCacheModeFromURL(t *testing.T) {
	t.Parallel()
	for _, params := range [][]string{{"plan_cache_mode", "auto"}, {"options", "-cplan_cache_mode=auto"}} {
		t.Run(params[0], func(t *testing.T) {
			t.Parallel()
			s := planStore(t, params...)
			lightLoad(t, s, 12)
			if custom, _ := groupPlans(t, s, recordPrefix); custom < 5 {
				t.Errorf("with %s: %d custom plans of 12 lone recordings, want at least 5", params, custom)
			}
			if mode := planCacheMode(t, s.GroupPool()); mode != "auto" {
				t.Errorf("group pool plan_cache_mode %q, want auto from the connection string", mode)
			}
		})
	}
}

// TestLedgerPlans: a turn's ledger page is read by ledger_batches_turn and
// a session's by the primary key, in the generic plans pgx's prepared
// statements settle on as in plans for the values at hand, on a session
// of many turns' rows.
func TestLedgerPlans(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t)
	ctx := t.Context()
	if err := s.CreateSession(ctx, turn.Session{ID: "s", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	conn := planConn(t, s,
		`INSERT INTO ledger_batches (session_id, turn_id, last_seq, first_seq, lines)
SELECT 's', 't' || (g % 1000), g, g, '[{"t":"t","c":"","k":"call_admitted","a":0}]' FROM generate_series(1, 20000) g`,
		`UPDATE sessions SET last_seq = 20000 WHERE id = 's'`,
		`ANALYZE ledger_batches`,
	)
	tests := []struct {
		name, sql, params, index string
	}{
		{"turn", postgres.TurnLedgerSQL, `('s', 't7', 0, 500, 1048576)`, "ledger_batches_turn"},
		{"session", postgres.LedgerSQL, `('s', 100, 500, 1048576)`, "ledger_batches_pkey"},
	}
	for _, tt := range tests {
		for mode, plan := range explainBoth(t, conn, tt.name, tt.sql, tt.params) {
			if !strings.Contains(plan, "Index Scan using "+tt.index) || strings.Contains(plan, "Seq Scan on ledger_batches") {
				t.Errorf("%s ledger page (%s) is not read by %s:\n%s", tt.name, mode, tt.index, plan)
			}
		}
	}
}

// planConn is a connection of s's main pool, released when the test ends,
// on which setup's statements have run.
func planConn(t *testing.T, s *postgres.Store, setup ...string) *pgxpool.Conn {
	t.Helper()
	ctx := t.Context()
	conn, err := s.Pool().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Release)
	for _, q := range setup {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	return conn
}

// explainBoth is the plan of sql, prepared as name and run with params, in
// each plan_cache_mode that forces a plan (custom, then generic), by mode.
func explainBoth(t *testing.T, conn *pgxpool.Conn, name, sql, params string) map[string]string {
	t.Helper()
	ctx := t.Context()
	plans := map[string]string{}
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		if _, err := conn.Exec(ctx, "SET plan_cache_mode = "+mode); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, "PREPARE plan_"+name+" AS "+sql); err != nil {
			t.Fatal(err)
		}
		rows, err := conn.Query(ctx, "EXPLAIN EXECUTE plan_"+name+params)
		if err != nil {
			t.Fatal(err)
		}
		var plan strings.Builder
		for rows.Next() {
			var l string
			if err := rows.Scan(&l); err != nil {
				t.Fatal(err)
			}
			plan.WriteString(l + "\n")
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		plans[mode] = plan.String()
		if _, err := conn.Exec(ctx, "DEALLOCATE plan_"+name); err != nil {
			t.Fatal(err)
		}
	}
	return plans
}
