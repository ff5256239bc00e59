package sqlite_test

import (
	"errors"
	"path/filepath"
	"testing"

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
