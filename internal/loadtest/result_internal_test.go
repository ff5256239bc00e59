package loadtest

import (
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	t.Parallel()
	ms := func(ns ...int) []time.Duration {
		out := make([]time.Duration, len(ns))
		for i, n := range ns {
			out[i] = time.Duration(n) * time.Millisecond
		}
		return out
	}
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i+1) * time.Millisecond
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"empty", nil, 0.5, 0},
		{"one", ms(7), 0.99, 7 * time.Millisecond},
		{"median of two is the lower", ms(1, 2), 0.5, time.Millisecond},
		{"median of three", ms(1, 2, 3), 0.5, 2 * time.Millisecond},
		{"p50 of 1..100", hundred, 0.5, 50 * time.Millisecond},
		{"p99 of 1..100", hundred, 0.99, 99 * time.Millisecond},
		{"p100 is the max", hundred, 1, 100 * time.Millisecond},
		{"tiny p is the min", hundred, 0.0001, time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Percentile(tt.sorted, tt.p); got != tt.want {
				t.Errorf("Percentile(%v) = %v, want %v", tt.p, got, tt.want)
			}
		})
	}
}

func TestSummarizeAndCombine(t *testing.T) {
	t.Parallel()
	a := Summarize([]time.Duration{3 * time.Millisecond, time.Millisecond, 2 * time.Millisecond}, 1, time.Second)
	if a.Ops != 3 || a.Errors != 1 || a.PerSec != 3 || a.P50 != 2*time.Millisecond || a.Max != 3*time.Millisecond {
		t.Errorf("summarize: %+v", a)
	}
	if a.P90 != 3*time.Millisecond || a.Mean != 2*time.Millisecond {
		t.Errorf("summarize: p90 %v mean %v, want 3ms and 2ms", a.P90, a.Mean)
	}
	b := Summarize([]time.Duration{10 * time.Millisecond}, 0, time.Second)
	c := Combine(a, b)
	if c.Ops != 4 || c.Errors != 1 || c.Elapsed != 2*time.Second || c.PerSec != 2 {
		t.Errorf("Combine: %+v", c)
	}
	if c.P50 != 2*time.Millisecond || c.P99 != 10*time.Millisecond || c.Max != 10*time.Millisecond {
		t.Errorf("Combine percentiles: p50 %v p99 %v max %v", c.P50, c.P99, c.Max)
	}
	if a.Ops != 3 || a.latencies[0] != time.Millisecond {
		t.Errorf("Combine changed its input: %+v", a)
	}
}
