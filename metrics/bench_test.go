package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/turnd/turnd/turn"
)

// BenchmarkObserveCall is what metrics add to one call that runs its tool
// once: the attempt bracket and the accounting.
func BenchmarkObserveCall(b *testing.B) {
	benchParallel(b, func(m *Metrics) {
		m.AttemptStarted("echo")
		m.AttemptFinished("echo", "ok", time.Millisecond)
		m.CallAccounted("echo", turn.CallOK, 2*time.Millisecond)
	})
}

// BenchmarkObserveRequest is what metrics add to one HTTP request.
func BenchmarkObserveRequest(b *testing.B) {
	benchParallel(b, func(m *Metrics) {
		m.ObserveRequest("POST", "/v1/sessions/{session_id}/turns", 200, 3*time.Millisecond)
	})
}

// benchParallel runs observe on fresh metrics from parallel goroutines,
// reporting allocations.
func benchParallel(b *testing.B, observe func(m *Metrics)) {
	m, err := New(prometheus.NewRegistry(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			observe(m)
		}
	})
}
