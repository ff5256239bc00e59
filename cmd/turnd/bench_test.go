package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"math"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/turnd/turnd/internal/bench"
	"github.com/turnd/turnd/internal/loadtest"
	"github.com/turnd/turnd/internal/pgtest"
)

func TestParseBenchDefaults(t *testing.T) {
	t.Parallel()
	c, err := parseBench(nil, &bytes.Buffer{}, envOf(nil), false)
	if err != nil {
		t.Fatal(err)
	}
	w := c.Workload
	if w.Concurrency != 32 || w.Rate != 0 || w.Duration != 10*time.Second || w.Turns != 0 || w.Calls != 4 ||
		w.ReadFraction != 1 || w.DeferredFraction != 0 || !w.Latency.IsZero() || w.Tools != bench.ToolHTTP ||
		w.MaxInFlight != 0 || w.Wait != 2*time.Minute {
		t.Errorf("workload defaults: %+v", w)
	}
	if w.DeferredDelay.String() != "fixed:10ms" {
		t.Errorf("deferred delay default %v", w.DeferredDelay)
	}
	if w.Client != bench.ClientTuned {
		t.Errorf("client default %q", w.Client)
	}
	if c.Store != bench.StoreAuto || c.Baseline != 4*time.Second || c.Progress != "lines" || c.ServerBinary == "" || c.JSON {
		t.Errorf("config defaults: %+v", c.Config)
	}
}

func TestParseBench(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		args  []string
		env   map[string]string
		tty   bool
		check func(t *testing.T, c benchConfig)
	}{
		{name: "rate is open loop", args: []string{"--rate", "250", "--turns", "100"}, check: func(t *testing.T, c benchConfig) {
			if c.Workload.Rate != 250 || c.Workload.Concurrency != 0 || c.Workload.Turns != 100 || c.Workload.Duration != 0 || c.Workload.MaxInFlight != 1024 {
				t.Errorf("%+v", c.Workload)
			}
		}},
		{name: "a url defaults to the builtins", args: []string{"--url", "http://127.0.0.1:1", "--token", "tk"}, check: func(t *testing.T, c benchConfig) {
			if c.Workload.Tools != bench.ToolBuiltin || c.Token != "tk" || c.ServerBinary != "" {
				t.Errorf("%+v", c.Config)
			}
		}},
		{name: "token from the environment", args: []string{"--url", "http://127.0.0.1:1"}, env: map[string]string{"TURND_BENCH_TOKEN": "env-tk"}, check: func(t *testing.T, c benchConfig) {
			if c.Token != "env-tk" {
				t.Errorf("token %q", c.Token)
			}
		}},
		{name: "DATABASE_URL selects the started turnd's store", env: map[string]string{"DATABASE_URL": "postgres://x/y"}, check: func(t *testing.T, c benchConfig) {
			if c.DatabaseURL != "postgres://x/y" {
				t.Errorf("database url %q", c.DatabaseURL)
			}
		}},
		{name: "a terminal gets a bar", tty: true, check: func(t *testing.T, c benchConfig) {
			if c.Progress != "bar" || c.ProgressEvery != 200*time.Millisecond {
				t.Errorf("progress %q every %v", c.Progress, c.ProgressEvery)
			}
		}},
		{name: "the mixed workload", args: []string{
			"--concurrency", "8", "--duration", "3s", "--calls", "6", "--read-fraction", "0.25", "--deferred-fraction", "0.5",
			"--latency", "uniform:1ms-20ms", "--deferred-delay", "exp:30ms", "--output-bytes", "40000", "--seed", "9", "--json",
		}, check: func(t *testing.T, c benchConfig) {
			w := c.Workload
			if w.Concurrency != 8 || w.Duration != 3*time.Second || w.Calls != 6 || w.ReadFraction != 0.25 || w.DeferredFraction != 0.5 ||
				w.Latency.String() != "uniform:1ms-20ms" || w.DeferredDelay.String() != "exp:30ms" || w.OutputBytes != 40000 || w.Seed != 9 || !c.JSON {
				t.Errorf("%+v", w)
			}
		}},
		{name: "the ordinary client", args: []string{"--client", "ordinary"}, check: func(t *testing.T, c benchConfig) {
			if c.Workload.Client != bench.ClientOrdinary {
				t.Errorf("client %q", c.Workload.Client)
			}
		}},
		{name: "the completion workload", args: []string{"--completions", "--parked", "300", "--concurrency", "16"}, check: func(t *testing.T, c benchConfig) {
			w := c.Workload
			if !w.Completions || w.Parked != 300 || w.Concurrency != 16 || w.Calls != 1 || w.Duration != 0 || w.Turns != 0 || w.Tools != bench.ToolHTTP {
				t.Errorf("%+v", w)
			}
		}},
		{name: "print the tool config", args: []string{"--print-tool-config", "--tool-addr", "127.0.0.1:9100"}, check: func(t *testing.T, c benchConfig) {
			if !c.PrintToolConfig || c.ToolAddr != "127.0.0.1:9100" {
				t.Errorf("%+v", c)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := parseBench(tt.args, &bytes.Buffer{}, envOf(tt.env), tt.tty)
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, c)
		})
	}
}

