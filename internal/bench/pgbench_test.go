package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const pgbenchReport = `pgbench (15.18 (Debian 15.18-0+deb12u1))
transaction type: /tmp/insert.sql
scaling factor: 1
query mode: prepared
number of clients: 4
number of threads: 2
maximum number of tries: 1
duration: 1 s
number of transactions actually processed: 6408
number of failed transactions: 2 (0.031%)
latency average = 0.622 ms
initial connection time = 10.527 ms
tps = 6431.707273 (without initial connection time)
`

func TestParsePgbench(t *testing.T) {
	t.Parallel()
	s, err := parsePgbench([]byte(pgbenchReport))
	if err != nil {
		t.Fatal(err)
	}
	if s.ok != 6408 || s.failed != 2 || s.tps != 6431.707273 {
		t.Errorf("summary %+v", s)
	}
	if e := s.elapsed(); e < 996*time.Millisecond || e > 997*time.Millisecond {
		t.Errorf("elapsed %v, want 6408 ÷ 6431.7 s", e)
	}
	// Older reports have no failure line; -t reports "n/m".
	old := strings.Replace(strings.Replace(pgbenchReport, "number of failed transactions: 2 (0.031%)\n", "", 1), "6408\n", "6408/6408\n", 1)
	if s, err := parsePgbench([]byte(old)); err != nil || s.ok != 6408 || s.failed != 0 {
		t.Errorf("an older report: %+v, %v", s, err)
	}
	bad := map[string]string{
		"no transactions line":         strings.Replace(pgbenchReport, "number of transactions actually processed: 6408\n", "", 1),
		"no tps line":                  strings.Replace(pgbenchReport, "tps = 6431.707273 (without initial connection time)\n", "", 1),
		"a rate that is not a number":  strings.Replace(pgbenchReport, "tps = 6431.707273", "tps = fast", 1),
		"a negative rate":              strings.Replace(pgbenchReport, "tps = 6431.707273", "tps = -1", 1),
		"transactions at no rate":      strings.Replace(pgbenchReport, "tps = 6431.707273", "tps = 0", 1),
		"a count that is not a number": strings.Replace(pgbenchReport, "processed: 6408", "processed: many", 1),
		"an error instead":             "pgbench: error: connection to server at \"127.0.0.1\", port 1 failed: Connection refused\n",
		"nothing":                      "",
	}
	for name, out := range bad {
		if s, err := parsePgbench([]byte(out)); err == nil {
			t.Errorf("%s: parsed as %+v, want an error", name, s)
		}
	}
}

func TestPgbenchLatencies(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pgbenchLatencies(dir); err == nil {
		t.Error("no logs: want an error")
	}
	write("log.100", "0 1 2099 0 1796017652 240926\n1 1 916 0 1796017652 241222\n0 2 failed 0 1796017652 241280\n")
	write("log.100.1", "2 1 1810 0 1796017652 240657\n")
	write("insert.sql", "not a log\n")
	lat, err := pgbenchLatencies(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[time.Duration]bool{2099 * time.Microsecond: true, 916 * time.Microsecond: true, 1810 * time.Microsecond: true}
	if len(lat) != 3 {
		t.Fatalf("latencies %v, want the three that did not fail", lat)
	}
	for _, d := range lat {
		if !want[d] {
			t.Errorf("latency %v not logged", d)
		}
	}
	write("log.100.2", "garbage\n")
	if _, err := pgbenchLatencies(dir); err == nil || !strings.Contains(err.Error(), "log.100.2 line 1") {
		t.Errorf("a line that is not a transaction: %v", err)
	}
	write("log.100.2", "0 1 -5 0 1 1\n")
	if _, err := pgbenchLatencies(dir); err == nil || !strings.Contains(err.Error(), "latency -5") {
		t.Errorf("a negative latency: %v", err)
	}
}

func TestLibpqURL(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want, password string }{
		{"postgres://turnd@127.0.0.1:5432/postgres?sslmode=disable", "postgres://turnd@127.0.0.1:5432/postgres?sslmode=disable", ""},
		{"postgres://turnd@127.0.0.1:5432/postgres?sslmode=disable&search_path=t_1",
			"postgres://turnd@127.0.0.1:5432/postgres?options=-c%20search_path%3Dt_1&sslmode=disable", ""},
		{"postgresql://u:p@h/db?application_name=a&search_path=x%20y&options=-cwork_mem%3D8MB&statement_timeout=5s",
			"postgresql://u@h/db?application_name=a&options=-cwork_mem%3D8MB%20-c%20search_path%3Dx%5C%20y%20-c%20statement_timeout%3D5s", "p"},
		{"host=127.0.0.1 dbname=postgres", "host=127.0.0.1 dbname=postgres", ""},
		{"postgres://h/db?application_name=a%2Bb&x=1", "postgres://h/db?application_name=a%2Bb&options=-c%20x%3D1", ""},
		// pgx's own parameters go; libpq's newer ones stay; a password in
		// the query comes out too.
		{"postgres://h/db?default_query_exec_mode=describe_exec&pool_max_conns=4&pool_ping_timeout=1s&statement_cache_capacity=9&sslcertmode=allow&password=s%20cret",
			"postgres://h/db?sslcertmode=allow", "s cret"},
	}
	for _, tt := range tests {
		got, password, err := libpqURL(tt.in)
		if err != nil || got != tt.want || password != tt.password {
			t.Errorf("libpqURL(%q) = %q, %q, %v; want %q, %q", tt.in, got, password, err, tt.want, tt.password)
		}
	}
	if _, _, err := libpqURL("postgres://h:notaport/db"); err == nil {
		t.Error("a URL that does not parse: want an error")
	}
}

func TestPgbenchDuration(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]time.Duration{
		0: time.Second, 250 * time.Millisecond: time.Second, time.Second: time.Second,
		1500 * time.Millisecond: 2 * time.Second, 5 * time.Second: 5 * time.Second,
	} {
		if got := pgbenchDuration(d); got != want {
			t.Errorf("pgbenchDuration(%v) = %v, want %v", d, got, want)
		}
	}
}
