package bench

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// MaxLatency bounds every latency a Dist may draw: the builtin sleep tool
// sleeps at most 10 minutes, and a bench turn held longer than that would
// outlast turnd's maximum wait.
const MaxLatency = 10 * time.Minute

// Dist is a distribution of tool latencies, written as
//
//	fixed:5ms          always 5ms ("0" or "none": no latency)
//	uniform:1ms-20ms   uniformly between 1ms and 20ms
//	exp:10ms           exponential with a mean of 10ms (capped at MaxLatency)
//
// The zero Dist is "none".
type Dist struct {
	Kind     string        // "fixed", "uniform" or "exp"; "" is none
	Min, Max time.Duration // fixed: Min; uniform: [Min, Max]
	Mean     time.Duration // exp
}

// ParseDist parses a latency distribution (see Dist).
func ParseDist(s string) (Dist, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "0" || s == "none" {
		return Dist{}, nil
	}
	kind, arg, ok := strings.Cut(s, ":")
	if !ok {
		return Dist{}, fmt.Errorf("latency %q: want fixed:D, uniform:D1-D2 or exp:MEAN (e.g. fixed:5ms)", s)
	}
	dur := func(v string) (time.Duration, error) {
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil {
			return 0, fmt.Errorf("latency %q: %q is not a duration like 5ms", s, v)
		}
		if d < 0 {
			return 0, fmt.Errorf("latency %q: %v is negative", s, d)
		}
		if d > MaxLatency {
			return 0, fmt.Errorf("latency %q: %v is over the maximum of %v", s, d, MaxLatency)
		}
		return d, nil
	}
	switch kind {
	case "fixed":
		d, err := dur(arg)
		if err != nil {
			return Dist{}, err
		}
		return Dist{Kind: "fixed", Min: d, Max: d}, nil
	case "uniform":
		lo, hi, ok := strings.Cut(arg, "-")
		if !ok {
			return Dist{}, fmt.Errorf("latency %q: uniform takes a range like uniform:1ms-20ms", s)
		}
		a, err := dur(lo)
		if err != nil {
			return Dist{}, err
		}
		b, err := dur(hi)
		if err != nil {
			return Dist{}, err
		}
		if a > b {
			return Dist{}, fmt.Errorf("latency %q: the range is reversed (%v > %v)", s, a, b)
		}
		return Dist{Kind: "uniform", Min: a, Max: b}, nil
	case "exp":
		m, err := dur(arg)
		if err != nil {
			return Dist{}, err
		}
		if m == 0 {
			return Dist{}, fmt.Errorf("latency %q: an exponential needs a positive mean", s)
		}
		return Dist{Kind: "exp", Mean: m}, nil
	default:
		return Dist{}, fmt.Errorf("latency %q: unknown distribution %q (want fixed, uniform or exp)", s, kind)
	}
}

// String formats d the way ParseDist reads it.
func (d Dist) String() string {
	switch d.Kind {
	case "fixed":
		return "fixed:" + d.Min.String()
	case "uniform":
		return "uniform:" + d.Min.String() + "-" + d.Max.String()
	case "exp":
		return "exp:" + d.Mean.String()
	default:
		return "none"
	}
}

// IsZero reports whether d never delays.
func (d Dist) IsZero() bool {
	return d.Kind == "" || (d.Kind == "fixed" && d.Min == 0) || (d.Kind == "uniform" && d.Max == 0)
}

// Sample draws one latency from d with r.
func (d Dist) Sample(r *rand.Rand) time.Duration {
	switch d.Kind {
	case "fixed":
		return d.Min
	case "uniform":
		if d.Max == d.Min {
			return d.Min
		}
		return d.Min + time.Duration(r.Int64N(int64(d.Max-d.Min)+1))
	case "exp":
		return min(time.Duration(r.ExpFloat64()*float64(d.Mean)), MaxLatency)
	default:
		return 0
	}
}