func TestParseBenchBadInput(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"negative rate", []string{"--rate", "-5"}, nil, "rate"},
		{"zero rate", []string{"--rate", "0"}, nil, "rate"},
		{"NaN rate", []string{"--rate", "NaN"}, nil, "rate"},
		{"infinite rate", []string{"--rate", "+Inf"}, nil, "rate"},
		{"rate and concurrency", []string{"--rate", "10", "--concurrency", "4"}, nil, "exclusive"},
		{"zero concurrency", []string{"--concurrency", "0"}, nil, "concurrency"},
		{"negative concurrency", []string{"--concurrency", "-3"}, nil, "concurrency"},
		{"duration and turns", []string{"--duration", "5s", "--turns", "10"}, nil, "exclusive"},
		{"zero turns", []string{"--turns", "0"}, nil, "turns"},
		{"negative duration", []string{"--duration", "-1s"}, nil, "duration"},
		{"zero calls", []string{"--calls", "0"}, nil, "calls"},
		{"negative rounds", []string{"--rounds", "-2"}, nil, "rounds"},
		{"rounds shorter than a second", []string{"--rounds", "20", "--duration", "10s"}, nil, "per round"},
		{"rounds of a turn count", []string{"--rounds", "2", "--turns", "100"}, nil, "not with --turns"},
		{"rounds not a number", []string{"--rounds", "three"}, nil, "rounds"},
		{"unknown baseline client", []string{"--baseline-client", "psql"}, nil, "baseline-client"},
		{"too many calls", []string{"--calls", "129"}, nil, "calls"},
		{"read fraction over 1", []string{"--read-fraction", "1.5"}, nil, "read fraction"},
		{"negative read fraction", []string{"--read-fraction", "-0.1"}, nil, "read fraction"},
		{"NaN deferred fraction", []string{"--deferred-fraction", "NaN"}, nil, "deferred fraction"},
		{"deferred fraction over 1", []string{"--deferred-fraction", "2"}, nil, "deferred fraction"},
		{"latency without a kind", []string{"--latency", "5ms"}, nil, "latency"},
		{"unknown latency kind", []string{"--latency", "normal:5ms"}, nil, "unknown distribution"},
		{"reversed uniform", []string{"--latency", "uniform:20ms-1ms"}, nil, "reversed"},
		{"uniform without a range", []string{"--latency", "uniform:5ms"}, nil, "range"},
		{"negative latency", []string{"--latency", "fixed:-5ms"}, nil, "negative"},
		{"latency too long", []string{"--latency", "fixed:11m"}, nil, "maximum"},
		{"exp of zero", []string{"--latency", "exp:0s"}, nil, "positive mean"},
		{"bad deferred delay", []string{"--deferred-delay", "fixed:soon"}, nil, "deferred-delay"},
		{"negative output", []string{"--output-bytes", "-1"}, nil, "output bytes"},
		{"huge output", []string{"--output-bytes", "1000000000"}, nil, "output bytes"},
		{"builtins cannot write", []string{"--tools", "builtin", "--read-fraction", "0.5"}, nil, "builtin"},
		{"builtins cannot defer", []string{"--tools", "builtin", "--deferred-fraction", "0.1"}, nil, "defer"},
		{"builtins: latency or size", []string{"--tools", "builtin", "--latency", "fixed:1ms", "--output-bytes", "100"}, nil, "not both"},
		{"unknown tools", []string{"--tools", "grpc"}, nil, "tools"},
		{"unknown client", []string{"--client", "curl"}, nil, "client"},
		{"streamed by the ordinary client", []string{"--streamed", "--client", "ordinary"}, nil, "tuned client only"},
		{"parked without completions", []string{"--parked", "10"}, nil, "--parked is for --completions"},
		{"completions for a duration", []string{"--completions", "--duration", "5s"}, nil, "drop --duration"},
		{"completions of several calls", []string{"--completions", "--calls", "4"}, nil, "drop --calls"},
		{"completions open loop", []string{"--completions", "--rate", "100"}, nil, "drop --rate"},
		{"completions on the builtins", []string{"--completions", "--tools", "builtin"}, nil, "--tools http"},
		{"too many parked", []string{"--completions", "--parked", "1000000"}, nil, "parked"},
		{"unknown store", []string{"--store", "mysql"}, nil, "store"},
		{"sqlite with DATABASE_URL", []string{"--store", "sqlite"}, map[string]string{"DATABASE_URL": "postgres://x/y"}, "DATABASE_URL"},
		{"store with a url", []string{"--url", "http://127.0.0.1:1", "--store", "sqlite"}, nil, "without --url"},
		{"http tools of a running turnd without their address", []string{"--url", "http://127.0.0.1:1", "--tools", "http"}, nil, "--tool-addr"},
		{"url without a scheme", []string{"--url", "127.0.0.1:8080"}, nil, "http(s) URL"},
		{"baseline database without a url", []string{"--baseline-database-url", "postgres://x/y"}, nil, "only with --url"},
		{"negative baseline", []string{"--baseline", "-1s"}, nil, "baseline"},
		{"negative baseline clients", []string{"--baseline-clients", "-2"}, nil, "baseline-clients"},
		{"bad progress", []string{"--progress", "spinner"}, nil, "progress"},
		{"wait under a second", []string{"--wait", "500ms"}, nil, "wait"},
		{"wait over the maximum", []string{"--wait", "1h"}, nil, "wait"},
		{"negative max in flight", []string{"--rate", "5", "--max-in-flight", "-1"}, nil, "max in flight"},
		{"print the tool config without an address", []string{"--print-tool-config"}, nil, "tool-addr"},
		{"unknown flag", []string{"--turbo"}, nil, "turbo"},
		{"json and markdown", []string{"--json", "--markdown"}, nil, "exclusive"},
		{"stray argument", []string{"now"}, nil, "unexpected arguments"},
		{"not a number", []string{"--calls", "four"}, nil, "calls"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := parseBench(tt.args, &bytes.Buffer{}, envOf(tt.env), false)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
			var ue usageError
			if !errors.As(err, &ue) {
				t.Errorf("%v is not a usage error (exit 2)", err)
			}
		})
	}
}

