package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/turnd/turnd/internal/bench"
)

// benchConfig is `turnd bench`'s flags: the bench.Config, or a request to
// print the tool config.
type benchConfig struct {
	bench.Config
	PrintToolConfig bool
	MarkdownHeader  bool
	// Streamed runs the streamed workload (bench.ExecuteStreamed) instead.
	Streamed bool
	// Resources runs the resources workload (bench.ExecuteResources)
	// instead: Writes writes of WriteLatency a turn.
	Resources    bool
	Writes       int
	WriteLatency time.Duration
}

// parseBench reads `turnd bench`'s flags (and DATABASE_URL, TURND_BENCH_TOKEN).
// isTTY says whether stderr is a terminal, for --progress auto.
func parseBench(args []string, stderr io.Writer, env func(string) (string, bool), isTTY bool) (benchConfig, error) {
	e := envLookup(env)
	var (
		c benchConfig
		t benchText
	)
	fs := newBenchFlagSet(stderr, e, &c, &t)
	if err := parseArgs(fs, args); err != nil {
		return benchConfig{}, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if c.MarkdownHeader {
		return c, nil
	}
	if c.PrintToolConfig {
		if c.ToolAddr == "" {
			return benchConfig{}, usageError{"print-tool-config: give --tool-addr, the host:port the bench will serve its tools on"}
		}
		return c, nil
	}
	if err := c.checkLoad(set); err != nil {
		return benchConfig{}, err
	}
	if err := c.checkCompletions(set); err != nil {
		return benchConfig{}, err
	}
	if err := c.parseWorkloadText(t); err != nil {
		return benchConfig{}, err
	}
	if err := c.readBenchEnv(e); err != nil {
		return benchConfig{}, err
	}
	if err := c.setProgress(t.progress, isTTY); err != nil {
		return benchConfig{}, err
	}
	if err := c.findServerBinary(); err != nil {
		return benchConfig{}, err
	}
	if c.Streamed && c.Workload.Client == bench.ClientOrdinary {
		return benchConfig{}, usageError{"--streamed posts with the tuned client only: drop --client ordinary"}
	}
	if c.Resources {
		// Its own shape: turns posted one at a time, no baseline.
		if c.Streamed || c.Writes < 1 || c.Writes > 256 || c.WriteLatency <= 0 || c.Rounds < 1 {
			return benchConfig{}, usageError{fmt.Sprintf("--resources takes --writes 1..256 (got %d), a positive --write-latency (got %s) and --rounds (got %d), without --streamed", c.Writes, c.WriteLatency, c.Rounds)}
		}
		return c, nil
	}
	if err := c.Validate(); err != nil {
		return benchConfig{}, usageError{err.Error()}
	}
	return c, nil
}

// benchText holds, as given, the bench's flags parsed once the flag set
// has: the distributions and the progress mode.
type benchText struct {
	latency, deferredDelay, progress string
}

// newBenchFlagSet returns the flag set of `turnd bench`, whose flags set c
// or t.
func newBenchFlagSet(stderr io.Writer, env envLookup, c *benchConfig, t *benchText) *flag.FlagSet {
	fs := flag.NewFlagSet("turnd bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: turnd bench [flags]

Drives a turnd with a workload and reports throughput, latency percentiles,
errors and the server's RSS, beside the rate of single-row INSERT
transactions the same database sustains at the same concurrency.

Without --url it starts a turnd of its own on a loopback port, on
DATABASE_URL if set (migrated, and left with the bench's sessions), else on
a throwaway PostgreSQL (when the server binaries are installed), else on the
embedded SQLite store in a temp dir. See BENCHMARKS.md.

Examples:
  turnd bench                                         # 32 clients, 4 instant reads per turn, 10s
  turnd bench --rate 200 --duration 30s --latency uniform:1ms-20ms --read-fraction 0.5
  turnd bench --turns 2000 --output-bytes 65536       # outputs over the 16 KiB budget
  turnd bench --deferred-fraction 0.25 --deferred-delay exp:50ms
  turnd bench --url http://127.0.0.1:8080 --token $TOKEN --tools builtin \
              --baseline-database-url $DATABASE_URL

Flags:
`)
		fs.PrintDefaults()
	}
	benchLoadFlags(fs, env, c)
	benchWorkloadFlags(fs, &c.Workload, t)
	benchServerFlags(fs, c)
	benchBaselineFlags(fs, c)
	benchReportFlags(fs, c, t)
	return fs
}

// benchLoadFlags adds the flags of the turnd driven and of how hard and
// how long it is driven.
func benchLoadFlags(fs *flag.FlagSet, env envLookup, c *benchConfig) {
	w := &c.Workload
	fs.StringVar(&c.URL, "url", "", "a running turnd's base URL; empty starts one")
	fs.StringVar(&c.Token, "token", env.get("TURND_BENCH_TOKEN", ""), "bearer token for --url (TURND_BENCH_TOKEN)")
	fs.Float64Var(&w.Rate, "rate", 0, "turns per second, open loop (exclusive with --concurrency)")
	fs.IntVar(&w.Concurrency, "concurrency", 32, "clients, closed loop: each posts its next turn when the last is answered")
	fs.IntVar(&w.MaxInFlight, "max-in-flight", 1024, "with --rate: the most turns in flight; a turn due beyond it is dropped (error client_overload)")
	fs.DurationVar(&w.Duration, "duration", 10*time.Second, "length of the measured window (exclusive with --turns)")
	fs.IntVar(&w.Turns, "turns", 0, "post this many turns instead of running for --duration")
}

// benchWorkloadFlags adds the flags of each turn: its calls, their tools,
// latencies and outputs, and the client that posts it.
func benchWorkloadFlags(fs *flag.FlagSet, w *bench.Workload, t *benchText) {
	fs.IntVar(&w.Calls, "calls", 4, "calls per turn")
	fs.Float64Var(&w.ReadFraction, "read-fraction", 1, "share of the (non-deferred) calls that are reads, run concurrently; the rest are writes, run in order")
	fs.Float64Var(&w.DeferredFraction, "deferred-fraction", 0, "share of the calls that park on a completion key; the bench's tool completes them after --deferred-delay")
	fs.StringVar(&t.latency, "latency", "none", "tool latency of reads and writes: fixed:5ms, uniform:1ms-20ms, exp:10ms or none")
	fs.StringVar(&t.deferredDelay, "deferred-delay", "fixed:10ms", "delay before a deferred call's result is delivered (same syntax as --latency)")
	fs.Int64Var(&w.OutputBytes, "output-bytes", 0, "bytes of output per call; over the session budget (16384 by default) it is truncated")
	fs.StringVar(&w.Tools, "tools", "", "http (the bench serves the tools itself; the default without --url) or builtin (turnd's echo and sleep; the default with --url)")
	fs.DurationVar(&w.Wait, "wait", 2*time.Minute, "how long turnd may hold a turn's answer for it to settle (Prefer: wait); a turn unsettled then is an error")
	fs.StringVar(&w.Client, "client", bench.ClientTuned, "who posts the turns: tuned (bodies by appends, a lean HTTP client, most answers checked by their text: the least CPU) or ordinary (encoding/json bodies and answers, net/http's default transport but for keep-alive: what a user's program spends)")
	fs.Uint64Var(&w.Seed, "seed", 0, "seed of the call kinds and latencies drawn (0: random)")
	fs.BoolVar(&w.Completions, "completions", false, "run the completion workload instead: park --parked turns of one deferred call each (their waiters holding the answers), then deliver their results to /v1/complete/{key} from --concurrency clients as fast as turnd answers; reports completions/s against the INSERT baseline and delivery → answer latency; see BENCHMARKS.md")
	fs.IntVar(&w.Parked, "parked", bench.DefaultParked, fmt.Sprintf("with --completions: the calls parked and delivered a round (1..%d; each waiter holds a connection)", bench.MaxParked))
}

// benchServerFlags adds the flags of the turnd the bench starts and of
// the tools it serves.
func benchServerFlags(fs *flag.FlagSet, c *benchConfig) {
	fs.StringVar(&c.Store, "store", bench.StoreAuto, "store of the turnd the bench starts: auto, postgres or sqlite")
	fs.StringVar(&c.ToolAddr, "tool-addr", "", "address of the bench's HTTP tools (default a free loopback port)")
}

// benchBaselineFlags adds the flags of the INSERT baseline and of the
// rounds that interleave it with the load.
func benchBaselineFlags(fs *flag.FlagSet, c *benchConfig) {
	fs.DurationVar(&c.Baseline, "baseline", 4*time.Second, "length of the INSERT baseline, half before the load and half after; 0 skips it")
	fs.StringVar(&c.BaselineClient, "baseline-client", bench.BaselineClientAuto, "who runs the PostgreSQL baseline: pgbench (PostgreSQL's own, the leanest client; durations round up to whole seconds), go (a loop in this process, which drives fewer transactions), or auto (pgbench when found)")
	fs.StringVar(&c.Pgbench, "pgbench", "", "the pgbench to run for the baseline (default: beside the PostgreSQL server binaries, else on the PATH)")
	fs.IntVar(&c.Rounds, "rounds", 1, "split --duration and --baseline into this many rounds of baseline, load, baseline, so that both see the same machine; the report lists each round's ratio")
	fs.IntVar(&c.BaselineClients, "baseline-clients", 0, "baseline concurrency (default: --concurrency, or min(--max-in-flight, 32) with --rate)")
	fs.StringVar(&c.BaselineDatabaseURL, "baseline-database-url", "", "with --url: the PostgreSQL that turnd uses, for the baseline")
	fs.BoolVar(&c.Statements, "statements", false, "also report the execution time per turn (or completion) of the costliest statements turnd's PostgreSQL ran in the load's windows, from pg_stat_statements: the bench's throwaway cluster preloads it and creates the extension; another must have both. It costs PostgreSQL a little on every statement")
}

// benchReportFlags adds the flags of what the bench prints, and of the
// modes that run something else than the workload.
func benchReportFlags(fs *flag.FlagSet, c *benchConfig, t *benchText) {
	fs.BoolVar(&c.JSON, "json", false, "print the report as one JSON object")
	fs.BoolVar(&c.Markdown, "markdown", false, "print the report as one row of a Markdown table (see BENCHMARKS.md)")
	fs.BoolVar(&c.MarkdownHeader, "markdown-header", false, "print the header of that table, and exit")
	fs.StringVar(&c.Label, "label", "", "a name for the workload, in the report")
	fs.StringVar(&t.progress, "progress", "auto", "progress on stderr: auto (a bar on a terminal, else lines), bar, lines or none")
	fs.BoolVar(&c.Streamed, "streamed", false, "run the streamed workload instead: the stream-end → answer latency of the reference fixture streamed in each format against the same turns posted whole at stream end (--turns per format), then workload 1 streamed as NDJSON against it posted whole (--concurrency, --calls, --rounds slices of --duration each); see BENCHMARKS.md")
	fs.BoolVar(&c.Resources, "resources", false, "run the resources workload instead: turns of --writes writes of --write-latency each on as many resources against the same on one resource, posted one at a time (--turns of each kind a round, --rounds rounds); see BENCHMARKS.md")
	fs.IntVar(&c.Writes, "writes", 8, "with --resources: the writes of a turn")
	fs.DurationVar(&c.WriteLatency, "write-latency", 20*time.Millisecond, "with --resources: how long each write takes")
	fs.BoolVar(&c.PrintToolConfig, "print-tool-config", false, "print the tool config a turnd needs for --tools http with --tool-addr, and exit")
}

// checkLoad checks the load's flags, given those set, against each other:
// --rate or --concurrency, --turns or --duration.
func (c *benchConfig) checkLoad(set map[string]bool) error {
	w := &c.Workload
	if set["rate"] {
		if set["concurrency"] {
			return usageError{"--rate and --concurrency are exclusive: --rate posts turns open loop at a fixed rate, --concurrency from that many clients in a closed loop"}
		}
		w.Concurrency = 0
		if w.Rate <= 0 {
			return usageError{fmt.Sprintf("rate: %v is not a positive number of turns per second", w.Rate)}
		}
	}
	if set["turns"] {
		if set["duration"] {
			return usageError{"--duration and --turns are exclusive"}
		}
		if w.Turns <= 0 {
			return usageError{fmt.Sprintf("turns: %d is not a positive number", w.Turns)}
		}
		w.Duration = 0
	} else if w.Duration <= 0 {
		return usageError{fmt.Sprintf("duration: %v is not a positive duration", w.Duration)}
	}
	if !set["max-in-flight"] && w.Rate == 0 {
		w.MaxInFlight = 0
	}
	return nil
}

// checkCompletions checks the flags of the completion workload, given
// those set: its turns are one call each, and it parks --parked calls
// rather than running for --duration or --turns.
func (c *benchConfig) checkCompletions(set map[string]bool) error {
	w := &c.Workload
	if !w.Completions {
		if set["parked"] {
			return usageError{"--parked is for --completions"}
		}
		return nil
	}
	for _, f := range []string{"duration", "turns", "rate", "calls", "streamed", "resources"} {
		if set[f] {
			return usageError{fmt.Sprintf("--completions parks --parked calls of one call a turn each and delivers them from --concurrency clients: drop --%s", f)}
		}
	}
	w.Calls, w.Duration, w.Turns = 1, 0, 0
	return nil
}

// parseWorkloadText parses the latency distributions and defaults the
// tools: the bench's own without --url, turnd's builtins with it.
func (c *benchConfig) parseWorkloadText(t benchText) error {
	w := &c.Workload
	var err error
	if w.Latency, err = bench.ParseDist(t.latency); err != nil {
		return usageError{err.Error()}
	}
	if w.DeferredDelay, err = bench.ParseDist(t.deferredDelay); err != nil {
		return usageError{"deferred-delay: " + err.Error()}
	}
	if w.Tools == "" {
		w.Tools = bench.ToolHTTP
		if c.URL != "" {
			w.Tools = bench.ToolBuiltin
		}
	}
	return nil
}

// readBenchEnv reads, without --url, the database URL of the turnd the
// bench starts (DATABASE_URL or DATABASE_URL_FILE).
func (c *benchConfig) readBenchEnv(env envLookup) error {
	if c.URL != "" {
		return nil
	}
	var err error
	c.DatabaseURL, err = env.orFile("DATABASE_URL")
	return err
}

// setProgress sets the progress mode and how often it is shown; auto is
// a bar on a terminal, else lines.
func (c *benchConfig) setProgress(progress string, isTTY bool) error {
	switch progress {
	case "auto":
		progress = "lines"
		if isTTY {
			progress = "bar"
		}
	case "bar", "lines", "none":
	default:
		return usageError{fmt.Sprintf("progress: %q is not auto, bar, lines or none", progress)}
	}
	c.Progress = progress
	c.ProgressEvery = 5 * time.Second
	if progress == "bar" {
		c.ProgressEvery = 200 * time.Millisecond
	}
	return nil
}

// findServerBinary sets, without --url, the turnd to start: this binary.
func (c *benchConfig) findServerBinary() error {
	if c.URL != "" {
		return nil
	}
	var err error
	if c.ServerBinary, err = os.Executable(); err != nil {
		return fmt.Errorf("finding the turnd binary to start: %w", err)
	}
	return nil
}

// runBench is `turnd bench`.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer, env func(string) (string, bool)) error {
	c, err := parseBench(args, stderr, env, isTerminal(stderr))
	if err != nil {
		return err
	}
	if c.MarkdownHeader {
		_, err := io.WriteString(stdout, bench.MarkdownHeader)
		return err
	}
	if c.PrintToolConfig {
		_, err := stdout.Write(bench.ToolConfig("http://" + c.ToolAddr))
		return err
	}
	if c.Streamed {
		sc := bench.StreamedConfig{Config: c.Config, Turns: c.Workload.Turns, Rounds: c.Rounds,
			Concurrency: c.Workload.Concurrency, Calls: c.Workload.Calls, Slice: c.Workload.Duration}
		_, err = bench.ExecuteStreamed(ctx, sc, stdout, stderr)
		return err
	}
	if c.Resources {
		rc := bench.ResourcesConfig{Config: c.Config, Writes: c.Writes, Latency: c.WriteLatency, Rounds: c.Rounds}
		if c.Workload.Duration == 0 {
			rc.Turns = c.Workload.Turns
		}
		_, err = bench.ExecuteResources(ctx, rc, stdout, stderr)
		return err
	}
	_, err = bench.Execute(ctx, c.Config, stdout, stderr)
	return err
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
