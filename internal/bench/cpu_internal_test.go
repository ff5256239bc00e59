package bench

import (
	"testing"
	"time"
)

func TestCPUSplit(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	reading := func(busy, total, client, turnd, postgres time.Duration, turndOK, pgOK bool) cpuReading {
		return cpuReading{ok: true, cpuTimes: cpuTimes{busy: busy, total: total, client: client, turnd: turnd, postgres: postgres},
			turndOK: turndOK, postgresOK: pgOK}
	}
	f := func(v float64) *float64 { return &v }
	for _, tc := range []struct {
		name  string
		tally func() cpuTally
		want  *CPUSplit
	}{
		{"two windows, every part known", func() cpuTally {
			var t cpuTally
			// 1000 ops in two windows of 2s of machine time each.
			t.add(reading(1000*ms, 10000*ms, 100*ms, 200*ms, 300*ms, true, true),
				reading(2600*ms, 12000*ms, 300*ms, 800*ms, 1000*ms, true, true), 500)
			t.add(reading(0, 0, 0, 0, 0, true, true), reading(1400*ms, 2000*ms, 200*ms, 500*ms, 600*ms, true, true), 500)
			return t
		}, &CPUSplit{TotalUS: 4000, TurndUS: f(1100), PostgresUS: f(1300), ClientUS: 400, OtherUS: 200, IdleUS: 1000}},
		{"turnd unknown in one window: in other", func() cpuTally {
			var t cpuTally
			t.add(reading(0, 0, 0, 0, 0, true, true), reading(1000*ms, 2000*ms, 100*ms, 400*ms, 300*ms, true, true), 100)
			t.add(reading(0, 0, 0, 0, 0, false, true), reading(1000*ms, 2000*ms, 100*ms, 400*ms, 300*ms, false, true), 100)
			return t
		}, &CPUSplit{TotalUS: 20000, PostgresUS: f(3000), ClientUS: 1000, OtherUS: 6000, IdleUS: 10000}},
		{"parts over the busy time: other is none, not negative", func() cpuTally {
			var t cpuTally
			t.add(reading(0, 0, 0, 0, 0, true, false), reading(100*ms, 200*ms, 60*ms, 50*ms, 0, true, false), 10)
			return t
		}, &CPUSplit{TotalUS: 20000, TurndUS: f(5000), ClientUS: 6000, OtherUS: 0, IdleUS: 10000}},
		{"a window without /proc: no split", func() cpuTally {
			var t cpuTally
			t.add(reading(0, 0, 0, 0, 0, true, true), reading(100*ms, 200*ms, 0, 0, 0, true, true), 10)
			t.add(cpuReading{}, reading(100*ms, 200*ms, 0, 0, 0, true, true), 10)
			return t
		}, nil},
		{"turnd gone by a window's end: no split (the bench reaped it)", func() cpuTally {
			var t cpuTally
			t.add(reading(0, 0, 0, 0, 0, true, true), reading(100*ms, 200*ms, 0, 0, 0, true, true), 10)
			t.add(reading(0, 0, 0, 0, 0, true, true), reading(100*ms, 200*ms, 90*ms, 0, 0, false, true), 10)
			return t
		}, nil},
		{"no op completed: no split", func() cpuTally {
			var t cpuTally
			t.add(reading(0, 0, 0, 0, 0, true, true), reading(100*ms, 200*ms, 0, 0, 0, true, true), 0)
			return t
		}, nil},
		{"no window: no split", func() cpuTally { return cpuTally{} }, nil},
		{"merged rounds are their windows' sum", func() cpuTally {
			var a, b cpuTally
			a.add(reading(0, 0, 0, 0, 0, true, true), reading(1000*ms, 2000*ms, 100*ms, 400*ms, 300*ms, true, true), 100)
			b.add(reading(0, 0, 0, 0, 0, true, true), reading(1000*ms, 2000*ms, 100*ms, 400*ms, 300*ms, true, true), 100)
			a.merge(b)
			return a
		}, &CPUSplit{TotalUS: 20000, TurndUS: f(4000), PostgresUS: f(3000), ClientUS: 1000, OtherUS: 2000, IdleUS: 10000}},
	} {
		got := tc.tally().split()
		switch {
		case (got == nil) != (tc.want == nil):
			t.Errorf("%s: split %+v, want %+v", tc.name, got, tc.want)
		case got != nil && !sameSplit(*got, *tc.want):
			t.Errorf("%s: split %s, want %s", tc.name, got.text("client"), tc.want.text("client"))
		}
	}
}

func sameSplit(a, b CPUSplit) bool {
	eq := func(x, y *float64) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	return a.TotalUS == b.TotalUS && a.ClientUS == b.ClientUS && a.OtherUS == b.OtherUS && a.IdleUS == b.IdleUS &&
		eq(a.TurndUS, b.TurndUS) && eq(a.PostgresUS, b.PostgresUS)
}

func TestCPUSplitText(t *testing.T) {
	t.Parallel()
	v, w := 96.04, 91.2
	s := CPUSplit{TotalUS: 263.1, TurndUS: &v, PostgresUS: &w, ClientUS: 25.9, OtherUS: 8.1, IdleUS: 41.9}
	if got, want := s.text("bench"), "263.1µs of machine time: turnd 96.0, PostgreSQL 91.2, bench 25.9, other 8.1, idle 41.9"; got != want {
		t.Errorf("text %q, want %q", got, want)
	}
	s.TurndUS, s.PostgresUS = nil, nil
	if got, want := s.text("pgbench"), "263.1µs of machine time: pgbench 25.9, other 8.1, idle 41.9"; got != want {
		t.Errorf("text %q, want %q", got, want)
	}
}