func TestRunBenchHelpAndToolConfig(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"bench", "-h"}, &stdout, &stderr, envOf(nil)); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("bench -h: %v", err)
	}
	if !strings.Contains(stderr.String(), "--deferred-fraction") || !strings.Contains(stderr.String(), "Usage: turnd bench") {
		t.Errorf("help:\n%s", stderr.String())
	}
	stdout.Reset()
	if err := run(context.Background(), []string{"bench", "--markdown-header"}, &stdout, &stderr, envOf(nil)); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(stdout.String(), "| workload | store | turns/s |") || strings.Count(stdout.String(), "\n") != 2 {
		t.Errorf("markdown header:\n%s", stdout.String())
	}
	stdout.Reset()
	if err := run(context.Background(), []string{"bench", "--print-tool-config", "--tool-addr", "127.0.0.1:9100"}, &stdout, &stderr, envOf(nil)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"name: bench_read", "name: bench_write", "name: bench_deferred", "url: http://127.0.0.1:9100/deferred", "deferred: true"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("tool config lacks %q:\n%s", want, stdout.String())
		}
	}
}

// benchTimeout bounds one bench run of the binary: it starts a turnd (and
// maybe a PostgreSQL), runs a baseline and a short load, all under the
// race detector on a loaded machine.
const benchTimeout = 3 * time.Minute

// runBenchBinary runs `turnd bench --json ARGS` and decodes its report.
func runBenchBinary(t *testing.T, env []string, args ...string) bench.Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), benchTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, turndBinary(t), append([]string{"bench", "--json", "--progress", "lines"}, args...)...)
	cmd.Env = env
	var stdout, stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	checkRaces(t, "turnd bench", stderr.String())
	if err != nil {
		t.Fatalf("turnd bench %v: %v\nstderr:\n%s\nstdout:\n%s", args, err, stderr.String(), stdout.String())
	}
	var rep bench.Report
	dec := json.NewDecoder(strings.NewReader(stdout.String()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("decoding the report: %v\n%s", err, stdout.String())
	}
	if dec.More() {
		t.Errorf("stdout holds more than one JSON object:\n%s", stdout.String())
	}
	if !strings.Contains(stderr.String(), "bench: 100%") {
		t.Errorf("no final progress line on stderr:\n%s", stderr.String())
	}
	return rep
}

// checkReport checks what every report of a run of turns turns of calls
// calls, none failing, must say.
func checkReport(t *testing.T, rep bench.Report, turns, calls int, store, baseline string) {
	t.Helper()
	tu := rep.Turns
	if tu.Started != turns || tu.OK != turns || tu.Failed != 0 || tu.OK+tu.Failed != tu.Started {
		t.Errorf("turns: %+v, want %d ok; errors %v, first %q", tu, turns, rep.Errors, rep.FirstError)
	}
	sum := 0
	for _, n := range rep.Errors {
		sum += n
	}
	if sum != tu.Failed || rep.Errors == nil {
		t.Errorf("errors %v do not add up to %d failed turns", rep.Errors, tu.Failed)
	}
	if tu.Calls != int64(turns*calls) || tu.Reads+tu.Writes+tu.Deferred != tu.Calls {
		t.Errorf("calls: %+v, want %d", tu, turns*calls)
	}
	if tu.ElapsedSeconds <= 0 || math.Abs(tu.PerSec-float64(tu.OK)/tu.ElapsedSeconds) > 0.01*tu.PerSec+0.01 {
		t.Errorf("per_sec %v is not ok / elapsed_s = %d / %v", tu.PerSec, tu.OK, tu.ElapsedSeconds)
	}
	l := rep.Latency
	if !(0 < l.P50 && l.P50 <= l.P90 && l.P90 <= l.P99 && l.P99 <= l.Max && l.Mean <= l.Max) {
		t.Errorf("latency percentiles out of order: %+v", l)
	}
	if !rep.Target.Started || rep.Target.Store != store || !strings.HasPrefix(rep.Target.URL, "http://127.0.0.1:") {
		t.Errorf("target %+v, want a started %s turnd", rep.Target, store)
	}
	if rep.Server.RSSSource != "proc" || rep.Server.IdleRSSBytes <= 0 || rep.Server.RSSBytes <= 0 || rep.Server.PeakRSSBytes < rep.Server.RSSBytes {
		t.Errorf("server RSS %+v", rep.Server)
	}
	if rep.Machine.CPUs < 1 || rep.StartedAt.IsZero() {
		t.Errorf("machine %+v, started_at %v", rep.Machine, rep.StartedAt)
	}
	b := rep.Baseline
	if b == nil || rep.Ratio == nil {
		t.Fatalf("no baseline or ratio: %+v, note %q", b, rep.BaselineNote)
	}
	clients := rep.Workload.Concurrency
	if rep.Workload.Mode == "open" {
		clients = min(rep.Workload.MaxInFlight, 32)
	}
	if b.Kind != baseline || b.Transactions < 1 || b.Errors != 0 || b.PerSec <= 0 || b.Clients != clients {
		t.Errorf("baseline %+v", b)
	}
	// PostgreSQL's baseline is pgbench's where it is installed (these
	// machines have it beside the server binaries).
	wantClient := bench.BaselineClientGo
	if _, ok := bench.PgbenchPath(); ok && baseline == bench.BaselinePostgres {
		wantClient = bench.BaselineClientPgbench
	}
	if b.Client != wantClient {
		t.Errorf("baseline client %q, want %q", b.Client, wantClient)
	}
	if !(0 < b.Latency.P50 && b.Latency.P50 <= b.Latency.P99 && b.Latency.P99 <= b.Latency.Max) {
		t.Errorf("baseline latency %+v", b.Latency)
	}
	if want := tu.PerSec / b.PerSec; math.Abs(*rep.Ratio-want) > 0.001*want+1e-4 {
		t.Errorf("ratio %v, want turns/s ÷ tx/s = %v", *rep.Ratio, want)
	}
	// Where the time went: turnd's process (the bench started it) and,
	// on PostgreSQL (a server on this machine), the server's.
	local := store == "postgres" && localPostgres(t, rep)
	checkCPU(t, "load", rep.CPU, true, local, tu.OK, tu.ElapsedSeconds)
	checkCPU(t, "baseline", b.CPU, true, local, b.Transactions, b.ElapsedSeconds)
}

