// Package teststores opens real, migrated stores of each kind for tests:
// SQLite in a file of the test's own, PostgreSQL in a schema of its own
// (see internal/pgtest). Every store is closed when its test ends.
package teststores

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/turnd/turnd/internal/pgtest"
	"github.com/turnd/turnd/store/postgres"
	"github.com/turnd/turnd/store/sqlite"
	"github.com/turnd/turnd/turn"
)

// SQLite opens a migrated SQLite store in a fresh file.
func SQLite(t testing.TB) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "turnd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if err := st.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return st
}

// Postgres opens a migrated PostgreSQL store on a fresh schema, with up to
// 8 connections.
func Postgres(t testing.TB) *postgres.Store {
	t.Helper()
	return pgtest.StoreWith(t, postgres.Options{MaxConns: 8})
}

// Kind is a kind of store and how a test opens one.
type Kind struct {
	Name string
	Open func(testing.TB) turn.Store
}

// Kinds are the kinds of store, SQLite first.
var Kinds = []Kind{
	{"sqlite", func(t testing.TB) turn.Store { return SQLite(t) }},
	{"postgres", func(t testing.TB) turn.Store { return Postgres(t) }},
}

// Each runs f as a parallel subtest of t for each kind of store, named for
// the kind, with the kind's Open.
func Each(t *testing.T, f func(t *testing.T, open func(testing.TB) turn.Store)) {
	t.Helper()
	for _, k := range Kinds {
		t.Run(k.Name, func(t *testing.T) {
			t.Parallel()
			f(t, k.Open)
		})
	}
}
