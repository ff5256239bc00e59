package postgres_test

import (
	"runtime"
	"testing"

	"github.com/turnd/turnd/internal/pgtest"
	"github.com/turnd/turnd/store/postgres"
	"github.com/turnd/turnd/turn"
	"github.com/turnd/turnd/turn/storetest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) turn.Store { return pgtest.Store(t) })
}

// TestConformanceOneGroupStatement runs the suite with one group-commit
// statement of a kind at a time (the default runs at least two): each batch
// then waits for the one before it.
func TestConformanceOneGroupStatement(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) turn.Store {
		return pgtest.StoreWith(t, postgres.Options{GroupStatements: 1})
	})
}

// TestConformanceSharded runs the suite as on Citus (Options.Sharded):
// the claims and lease renewals read across sessions and then write each
// row by a statement routed to its session.
func TestConformanceSharded(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) turn.Store {
		return pgtest.StoreWith(t, postgres.Options{Sharded: true})
	})
}

// TestConformancePgxEncoding runs the suite on a pool that does not keep
// prepared statements (default_query_exec_mode=describe_exec, as behind a
// transaction-pooling proxy): the recording statement then goes through
// pgx's own encoding instead of execBinary.
func TestConformancePgxEncoding(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) turn.Store {
		return pgtest.StoreWith(t, postgres.Options{}, "default_query_exec_mode", "describe_exec")
	})
}

// TestDefaultGroupStatementsBounded: on a machine of many cores the default
// stays within what Open accepts (not parallel: it sets GOMAXPROCS).
func TestDefaultGroupStatementsBounded(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(512))
	o := postgres.Options{}.WithDefaults()
	if o.GroupStatements != 64 {
		t.Errorf("GroupStatements on 512 cores: %d, want the cap of 64", o.GroupStatements)
	}
	runtime.GOMAXPROCS(1)
	if o := (postgres.Options{}).WithDefaults(); o.GroupStatements != 2 {
		t.Errorf("GroupStatements on 1 core: %d, want 2", o.GroupStatements)
	}
}