// localPostgres reports whether the PostgreSQL of a run the bench started
// runs on this machine: the bench's own, or the test cluster (DATABASE_URL,
// asked once for every test).
func localPostgres(t *testing.T, rep bench.Report) bool {
	t.Helper()
	if strings.HasPrefix(rep.Target.StoreDetail, "throwaway PostgreSQL") {
		return true
	}
	ok, err := testClusterLocal()
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

var testClusterLocal = sync.OnceValues(func() (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		return false, err
	}
	defer conn.Close(context.Background())
	_, ok, err := loadtest.Postmaster(ctx, conn)
	return ok, err
})

// checkCPU checks a CPU split of ops ops in a window of elapsed seconds:
// there (on Linux), with turnd's and PostgreSQL's parts as wanted, its
// total the machine's cores over the window.
func checkCPU(t *testing.T, what string, s *bench.CPUSplit, turnd, postgres bool, ops int, elapsed float64) {
	t.Helper()
	if runtime.GOOS != "linux" {
		return
	}
	if s == nil {
		t.Errorf("%s: no CPU split", what)
		return
	}
	if (s.TurndUS != nil) != turnd || (s.PostgresUS != nil) != postgres {
		t.Errorf("%s: CPU split %+v: turnd's part known %v, PostgreSQL's %v; want %v and %v", what, s, s.TurndUS != nil, s.PostgresUS != nil, turnd, postgres)
	}
	busy := s.ClientUS
	for _, p := range []*float64{s.TurndUS, s.PostgresUS} {
		if p != nil {
			busy += *p
			if *p < 0 {
				t.Errorf("%s: CPU split %+v has a negative part", what, s)
			}
		}
	}
	if busy <= 0 || s.ClientUS < 0 || s.OtherUS < 0 || s.IdleUS < 0 {
		t.Errorf("%s: CPU split %+v: the processes' parts add up to %.1f", what, s, busy)
	}
	// The total is every core's time over the window: /proc counts it to
	// 10ms, and a baseline's window holds pgbench's connections' start,
	// which its elapsed time does not.
	cores := float64(runtime.NumCPU())
	window := s.TotalUS * float64(ops) / 1e6 / cores
	if window < 0.8*elapsed-0.05 || window > 1.25*elapsed+0.2 {
		t.Errorf("%s: CPU split %+v: %d ops of %.1fµs on %v cores make a window of %.3fs, not the %.3fs measured", what, s, ops, s.TotalUS, cores, window, elapsed)
	}
}

func TestBenchSQLite(t *testing.T) {
	t.Parallel()
	rep := runBenchBinary(t, childEnv(), "--store", "sqlite", "--turns", "50", "--concurrency", "4", "--baseline", "1s", "--statements")
	checkReport(t, rep, 50, 4, "sqlite", bench.BaselineSQLite)
	if rep.Turns.Reads != 200 || rep.Turns.Truncated != 0 || rep.Tool == nil || rep.Tool.Calls < 200 {
		t.Errorf("turns %+v, tool %+v", rep.Turns, rep.Tool)
	}
	// --statements on SQLite: nothing to read, and the report says why.
	if len(rep.Statements) != 0 || !strings.Contains(rep.StatementsNote, "SQLite") {
		t.Errorf("statements %+v, note %q", rep.Statements, rep.StatementsNote)
	}
}

