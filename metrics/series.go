package metrics

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// maxCachedSeries bounds a series cache: past it, children are looked up in
// their vector each time, as without the cache.
const maxCachedSeries = 4096

// series caches the children of one or more vectors under one key of label
// values. A vector's WithLabelValues validates and hashes the values and
// takes the vector's lock on every call, and the hot path asks for the same
// few children several times per call of every turn. Readers load an
// immutable map without a lock; a new key copies it (keys are bounded: the
// tools times the statuses, the routes times the codes). turnd never
// deletes a child, so a cached one stays the vector's.
type series[K comparable, T any] struct {
	m     atomic.Pointer[map[K]T]
	mu    sync.Mutex
	build func(K) T
}

func newSeries[K comparable, T any](build func(K) T) *series[K, T] {
	return &series[K, T]{build: build}
}

// of returns the children for k, making them on first use.
func (s *series[K, T]) of(k K) T {
	if m := s.m.Load(); m != nil {
		if v, ok := (*m)[k]; ok {
			return v
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.m.Load()
	var n int
	if old != nil {
		if v, ok := (*old)[k]; ok {
			return v
		}
		n = len(*old)
	}
	v := s.build(k)
	if n >= maxCachedSeries {
		return v
	}
	next := make(map[K]T, n+1)
	if old != nil {
		for k, v := range *old {
			next[k] = v
		}
	}
	next[k] = v
	s.m.Store(&next)
	return v
}

// callSeries are the children one call's accounting touches.
type callSeries struct {
	dispatch prometheus.Observer
	calls    prometheus.Counter
}

// attemptSeries are the children one attempt's end touches.
type attemptSeries struct {
	inFlight prometheus.Gauge
	attempt  prometheus.Observer
}

// requestSeries are the children one HTTP request touches.
type requestSeries struct {
	requests    prometheus.Counter
	requestTime prometheus.Observer
}

// requestKey is a request's label values.
type requestKey struct {
	method, route string
	code          int
}
