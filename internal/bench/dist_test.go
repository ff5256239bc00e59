package bench

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestParseDist(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want Dist
		str  string
	}{
		{"", Dist{}, "none"},
		{"none", Dist{}, "none"},
		{"0", Dist{}, "none"},
		{"fixed:5ms", Dist{Kind: "fixed", Min: 5 * time.Millisecond, Max: 5 * time.Millisecond}, "fixed:5ms"},
		{" fixed:0s ", Dist{Kind: "fixed"}, "fixed:0s"},
		{"uniform:1ms-20ms", Dist{Kind: "uniform", Min: time.Millisecond, Max: 20 * time.Millisecond}, "uniform:1ms-20ms"},
		{"uniform:3ms-3ms", Dist{Kind: "uniform", Min: 3 * time.Millisecond, Max: 3 * time.Millisecond}, "uniform:3ms-3ms"},
		{"exp:10ms", Dist{Kind: "exp", Mean: 10 * time.Millisecond}, "exp:10ms"},
		{"fixed:10m", Dist{Kind: "fixed", Min: MaxLatency, Max: MaxLatency}, "fixed:10m0s"},
	}
	for _, tt := range tests {
		got, err := ParseDist(tt.in)
		if err != nil {
			t.Errorf("ParseDist(%q): %v", tt.in, err)
			continue
		}
		if got != tt.want || got.String() != tt.str {
			t.Errorf("ParseDist(%q) = %+v (%s), want %+v (%s)", tt.in, got, got, tt.want, tt.str)
		}
		if again, err := ParseDist(got.String()); err != nil || again != got {
			t.Errorf("ParseDist(%q.String()) = %+v, %v: does not round-trip", tt.in, again, err)
		}
	}
}

func TestParseDistBad(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"5ms", "want fixed:D"},
		{"fixed", "want fixed:D"},
		{"fixed:", "not a duration"},
		{"fixed:fast", "not a duration"},
		{"fixed:5", "not a duration"},
		{"fixed:-1ms", "negative"},
		{"fixed:11m", "maximum"},
		{"uniform:5ms", "range"},
		{"uniform:9ms-2ms", "reversed"},
		{"uniform:1ms-", "not a duration"},
		{"uniform:-1ms-2ms", "not a duration"},
		{"exp:0s", "positive mean"},
		{"exp:-3ms", "negative"},
		{"normal:5ms", "unknown distribution"},
		{"Fixed:5ms", "unknown distribution"},
	}
	for _, tt := range tests {
		if d, err := ParseDist(tt.in); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseDist(%q) = %+v, %v; want an error containing %q", tt.in, d, err, tt.want)
		}
	}
}

func TestDistSample(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	uni, _ := ParseDist("uniform:1ms-3ms")
	fixed, _ := ParseDist("fixed:7ms")
	exp, _ := ParseDist("exp:2ms")
	var sum time.Duration
	const n = 20000
	seenLow, seenHigh := false, false
	for range n {
		if d := fixed.Sample(r); d != 7*time.Millisecond {
			t.Fatalf("fixed sampled %v", d)
		}
		d := uni.Sample(r)
		if d < time.Millisecond || d > 3*time.Millisecond {
			t.Fatalf("uniform:1ms-3ms sampled %v", d)
		}
		seenLow = seenLow || d < 1100*time.Microsecond
		seenHigh = seenHigh || d > 2900*time.Microsecond
		e := exp.Sample(r)
		if e < 0 || e > MaxLatency {
			t.Fatalf("exp sampled %v", e)
		}
		sum += e
	}
	if !seenLow || !seenHigh {
		t.Errorf("uniform never came near an end of its range in %d draws", n)
	}
	// The mean of 20000 exponential draws is within 5% of 2ms with
	// overwhelming probability (standard error 0.7%); the seed is fixed.
	if mean := sum / n; mean < 1900*time.Microsecond || mean > 2100*time.Microsecond {
		t.Errorf("exp:2ms mean %v", mean)
	}
	if (Dist{}).Sample(r) != 0 || !(Dist{}).IsZero() || !fixedZero().IsZero() || uni.IsZero() {
		t.Error("IsZero / zero Sample")
	}
}

func fixedZero() Dist { d, _ := ParseDist("fixed:0s"); return d }
