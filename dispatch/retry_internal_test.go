package dispatch

import (
	"testing"
	"time"
)

func TestRetryDelay(t *testing.T) {
	t.Parallel()
	const s = time.Second
	for _, tc := range []struct {
		name       string
		policy     RetryPolicy
		n          int
		retryAfter time.Duration
		want       time.Duration
	}{
		{"defaults", RetryPolicy{MaxAttempts: 3}, 1, 0, DefaultInitialInterval},
		{"default multiplier", RetryPolicy{MaxAttempts: 3}, 3, 0, 4 * DefaultInitialInterval},
		{"multiplier one is constant", RetryPolicy{InitialInterval: s, Multiplier: 1}, 5, 0, s},
		{"exponential", RetryPolicy{InitialInterval: s, Multiplier: 3}, 3, 0, 9 * s},
		{"capped", RetryPolicy{InitialInterval: s, Multiplier: 3, MaxInterval: 5 * s}, 3, 0, 5 * s},
		{"default cap", RetryPolicy{InitialInterval: s, Multiplier: 2}, 30, 0, DefaultMaxInterval},
		{"short retry after loses", RetryPolicy{InitialInterval: 4 * s}, 1, s, 4 * s},
		{"retry after beyond max interval", RetryPolicy{InitialInterval: s, MaxInterval: 2 * s}, 1, 10 * s, 10 * s},
		{"retry after capped", RetryPolicy{InitialInterval: s, MaxInterval: 2 * s}, 1, time.Hour, MaxRetryAfter},
		{"retry after capped by a larger max interval", RetryPolicy{InitialInterval: s, MaxInterval: 2 * time.Minute}, 1, time.Hour, 2 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := tc.policy.delay(tc.n, tc.retryAfter); got != tc.want {
				t.Errorf("delay(%d, %v) = %v, want %v", tc.n, tc.retryAfter, got, tc.want)
			}
		})
	}
}

func TestRetryJitterStaysInBounds(t *testing.T) {
	t.Parallel()
	p := RetryPolicy{InitialInterval: time.Second, MaxInterval: 1500 * time.Millisecond, Jitter: 0.5}
	spread := false
	for range 1000 {
		d := p.delay(1, 0)
		if d < 500*time.Millisecond || d > 1500*time.Millisecond {
			t.Fatalf("jittered delay %v outside [0.5s, 1.5s]", d)
		}
		spread = spread || d != time.Second
	}
	if !spread {
		t.Error("jitter never moved the delay")
	}
}

func TestParseEffect(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]Effect{"read": EffectRead, "write": EffectWrite, "": EffectWrite, "Read": EffectWrite, "delete": EffectWrite} {
		if got := ParseEffect(in); got != want {
			t.Errorf("ParseEffect(%q) = %q, want %q", in, got, want)
		}
	}
}
