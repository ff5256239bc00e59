package postgres_test

import (
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

// TestConformanceGroupStatements runs the suite with several group-commit
// statements at once, as on a machine with more cores than the default of
// one per two cores gives here: the concurrent tests then exercise the
// keyed batching of statements running side by side.
func TestConformanceGroupStatements(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) turn.Store {
		s, err := postgres.Open(t.Context(), pgtest.URL(t), postgres.Options{GroupStatements: 3})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		return s
	})
}
