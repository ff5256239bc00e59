package turn_test

import (
	"testing"

	"github.com/turnd/turnd/turn"
)

// BenchmarkTurnTraced is BenchmarkTurn traced, every span sampled, to an
// in-memory exporter (emptied as it goes): the cost of tracing itself.
func BenchmarkTurnTraced(b *testing.B) {
	for _, content := range []bool{false, true} {
		name := "content=false"
		if content {
			name = "content=true"
		}
		b.Run(name, func(b *testing.B) {
			tr := newTraced(b)
			n := 0
			tr.every = func() {
				if n++; n%4096 == 0 {
					tr.exp.Reset()
				}
			}
			benchTurns(b, func(c *turn.Config) {
				c.TracerProvider = tr.tp
				c.TraceContent = content
			})
		})
	}
}
