package postgres_test

import (
	"testing"

	"github.com/turnd/turnd/internal/pgtest"
	"github.com/turnd/turnd/turn"
	"github.com/turnd/turnd/turn/storetest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) turn.Store { return pgtest.Store(t) })
}
