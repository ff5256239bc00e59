package budget

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

func TestShare(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		turnLimit int
		sizes     []int // the outputs, in call order
		want      []int // each call's limit
	}{
		{"no turn budget", 0, []int{10, 20}, []int{-1, -1}},
		{"even split", 300, []int{500, 500, 500}, []int{100, 100, 100}},
		{"small outputs pass whole and leave the rest", 300, []int{10, 500, 20, 500}, []int{75, 96, 97, 174}},
		{"rounding down", 10, []int{100, 100, 100}, []int{3, 3, 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := NewShare(tt.turnLimit, len(tt.sizes))
			var got []int
			for _, n := range tt.sizes {
				l := s.Limit()
				got = append(got, l)
				p := mustNew(t, Config{MaxLines: 1 << 20}).Within(max(l, 0))
				if l < 0 {
					p = mustNew(t, Config{MaxLines: 1 << 20})
				}
				s.Spend(p.Project(bytes.Repeat([]byte("x\n"), n/2)), ModeBytes)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("limits %v, want %v", got, tt.want)
			}
		})
	}
}

// TestShareBounds: whatever the outputs, the turn keeps at most TurnLimit
// and no call's share falls below TurnLimit/calls.
func TestShareBounds(t *testing.T) {
	t.Parallel()
	eachSeed(t, 200, 30, func(t *testing.T, rng *rand.Rand) {
		calls, turnLimit := 1+rng.IntN(20), 1+rng.IntN(5000)
		mode := []Mode{ModeBytes, ModeTokens}[rng.IntN(2)]
		base := mustNew(t, Config{Limit: 1 + rng.IntN(2000), Mode: mode, Window: WindowErrors, MaxLines: 1 << 20})
		s := NewShare(turnLimit, calls)
		var kept int64
		for range calls {
			l := s.Limit()
			if l < turnLimit/calls {
				t.Fatalf("share %d below %d/%d", l, turnLimit, calls)
			}
			r := base.Within(l).Project(bytes.Repeat([]byte("error: x\n"), rng.IntN(800)))
			kept += unitsOf(r.OriginalBytes-r.DroppedBytes, mode)
			s.Spend(r, mode)
		}
		if kept > int64(turnLimit) {
			t.Fatalf("the turn kept %d, turn limit %d", kept, turnLimit)
		}
	})
}

func TestWith(t *testing.T) {
	t.Parallel()
	base := mustNew(t, Config{Limit: 100})
	if p, err := base.With(Projection{}); err != nil || p != base {
		t.Fatalf("With(zero) = %p, %v; want the projector itself", p, err)
	}
	p, err := base.With(Projection{Window: WindowErrors, Patterns: []string{"oops"}})
	if err != nil {
		t.Fatal(err)
	}
	if c := p.Config(); c.Window != WindowErrors || c.Limit != 100 || c.Patterns[0] != "oops" {
		t.Fatalf("With: %+v", c)
	}
	for _, bad := range []Projection{{Window: "middle"}, {Patterns: []string{""}}, {Patterns: []string{"a\nb"}}} {
		if err := bad.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("Validate(%+v) = %v, want ErrInvalidConfig", bad, err)
		}
	}
}

func TestWithin(t *testing.T) {
	t.Parallel()
	huge := mustNew(t, Config{Limit: math.MaxInt, Mode: ModeTokens})
	tests := []struct {
		name  string
		p     *Projector
		limit int
		cap   int
	}{
		{"lower", mustNew(t, Config{Limit: 100}), 40, 40},
		{"higher keeps the projector", mustNew(t, Config{Limit: 100}), 400, 100},
		{"negative is zero", mustNew(t, Config{Limit: 100}), -3, 0},
		{"tokens", mustNew(t, Config{Limit: 100, Mode: ModeTokens}), 10, 40},
		{"tokens, no overflow", huge, math.MaxInt - 1, math.MaxInt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.p.Within(tt.limit).sizeCap; got != tt.cap {
				t.Fatalf("Within(%d).sizeCap = %d, want %d", tt.limit, got, tt.cap)
			}
		})
	}
}