// TestBenchOrdinaryClient runs the ordinary client on both kinds of tools:
// every turn answered and checked, as the tuned client's are.
func TestBenchOrdinaryClient(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		args  []string
		calls int
	}{
		{"builtin echo", []string{"--tools", "builtin", "--output-bytes", "200"}, 4},
		{"http tools, writes and truncation", []string{"--calls", "3", "--read-fraction", "0.5", "--latency", "fixed:1ms", "--output-bytes", "20000", "--seed", "3"}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"--store", "sqlite", "--turns", "40", "--concurrency", "4", "--baseline", "1s", "--client", "ordinary"}, tt.args...)
			rep := runBenchBinary(t, childEnv(), args...)
			checkReport(t, rep, 40, tt.calls, "sqlite", bench.BaselineSQLite)
			if rep.Workload.Client != bench.ClientOrdinary {
				t.Errorf("workload client %q", rep.Workload.Client)
			}
			if want := int64(0); rep.Workload.OutputBytes > 16384 {
				want = rep.Turns.Calls
				if rep.Turns.Truncated != want {
					t.Errorf("%d of %d outputs over the budget counted truncated", rep.Turns.Truncated, want)
				}
			} else if rep.Turns.Truncated != want {
				t.Errorf("%d results truncated, want none", rep.Turns.Truncated)
			}
		})
	}
}

// TestBenchCompletions runs the completion workload on both stores: every
// parked call delivered once, accepted, and its turn's waiter answered
// with the delivered output, beside the INSERT baseline.
func TestBenchCompletions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, store, baseline string
		args                  []string
	}{
		{"sqlite", "sqlite", bench.BaselineSQLite, []string{"--store", "sqlite"}},
		{"postgres in rounds", "postgres", bench.BaselinePostgres, []string{"--rounds", "2", "--statements"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := childEnv()
			if tt.store == "postgres" {
				env = childEnv("DATABASE_URL=" + pgtest.URL(t))
			}
			args := append([]string{"--completions", "--parked", "60", "--concurrency", "4", "--baseline", "1s"}, tt.args...)
			rep := runBenchBinary(t, env, args...)
			rounds := max(1, len(rep.Rounds))
			checkReport(t, rep, 60*rounds, 1, tt.store, tt.baseline)
			if w := rep.Workload; !w.Completions || w.Parked != 60 || w.Concurrency != 4 || w.Calls != 1 {
				t.Errorf("workload %+v", w)
			}
			if rep.Turns.Deferred != int64(60*rounds) || rep.Tool == nil || rep.Tool.Delivered != 0 {
				t.Errorf("turns %+v, tool %+v: the bench delivers the held calls itself", rep.Turns, rep.Tool)
			}
			if tt.store == "postgres" && len(rep.Rounds) != 2 {
				t.Errorf("rounds %+v", rep.Rounds)
			}
			// --statements on a database the bench did not make: its
			// statements when the server preloads pg_stat_statements and
			// the database has the extension, else (the tests' cluster) a
			// note saying which is missing, not a failure.
			if tt.store == "postgres" && len(rep.Statements) == 0 && !strings.Contains(rep.StatementsNote, "pg_stat_statements") {
				t.Errorf("statements %+v, note %q", rep.Statements, rep.StatementsNote)
			}
		})
	}
}

// TestBenchSQLiteMixed runs writes with latency and outputs over the
// budget, then deferred calls the tool completes itself.
func TestBenchSQLiteMixed(t *testing.T) {
	t.Parallel()
	t.Run("writes, latency and truncation", func(t *testing.T) {
		t.Parallel()
		rep := runBenchBinary(t, childEnv(), "--store", "sqlite", "--turns", "30", "--concurrency", "3", "--calls", "3",
			"--read-fraction", "0.5", "--latency", "uniform:1ms-3ms", "--output-bytes", "20000", "--seed", "3", "--baseline", "1s")
		checkReport(t, rep, 30, 3, "sqlite", bench.BaselineSQLite)
		if rep.Turns.Reads == 0 || rep.Turns.Writes == 0 || rep.Turns.Deferred != 0 {
			t.Errorf("seed 3 should draw reads and writes: %+v", rep.Turns)
		}
		if rep.Turns.Truncated != rep.Turns.Calls {
			t.Errorf("%d of %d outputs of 20000 bytes truncated by the 16 KiB budget", rep.Turns.Truncated, rep.Turns.Calls)
		}
		if rep.Latency.P50 < 1 {
			t.Errorf("p50 %vms under the tool's 1ms minimum", rep.Latency.P50)
		}
	})
	t.Run("open loop", func(t *testing.T) {
		t.Parallel()
		rep := runBenchBinary(t, childEnv(), "--store", "sqlite", "--rate", "100", "--turns", "30", "--max-in-flight", "64", "--baseline", "1s")
		checkReport(t, rep, 30, 4, "sqlite", bench.BaselineSQLite)
		if w := rep.Workload; w.Mode != "open" || w.Rate != 100 || w.Concurrency != 0 || w.MaxInFlight != 64 {
			t.Errorf("workload %+v", w)
		}
		// Turn i is due at i/100 s: the last at 0.29s.
		if rep.Turns.ElapsedSeconds < 0.29 {
			t.Errorf("30 turns at 100/s took %vs, less than the schedule's 0.29s", rep.Turns.ElapsedSeconds)
		}
	})
	t.Run("deferred", func(t *testing.T) {
		t.Parallel()
		rep := runBenchBinary(t, childEnv(), "--store", "sqlite", "--turns", "20", "--concurrency", "2", "--calls", "2",
			"--deferred-fraction", "1", "--deferred-delay", "fixed:5ms", "--baseline", "1s")
		checkReport(t, rep, 20, 2, "sqlite", bench.BaselineSQLite)
		if rep.Turns.Deferred != 40 || rep.Tool == nil || rep.Tool.Delivered != 40 || rep.Tool.DeliveryErrors != 0 {
			t.Errorf("turns %+v, tool %+v: want 40 deferred calls delivered", rep.Turns, rep.Tool)
		}
		if rep.Latency.P50 < 10 {
			t.Errorf("p50 %vms: two deferred calls of 5ms each, one after the other, take 10ms", rep.Latency.P50)
		}
	})
}

