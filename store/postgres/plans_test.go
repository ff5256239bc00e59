package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/turnd/turnd/internal/pgtest"
	"github.com/turnd/turnd/store/postgres"
	"github.com/turnd/turnd/turn"
	"github.com/turnd/turnd/turn/storetest"
)

// recordPlans records n turns of one call, one after another (each a
// batch of its own, as under a light load), and counts the plans the group
// connections made for the recording statements: custom (planned for the
// values at hand) and generic (planned once).
func recordPlans(t *testing.T, s *postgres.Store, n int) (custom, generic int64) {
	t.Helper()
	ctx := t.Context()
	if err := s.CreateSession(ctx, turn.Session{ID: "light", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := s.RecordTurn(ctx, storetest.WholeTurn("light", fmt.Sprintf("t%d", i), 1)); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range s.GroupPool().AcquireAllIdle(ctx) {
		var cu, ge int64
		err := c.QueryRow(ctx, `SELECT coalesce(sum(custom_plans), 0), coalesce(sum(generic_plans), 0)
FROM pg_prepared_statements WHERE name LIKE 'turnd_record_%'`).Scan(&cu, &ge)
		c.Release()
		if err != nil {
			t.Fatal(err)
		}
		custom, generic = custom+cu, generic+ge
	}
	return custom, generic
}

// TestGroupStatementsPlanOnce: the recording statement is planned once per
// connection, not for each batch's values, however small the first batches
// are; other statements keep PostgreSQL's default.
func TestGroupStatementsPlanOnce(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t)
	custom, generic := recordPlans(t, s, 12)
	if custom != 0 || generic != 12 {
		t.Errorf("recording 12 turns one at a time: %d custom and %d generic plans, want 0 and 12", custom, generic)
	}
	var mode string
	if err := s.Pool().QueryRow(t.Context(), "SHOW plan_cache_mode").Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if mode != "auto" {
		t.Errorf("the main pool's plan_cache_mode is %q, want PostgreSQL's default (auto)", mode)
	}
}

// TestGroupStatementsNoPlanCache: on a pool that does not prepare its
// statements (as behind a transaction-pooling proxy) there is no plan to
// cache, and the group connections are left as they are.
func TestGroupStatementsNoPlanCache(t *testing.T) {
	t.Parallel()
	s := pgtest.StoreWith(t, postgres.Options{}, "default_query_exec_mode", "describe_exec")
	var mode string
	if err := s.GroupPool().QueryRow(t.Context(), "SHOW plan_cache_mode").Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if mode != "auto" {
		t.Errorf("group pool plan_cache_mode %q with describe_exec, want auto", mode)
	}
}

// TestGroupStatementsPlanCacheModeFromURL: a plan_cache_mode in the
// connection string is left as it is (here PostgreSQL's default, under
// which each of the first lone batches is planned for its values).
func TestGroupStatementsPlanCacheModeFromURL(t *testing.T) {
	t.Parallel()
	s := pgtest.StoreWith(t, postgres.Options{}, "plan_cache_mode", "auto")
	custom, _ := recordPlans(t, s, 12)
	if custom < 5 {
		t.Errorf("with plan_cache_mode=auto: %d custom plans of 12 lone batches, want at least 5", custom)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var mode string
	if err := s.GroupPool().QueryRow(ctx, "SHOW plan_cache_mode").Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if mode != "auto" {
		t.Errorf("group pool plan_cache_mode %q, want auto from the URL", mode)
	}
}
