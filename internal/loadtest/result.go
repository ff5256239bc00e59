package loadtest

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Result summarises one measured loop.
type Result struct {
	// Ops is the number of operations that succeeded within the window.
	Ops int
	// Errors is the number of operations that failed; their latencies are
	// not in the percentiles.
	Errors int
	// Elapsed is the measured window: from the moment every client was
	// connected and warmed up until the last operation of the window
	// finished.
	Elapsed time.Duration
	// PerSec is Ops / Elapsed.
	PerSec float64
	// P50, P90, P99 and Max are exact percentiles (nearest rank) of the
	// latencies of the successful operations; Mean is their average.
	P50, P90, P99, Max, Mean time.Duration

	// latencies are the sorted latencies of the successful operations,
	// kept so that results of several runs can be combined exactly.
	latencies []time.Duration
}

// String formats r on one line.
func (r Result) String() string {
	return fmt.Sprintf("%d ops in %v: %.1f/s, p50 %v p99 %v max %v, %d errors",
		r.Ops, r.Elapsed.Round(time.Millisecond), r.PerSec,
		r.P50.Round(10*time.Microsecond), r.P99.Round(10*time.Microsecond), r.Max.Round(10*time.Microsecond), r.Errors)
}

// Summarize builds a Result from the unsorted latencies of the successful
// operations, the count of failed ones and the window's length; it sorts
// lat in place and keeps it.
func Summarize(lat []time.Duration, errors int, elapsed time.Duration) Result {
	slices.Sort(lat)
	r := Result{Ops: len(lat), Errors: errors, Elapsed: elapsed, latencies: lat}
	if elapsed > 0 {
		r.PerSec = float64(len(lat)) / elapsed.Seconds()
	}
	r.P50 = Percentile(lat, 0.50)
	r.P90 = Percentile(lat, 0.90)
	r.P99 = Percentile(lat, 0.99)
	if len(lat) > 0 {
		r.Max = lat[len(lat)-1]
		var sum time.Duration
		for _, d := range lat {
			sum += d
		}
		r.Mean = sum / time.Duration(len(lat))
	}
	return r
}

// Combine merges the results of several runs of the same loop as if they
// were one run as long as their windows together: operations and time add
// up, and the percentiles are those of every latency recorded.
func Combine(rs ...Result) Result {
	var (
		lat     []time.Duration
		errors  int
		elapsed time.Duration
	)
	for _, r := range rs {
		lat = append(lat, r.latencies...)
		errors += r.Errors
		elapsed += r.Elapsed
	}
	return Summarize(lat, errors, elapsed)
}

// Percentile returns the nearest-rank p-quantile of sorted (0 < p ≤ 1): the
// smallest latency that at least p of the recorded latencies do not exceed.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}