func TestBenchPostgres(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	rep := runBenchBinary(t, childEnv("DATABASE_URL="+url), "--turns", "50", "--concurrency", "4", "--tools", "builtin", "--baseline", "1s")
	checkReport(t, rep, 50, 4, "postgres", bench.BaselinePostgres)
	if rep.Target.StoreDetail != "DATABASE_URL" {
		t.Errorf("store detail %q", rep.Target.StoreDetail)
	}

	// A running turnd on that database, its baseline named by the flag.
	p := startTurnd(t, procOptions{args: []string{"--config", writeFile(t, t.TempDir(), "tools.yaml", "builtin: [echo]\n")},
		env: []string{"DATABASE_URL=" + url}})
	rep = runBenchBinary(t, childEnv(), "--url", p.base, "--baseline-database-url", url, "--turns", "30", "--concurrency", "3", "--baseline", "1s")
	if rep.Turns.OK != 30 || rep.Baseline == nil || rep.Baseline.Kind != bench.BaselinePostgres || rep.Baseline.Clients != 3 || rep.Ratio == nil {
		t.Fatalf("turns %+v, baseline %+v, ratio %v, note %q", rep.Turns, rep.Baseline, rep.Ratio, rep.BaselineNote)
	}
	// Not the bench's turnd: its CPU is in "other".
	local := localPostgres(t, rep)
	checkCPU(t, "load of a running turnd", rep.CPU, false, local, rep.Turns.OK, rep.Turns.ElapsedSeconds)
	checkCPU(t, "baseline of a running turnd", rep.Baseline.CPU, false, local, rep.Baseline.Transactions, rep.Baseline.ElapsedSeconds)

	// The bench's own loop on request.
	rep = runBenchBinary(t, childEnv(), "--url", p.base, "--baseline-database-url", url, "--turns", "10", "--concurrency", "3",
		"--baseline", "1s", "--baseline-client", "go")
	if rep.Baseline == nil || rep.Baseline.Client != bench.BaselineClientGo || rep.Baseline.Transactions < 1 {
		t.Errorf("baseline of the go client: %+v", rep.Baseline)
	}

	// A pgbench that fails: auto falls back to the Go loop for the whole
	// baseline; asked for by name, the run fails with its output.
	broken := writeFile(t, t.TempDir(), "pgbench", "#!/bin/sh\necho 'pgbench: error: too old to run here' >&2\nexit 1\n")
	if err := os.Chmod(broken, 0o755); err != nil {
		t.Fatal(err)
	}
	rep = runBenchBinary(t, childEnv(), "--url", p.base, "--baseline-database-url", url, "--turns", "10", "--concurrency", "3",
		"--baseline", "1s", "--pgbench", broken)
	if rep.Baseline == nil || rep.Baseline.Client != bench.BaselineClientGo || rep.Baseline.Transactions < 1 {
		t.Errorf("baseline after a failing pgbench: %+v (note %q)", rep.Baseline, rep.BaselineNote)
	}
	code, _, stderr := runTurnd(t, childEnv(), "bench", "--progress", "none", "--url", p.base, "--baseline-database-url", url,
		"--turns", "10", "--concurrency", "3", "--baseline", "1s", "--pgbench", broken, "--baseline-client", "pgbench")
	if code == 0 || !strings.Contains(stderr, "too old to run here") {
		t.Errorf("a failing pgbench asked for by name: exit %d\n%s", code, stderr)
	}

	// In rounds: the load and the baseline in slices, each round's ratio
	// reported, the whole adding up. (pgbench runs whole seconds: four
	// slices of 250ms take a second each.)
	rep = runBenchBinary(t, childEnv(), "--url", p.base, "--baseline-database-url", url, "--duration", "2s", "--rounds", "2",
		"--concurrency", "3", "--baseline", "1s")
	if len(rep.Rounds) != 2 || rep.Baseline == nil || rep.Ratio == nil || rep.Turns.Failed != 0 {
		t.Fatalf("rounds %+v, baseline %+v, ratio %v, turns %+v", rep.Rounds, rep.Baseline, rep.Ratio, rep.Turns)
	}
	if e := rep.Turns.ElapsedSeconds; e < 1.9 || e > 3 {
		t.Errorf("load window %.2fs over two rounds of 1s", e)
	}
	if e := rep.Baseline.ElapsedSeconds; e < 0.9 || e > 4.5 {
		t.Errorf("baseline %.2fs in four slices of 250ms", e)
	}
	var turns, txs float64
	for _, r := range rep.Rounds {
		if r.TurnsPerSec <= 0 || r.BaselinePerSec <= 0 || r.Ratio <= 0 {
			t.Errorf("round %+v", r)
		}
		turns, txs = turns+r.TurnsPerSec, txs+r.BaselinePerSec
	}
	if got := rep.Turns.PerSec; got < 0.8*turns/2 || got > 1.2*turns/2 {
		t.Errorf("turns/s %.1f, rounds %+v", got, rep.Rounds)
	}
}

