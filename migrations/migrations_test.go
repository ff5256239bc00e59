package migrations_test

import (
	"strings"
	"testing"

	"github.com/turnd/turnd/migrations"
)

func TestList(t *testing.T) {
	t.Parallel()
	for _, d := range []string{migrations.Postgres, migrations.SQLite} {
		t.Run(d, func(t *testing.T) {
			t.Parallel()
			ms, err := migrations.List(d)
			if err != nil {
				t.Fatalf("List(%q): %v", d, err)
			}
			if len(ms) == 0 {
				t.Fatalf("List(%q): no migrations", d)
			}
			for i, m := range ms {
				if m.Version != i+1 {
					t.Errorf("migration %d has version %d", i, m.Version)
				}
				if m.Name == "" || strings.TrimSpace(m.SQL) == "" {
					t.Errorf("migration %d: empty name or SQL", m.Version)
				}
			}
			if got, want := migrations.Latest(d), ms[len(ms)-1].Version; got != want {
				t.Errorf("Latest(%q) = %d, want %d", d, got, want)
			}
			// The returned slice is the caller's: changing it changes nothing.
			ms[0].SQL = ""
			again, _ := migrations.List(d)
			if again[0].SQL == "" {
				t.Error("List returned shared state")
			}
		})
	}
}

// The stores move in step: both dialects carry the same versions and names.
func TestDialectsInStep(t *testing.T) {
	t.Parallel()
	pg, err := migrations.List(migrations.Postgres)
	if err != nil {
		t.Fatal(err)
	}
	lite, err := migrations.List(migrations.SQLite)
	if err != nil {
		t.Fatal(err)
	}
	if len(pg) != len(lite) {
		t.Fatalf("postgres has %d migrations, sqlite %d", len(pg), len(lite))
	}
	for i := range pg {
		if pg[i].Version != lite[i].Version || pg[i].Name != lite[i].Name {
			t.Errorf("migration %d: postgres %d_%s, sqlite %d_%s", i, pg[i].Version, pg[i].Name, lite[i].Version, lite[i].Name)
		}
	}
}

func TestUnknownDialect(t *testing.T) {
	t.Parallel()
	if _, err := migrations.List("oracle"); err == nil {
		t.Error("List(oracle): no error")
	}
	if v := migrations.Latest("oracle"); v != 0 {
		t.Errorf("Latest(oracle) = %d, want 0", v)
	}
}
