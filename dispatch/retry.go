package dispatch

import (
	"context"
	"math"
	"math/rand/v2"
	"time"
)

// Retry defaults, used where a RetryPolicy that allows retries leaves a
// field zero.
const (
	DefaultInitialInterval = 100 * time.Millisecond
	DefaultMaxInterval     = 30 * time.Second
	DefaultMultiplier      = 2.0
	// MaxRetryAfter caps a tool's RetryAfter when MaxInterval is lower: a
	// server's hint is honoured beyond our own backoff ceiling, but not
	// without bound.
	MaxRetryAfter = time.Minute
)

// RetryPolicy says how often a tool's retryable errors are retried. The zero
// value allows one attempt and no retry.
type RetryPolicy struct {
	// MaxAttempts counts all attempts, the first included; below 2 nothing
	// is retried.
	MaxAttempts int
	// The wait before retry n (n = 1 before the second attempt) is
	// InitialInterval * Multiplier^(n-1), capped at MaxInterval, then spread
	// by ±Jitter (a fraction in [0, 1]). A Multiplier below 1 means
	// DefaultMultiplier.
	InitialInterval time.Duration
	MaxInterval     time.Duration
	Multiplier      float64
	Jitter          float64
}

func (p RetryPolicy) attempts() int {
	return max(p.MaxAttempts, 1)
}

// delay is the wait before retry n (n ≥ 1). retryAfter, the tool's hint,
// wins when it is longer, up to max(MaxInterval, MaxRetryAfter).
func (p RetryPolicy) delay(n int, retryAfter time.Duration) time.Duration {
	initial := p.InitialInterval
	if initial <= 0 {
		initial = DefaultInitialInterval
	}
	ceiling := p.MaxInterval
	if ceiling <= 0 {
		ceiling = DefaultMaxInterval
	}
	mult := p.Multiplier
	if mult < 1 {
		mult = DefaultMultiplier
	}
	d := min(float64(initial)*math.Pow(mult, float64(n-1)), float64(ceiling))
	if j := min(max(p.Jitter, 0), 1); j > 0 {
		d = min(d*(1+j*(2*rand.Float64()-1)), float64(ceiling))
	}
	wait := time.Duration(d)
	if retryAfter > wait {
		wait = min(retryAfter, max(ceiling, MaxRetryAfter))
	}
	return wait
}

// sleep waits d unless ctx is done first; it reports whether the full wait
// elapsed. A timer rather than time.Sleep keeps the wait cancellable, and it
// runs on the fake clock under testing/synctest.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