// TestBenchThrowawayPostgres lets the bench make its own PostgreSQL, as
// on an operator's machine with the server binaries and no DATABASE_URL.
func TestBenchThrowawayPostgres(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a PostgreSQL cluster")
	}
	if _, ok := bench.PostgresBinDir(); !ok {
		t.Skip("no PostgreSQL server binaries")
	}
	bin, _ := bench.PostgresBinDir()
	rep := runBenchBinary(t, childEnv(), "--store", "postgres", "--turns", "40", "--concurrency", "4", "--baseline", "1s", "--statements")
	checkReport(t, rep, 40, 4, "postgres", bench.BaselinePostgres)
	if !strings.HasPrefix(rep.Target.StoreDetail, "throwaway PostgreSQL") {
		t.Errorf("store detail %q", rep.Target.StoreDetail)
	}
	// --statements: the cluster preloads pg_stat_statements, and the
	// report has turnd's costliest statements per turn, the costliest
	// first, none of them the baseline's INSERTs or the meter's own
	// reading.
	if !bench.HasStatementsLibrary(bin) && os.Getenv("CI") == "" {
		t.Skipf("this PostgreSQL has no pg_stat_statements library (note %q)", rep.StatementsNote)
	}
	if len(rep.Statements) == 0 {
		t.Fatalf("no statements with --statements: %q", rep.StatementsNote)
	}
	for i, st := range rep.Statements {
		if st.ExecUSPerOp <= 0 || st.CallsPerOp <= 0 || st.Query == "" {
			t.Errorf("statement %d: %+v", i, st)
		}
		if i > 0 && st.ExecUSPerOp > rep.Statements[i-1].ExecUSPerOp {
			t.Errorf("statement %d costs more than the one before it: %+v", i, rep.Statements)
		}
		if strings.Contains(st.Query, "pg_stat_statements") || strings.Contains(st.Query, "bench_insert") {
			t.Errorf("statement %d is not turnd's: %q", i, st.Query)
		}
	}
}

// TestBenchRunningTurnd drives a turnd the bench did not start: with its
// builtins, then with the bench's HTTP tools at a fixed address that the
// turnd's config names.
func TestBenchRunningTurnd(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	toolAddr := freeAddr(t)
	var cfg bytes.Buffer
	if err := run(context.Background(), []string{"bench", "--print-tool-config", "--tool-addr", toolAddr}, &cfg, &bytes.Buffer{}, envOf(nil)); err != nil {
		t.Fatal(err)
	}
	p := startTurnd(t, procOptions{args: []string{"--config", writeFile(t, dir, "tools.yaml", cfg.String()), "--data", dir + "/t.db"},
		env: []string{"TURND_API_TOKENS=bench-secret"}})
	checkRemote := func(t *testing.T, rep bench.Report, turns, calls int) {
		t.Helper()
		tu := rep.Turns
		if tu.Started != turns || tu.OK != turns || tu.Calls != int64(turns*calls) || len(rep.Errors) != 0 {
			t.Errorf("turns %+v, errors %v %q", tu, rep.Errors, rep.FirstError)
		}
		if rep.Target.Started || rep.Target.Store != "unknown" || rep.Target.URL != p.base {
			t.Errorf("target %+v", rep.Target)
		}
		if rep.Baseline != nil || rep.Ratio != nil || !strings.Contains(rep.BaselineNote, "--baseline-database-url") {
			t.Errorf("a baseline without a database: %+v %v %q", rep.Baseline, rep.Ratio, rep.BaselineNote)
		}
		// RSS from /metrics when this turnd serves it, else unknown.
		if s := rep.Server; !(s.RSSSource == "" && s.RSSBytes == 0) && !(s.RSSSource == "metrics" && s.RSSBytes > 0) {
			t.Errorf("server %+v", s)
		}
	}
	t.Run("builtin", func(t *testing.T) {
		t.Parallel()
		rep := runBenchBinary(t, childEnv("TURND_BENCH_TOKEN=bench-secret"), "--url", p.base, "--turns", "20", "--concurrency", "2", "--output-bytes", "100")
		checkRemote(t, rep, 20, 4)
		if rep.Workload.Tools != bench.ToolBuiltin || rep.Tool != nil {
			t.Errorf("workload %+v, tool %+v", rep.Workload, rep.Tool)
		}
	})
	t.Run("http tools", func(t *testing.T) {
		t.Parallel()
		rep := runBenchBinary(t, childEnv(), "--url", p.base, "--token", "bench-secret", "--tools", "http", "--tool-addr", toolAddr,
			"--turns", "20", "--concurrency", "2", "--calls", "2", "--deferred-fraction", "0.5", "--seed", "1")
		checkRemote(t, rep, 20, 2)
		if rep.Tool == nil || rep.Tool.Delivered != rep.Turns.Deferred || rep.Turns.Deferred == 0 {
			t.Errorf("turns %+v, tool %+v", rep.Turns, rep.Tool)
		}
	})
	t.Run("a wrong token", func(t *testing.T) {
		t.Parallel()
		code, _, stderr := runTurnd(t, childEnv(), "bench", "--url", p.base, "--token", "wrong", "--turns", "5")
		if code != 1 || !strings.Contains(stderr, "401") || !strings.Contains(stderr, "token") {
			t.Errorf("exit %d, stderr:\n%s", code, stderr)
		}
	})
	t.Run("tools it lacks", func(t *testing.T) {
		t.Parallel()
		bare := startTurnd(t, procOptions{name: "bare", args: []string{"--data", t.TempDir() + "/t.db"}})
		for _, tt := range []struct {
			tools, want string
		}{
			{"builtin", "has no tool echo: list them in its tool config"},
			{"http", "has no tool bench_read, bench_write, bench_deferred: add these tools to its config (see `turnd bench --print-tool-config --tool-addr 127.0.0.1:"},
		} {
			code, _, stderr := runTurnd(t, childEnv(), "bench", "--url", bare.base, "--tools", tt.tools, "--tool-addr", freeAddr(t), "--turns", "5")
			if code != 1 || !strings.Contains(stderr, tt.want) {
				t.Errorf("--tools %s: exit %d, stderr:\n%s", tt.tools, code, stderr)
			}
		}
	})
}

