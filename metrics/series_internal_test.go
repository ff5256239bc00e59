package metrics

import (
	"fmt"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// A cached child is the vector's own: what goes through the cache shows in
// the vector, for keys made concurrently and for keys past the cache's cap.
func TestSeriesCache(t *testing.T) {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "x_total", Help: "x"}, []string{"k"})
	built := 0
	var mu sync.Mutex
	s := newSeries(func(k string) prometheus.Counter {
		mu.Lock()
		built++
		mu.Unlock()
		return vec.WithLabelValues(k)
	})
	keys := maxCachedSeries + 10
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Go(func() {
			for i := range keys {
				s.of(fmt.Sprint(i)).Inc()
			}
		})
	}
	wg.Wait()
	for _, i := range []int{0, 1, maxCachedSeries - 1, maxCachedSeries, keys - 1} {
		if got := counterValue(t, vec.WithLabelValues(fmt.Sprint(i))); got != 4 {
			t.Errorf("series %d counted %v, want 4", i, got)
		}
	}
	if n := len(*s.m.Load()); n != maxCachedSeries {
		t.Errorf("cache holds %d series, want its cap %d", n, maxCachedSeries)
	}
	// Cached keys are built once; the ones past the cap on every use.
	if want := maxCachedSeries + 4*10; built != want {
		t.Errorf("built %d children, want %d", built, want)
	}
	if s.of("0") != vec.WithLabelValues("0") {
		t.Error("the cached child is not the vector's")
	}
}