// TestBenchInterruptedRounds interrupts a run of three rounds (as Ctrl-C
// would) once a round's load has answered a turn: stopped in its second round, the
// report covers the first, baseline and ratio included; stopped in its
// first, it reports the load it ran, without a baseline.
func TestBenchInterruptedRounds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, when string
		complete   int
	}{
		{"in the second round", "(round 2 of 3)", 1},
		{"in the first round", "(round 1 of 3)", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rep, stderr := interruptBench(t, tc.when, "--store", "sqlite", "--tools", "builtin",
				"--concurrency", "4", "--calls", "2", "--rounds", "3", "--duration", "3s", "--baseline", "3s")
			if rep.Turns.OK == 0 {
				t.Fatalf("no turns reported: %+v\n%s", rep.Turns, stderr)
			}
			// The CPU split covers the turns reported, and no more.
			checkCPU(t, "load", rep.CPU, true, false, rep.Turns.OK, rep.Turns.ElapsedSeconds)
			if tc.complete == 0 {
				if rep.Baseline != nil || rep.Ratio != nil || rep.Rounds != nil || rep.BaselineNote == "" || rep.Note != "" {
					t.Errorf("stopped in the first round: baseline %+v, ratio %v, rounds %v, notes %q %q",
						rep.Baseline, rep.Ratio, rep.Rounds, rep.BaselineNote, rep.Note)
				}
				return
			}
			if rep.Baseline == nil || rep.Ratio == nil || len(rep.Rounds) != tc.complete {
				t.Fatalf("stopped after %d rounds: baseline %+v, ratio %v, rounds %v, note %q\n%s",
					tc.complete, rep.Baseline, rep.Ratio, rep.Rounds, rep.BaselineNote, stderr)
			}
			if !strings.Contains(rep.Note, "stopped in round 2 of 3") {
				t.Errorf("note %q", rep.Note)
			}
			// The report is the first round's alone: its load and the
			// baseline around it.
			r := rep.Rounds[0]
			if math.Abs(rep.Turns.PerSec-r.TurnsPerSec) > 0.01*r.TurnsPerSec || math.Abs(rep.Baseline.PerSec-r.BaselinePerSec) > 0.01*r.BaselinePerSec {
				t.Errorf("turns %v/s and baseline %v/s, the round's %+v", rep.Turns.PerSec, rep.Baseline.PerSec, r)
			}
			if rep.Turns.ElapsedSeconds > 1.5 {
				t.Errorf("the report's load lasted %vs; the first round's is 1s", rep.Turns.ElapsedSeconds)
			}
			checkCPU(t, "baseline", rep.Baseline.CPU, true, false, rep.Baseline.Transactions, rep.Baseline.ElapsedSeconds)
		})
	}
}

// interruptBench runs `turnd bench --json ARGS`, sends it an interrupt once
// the load whose log line holds when has answered a turn (its progress bar
// says so), and decodes its report. It returns the report and the log.
func interruptBench(t *testing.T, when string, args ...string) (bench.Report, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), benchTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, turndBinary(t), append([]string{"bench", "--json", "--progress", "bar"}, args...)...)
	cmd.Env = childEnv()
	var stdout syncBuffer
	cmd.Stdout = &stdout
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	sc := bufio.NewScanner(pipe)
	// The bar redraws its line after a carriage return.
	sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
		if i := bytes.IndexAny(data, "\r\n"); i >= 0 {
			return i + 1, data[:i], nil
		}
		if atEOF && len(data) > 0 {
			return len(data), data, nil
		}
		return 0, nil, nil
	})
	answered := regexp.MustCompile(`\s([1-9][0-9]*) ok\s`)
	loading, signalled := false, false
	for sc.Scan() {
		line := sc.Text()
		log.WriteString(line + "\n")
		switch {
		case strings.Contains(line, "bench: load: ") && strings.Contains(line, when):
			loading = true
		case loading && !signalled && answered.MatchString(line):
			signalled = true
			if err := cmd.Process.Signal(os.Interrupt); err != nil {
				t.Fatal(err)
			}
		}
	}
	err = cmd.Wait()
	checkRaces(t, "turnd bench", log.String())
	if !signalled {
		t.Fatalf("no turn answered in the load %q; exit %v\n%s", when, err, log.String())
	}
	if err == nil {
		t.Errorf("an interrupted bench exited 0")
	}
	var rep bench.Report
	dec := json.NewDecoder(strings.NewReader(stdout.String()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("decoding the report: %v\nstdout:\n%s\nlog:\n%s", err, stdout.String(), log.String())
	}
	return rep, log.String()
}
