package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/turnd/turnd/internal/loadtest"
)

// Which store a turnd the bench starts uses.
const (
	StoreAuto     = "auto"     // DATABASE_URL, else a throwaway PostgreSQL, else SQLite
	StorePostgres = "postgres" // DATABASE_URL, else a throwaway PostgreSQL; an error without either
	StoreSQLite   = "sqlite"   // the embedded store in a temp dir
)

// Config is a whole `turnd bench` run.
type Config struct {
	Workload Workload

	// URL and Token name a running turnd; without URL the bench starts
	// one (ServerBinary) on Store.
	URL, Token string
	// ServerBinary is the turnd executable to start.
	ServerBinary string
	// Store is StoreAuto, StorePostgres or StoreSQLite.
	Store string
	// DatabaseURL is the PostgreSQL of a started turnd (DATABASE_URL);
	// empty makes a throwaway one when the server binaries are there.
	DatabaseURL string
	// BaselineDatabaseURL is the PostgreSQL of the baseline for a turnd
	// at URL (the bench cannot see its database).
	BaselineDatabaseURL string
	// ToolAddr is where the bench serves its HTTP tools (default a free
	// loopback port; fix it for a turnd at URL, whose tool config must
	// point at it).
	ToolAddr string

	// Baseline is how long the INSERT baseline runs, half before the load
	// and half after; 0 skips it.
	Baseline time.Duration
	// Rounds splits the load window and the baseline into this many
	// rounds (0 is 1), each a slice of baseline, a slice of load and a
	// slice of baseline, so that the two see the same machine even when
	// its speed drifts during the run (a shared machine's does, by tens of
	// percent within seconds). The report combines the rounds and lists
	// each one's ratio.
	Rounds int
	// BaselineClient runs a PostgreSQL baseline: BaselineClientAuto (""
	// too), BaselineClientPgbench or BaselineClientGo.
	BaselineClient string
	// Pgbench is the pgbench to run; empty looks for one (PgbenchPath).
	Pgbench string
	// BaselineClients is the baseline's concurrency; 0 takes the
	// workload's (closed loop) or MaxInFlight capped at 32 (open loop).
	BaselineClients int

	// JSON prints the Report as one JSON object instead of text;
	// Markdown as one row of a Markdown table (MarkdownHeader).
	JSON, Markdown bool
	// Label names the workload in the report.
	Label string
	// Progress is "bar" (redrawn on a terminal), "lines" (a line every
	// ProgressEvery) or "none".
	Progress      string
	ProgressEvery time.Duration
}

// Validate reports every problem with c, joined.
func (c Config) Validate() error {
	errs := []error{c.Workload.Validate()}
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.URL != "" {
		if _, err := parseBase(c.URL); err != nil {
			errs = append(errs, err)
		}
		if c.Store != StoreAuto && c.Store != "" {
			bad("store %q: only for a turnd the bench starts (without --url)", c.Store)
		}
		if c.Workload.Tools == ToolHTTP && c.ToolAddr == "" {
			bad("tools http with --url: give --tool-addr, the address that turnd's tool config names (turnd bench --print-tool-config), or use --tools builtin")
		}
	} else {
		if c.BaselineDatabaseURL != "" {
			bad("baseline-database-url: only with --url; a turnd the bench starts has its baseline on its own store")
		}
		if c.ServerBinary == "" {
			bad("no turnd binary to start (and no --url)")
		}
		switch c.Store {
		case "", StoreAuto, StorePostgres:
		case StoreSQLite:
			if c.DatabaseURL != "" {
				bad("store sqlite: DATABASE_URL is set; unset it or choose --store postgres")
			}
		default:
			bad("store %q: must be auto, postgres or sqlite", c.Store)
		}
	}
	if c.JSON && c.Markdown {
		bad("json and markdown are exclusive")
	}
	if c.Baseline < 0 {
		bad("baseline %v: must be a positive duration, or 0 to skip it", c.Baseline)
	}
	switch c.BaselineClient {
	case "", BaselineClientAuto, BaselineClientGo:
	case BaselineClientPgbench:
		if _, ok := c.pgbench(); !ok {
			bad("baseline-client pgbench: no pgbench beside the PostgreSQL server binaries nor on the PATH (install PostgreSQL's client programs, or use --baseline-client go)")
		}
	default:
		bad("baseline-client %q: must be auto, pgbench or go", c.BaselineClient)
	}
	switch n := c.rounds(); {
	case c.Rounds < 0 || n > maxRounds:
		bad("rounds %d: must be 1 to %d", c.Rounds, maxRounds)
	case n > 1 && c.Workload.Turns > 0:
		bad("rounds %d: the load is split by time, not with --turns", n)
	case n > 1 && c.Workload.Duration/time.Duration(n) < time.Second:
		bad("rounds %d: a round's load would last %v; give at least 1s per round (--duration)", n, c.Workload.Duration/time.Duration(n))
	case n > 1 && c.Baseline > 0 && c.Baseline/time.Duration(2*n) < 250*time.Millisecond:
		bad("rounds %d: a slice of baseline would last %v; give at least 500ms of --baseline per round", n, c.Baseline/time.Duration(2*n))
	}
	if c.BaselineClients < 0 || c.BaselineClients > 1000 {
		bad("baseline-clients %d: must be 0 (the workload's concurrency) to 1000", c.BaselineClients)
	}
	switch c.Progress {
	case "", "bar", "lines", "none":
	default:
		bad("progress %q: must be bar, lines or none", c.Progress)
	}
	return errors.Join(errs...)
}

// maxRounds caps Config.Rounds.
const maxRounds = 100

func (c Config) rounds() int { return max(1, c.Rounds) }

// pgbench returns the pgbench the baseline may run: --pgbench, else the one
// PgbenchPath finds.
func (c Config) pgbench() (string, bool) {
	if c.Pgbench != "" {
		return c.Pgbench, true
	}
	return PgbenchPath()
}

func (c Config) baselineClients() int {
	switch {
	case c.BaselineClients > 0:
		return c.BaselineClients
	case c.Workload.closedLoop():
		return c.Workload.Concurrency
	default:
		return min(c.Workload.maxInFlight(), 32)
	}
}

// Execute runs c: it sets up what c needs (a store, a turnd, the tool
// server), runs the baseline and the load, writes the report to stdout
// and status and progress lines to stderr, and tears down what it set up.
func Execute(ctx context.Context, c Config, stdout, stderr io.Writer) (Report, error) {
	if err := c.Validate(); err != nil {
		return Report{}, err
	}
	logf := func(format string, args ...any) { fmt.Fprintf(stderr, "bench: "+format+"\n", args...) }
	rep := Report{Label: c.Label, StartedAt: time.Now().UTC().Truncate(time.Second), Machine: thisMachine(), Workload: workloadInfo(c.Workload)}
	dir, err := os.MkdirTemp("", "turnd-bench-")
	if err != nil {
		return rep, err
	}
	var cleanups []func()
	defer func() {
		for _, f := range slices.Backward(cleanups) {
			f()
		}
		os.RemoveAll(dir)
	}()

	var tools *ToolServer
	if c.Workload.Tools == ToolHTTP {
		if tools, err = StartToolServer(c.ToolAddr); err != nil {
			return rep, err
		}
		cleanups = append(cleanups, func() { _ = tools.Close() })
	}

	// The target and the baseline's database.
	var (
		server     *Server
		baselineDB string
		sqliteDir  string
	)
	target := Target{URL: c.URL, Token: c.Token}
	if c.URL == "" {
		rep.Target.Started = true
		dbURL := c.DatabaseURL
		switch {
		case c.Store == StoreSQLite:
			rep.Target.Store, rep.Target.StoreDetail = "sqlite", "embedded SQLite in a temp dir (--store sqlite)"
		case dbURL != "":
			rep.Target.Store, rep.Target.StoreDetail = "postgres", "DATABASE_URL"
		default:
			bin, ok := PostgresBinDir()
			if !ok {
				if c.Store == StorePostgres {
					return rep, errors.New("store postgres: DATABASE_URL is not set and no PostgreSQL server binaries (initdb, pg_ctl) were found")
				}
				rep.Target.Store, rep.Target.StoreDetail = "sqlite", "embedded SQLite in a temp dir (no DATABASE_URL, no PostgreSQL server binaries)"
				break
			}
			logf("starting a throwaway PostgreSQL (%s)", bin)
			pg, err := StartPostgres(ctx, bin, dir)
			if err != nil {
				return rep, err
			}
			cleanups = append(cleanups, func() {
				if err := pg.Stop(); err != nil {
					logf("%v", err)
				}
			})
			dbURL = pg.URL
			rep.Target.Store, rep.Target.StoreDetail = "postgres", "throwaway PostgreSQL "+pg.Version+" cluster (synchronous_commit on)"
		}
		if rep.Target.Store == "postgres" {
			baselineDB = dbURL
		} else {
			dbURL, sqliteDir = "", dir
		}
		toolURL := "http://127.0.0.1:9" // unreachable: builtin tools only
		if tools != nil {
			toolURL = tools.URL()
		}
		logf("starting turnd (%s, store: %s)", c.ServerBinary, rep.Target.StoreDetail)
		server, err = StartServer(ctx, ServerConfig{Binary: c.ServerBinary, Dir: dir, DatabaseURL: dbURL, ToolConfig: ToolConfig(toolURL)})
		if err != nil {
			return rep, err
		}
		cleanups = append(cleanups, func() {
			if err := server.Stop(); err != nil {
				logf("stopping turnd: %v\n%s", err, server.LogTail(20))
			}
		})
		target.URL = server.URL
	} else {
		rep.Target.Store, rep.Target.StoreDetail = "unknown", "a running turnd"
		baselineDB = c.BaselineDatabaseURL
		if err := checkTools(ctx, target, c.Workload, tools); err != nil {
			return rep, err
		}
	}
	rep.Target.URL = target.URL

	serverPID := 0
	if server != nil {
		serverPID = server.PID()
	}
	meter := newCPUMeter(ctx, serverPID, baselineDB)
	// The CPU of the measured windows (see cpu.go), read at their edges
	// through each run's context (meter.watch): the load's after its
	// warm-up, a baseline slice's around its inserts (pgbench's run). A
	// round's counts join the report's when the round does.
	var loadCPU, baseCPU, roundBaseCPU cpuTally

	pgbench, havePgbench := c.pgbench()
	usePgbench := baselineDB != "" && havePgbench && c.BaselineClient != BaselineClientGo
	measured := 0 // baseline slices measured
	inserts := func(windowed context.Context, d time.Duration) (loadtest.Result, error) {
		defer func() { measured++ }()
		switch {
		case usePgbench:
			r, err := PgbenchBaseline(windowed, pgbench, baselineDB, dir, c.baselineClients(), d)
			if err == nil || c.BaselineClient == BaselineClientPgbench || measured > 0 || ctx.Err() != nil {
				return r, err
			}
			// auto: a pgbench that does not work here (too old a report,
			// a connection it cannot make) leaves the run to the Go loop,
			// for all of its baseline.
			logf("pgbench failed, the baseline runs on the Go loop instead: %v", err)
			usePgbench = false
			return PostgresBaseline(windowed, baselineDB, c.baselineClients(), d)
		case baselineDB != "":
			return PostgresBaseline(windowed, baselineDB, c.baselineClients(), d)
		}
		return SQLiteBaseline(windowed, sqliteDir, c.baselineClients(), d)
	}
	// A slice of baseline, its window's CPU counted in the round's.
	baseline := func(d time.Duration) (loadtest.Result, error) {
		windowed, w := meter.watch(ctx)
		r, err := inserts(windowed, d)
		if err == nil {
			roundBaseCPU.add(w.opened, w.closed, r.Ops)
		}
		return r, err
	}
	withBaseline := c.Baseline > 0 && (baselineDB != "" || sqliteDir != "")
	switch {
	case c.Baseline == 0:
		rep.BaselineNote = "skipped (--baseline 0)"
	case !withBaseline:
		rep.BaselineNote = "turnd's database is not known to the bench: give --baseline-database-url (the PostgreSQL turnd uses) to measure the INSERT baseline"
	}
	rss := func() (cur, peak int64, src string) {
		if server != nil {
			if cur, peak, err := server.ProcRSS(); err == nil {
				return cur, peak, "proc"
			}
		}
		if v, ok := MetricsRSS(ctx, target.URL, target.Token); ok {
			return v, 0, "metrics"
		}
		return 0, 0, ""
	}

	// Each round: a slice of baseline, a slice of load, a slice of
	// baseline (one round: half the baseline before the load, half after).
	n := c.rounds()
	slice := func(total time.Duration, parts, i int) time.Duration {
		return total*time.Duration(i+1)/time.Duration(parts) - total*time.Duration(i)/time.Duration(parts)
	}
	// baseSlice is slice i of the baseline, as long as it will run
	// (pgbench runs whole seconds).
	baseSlice := func(i int) time.Duration {
		d := slice(c.Baseline, 2*n, i)
		if usePgbench {
			d = pgbenchDuration(d)
		}
		return d
	}
	var (
		bases  []loadtest.Result
		loads  []Load
		runErr error
		// complete counts the rounds run in full. A run stopped (by an
		// interrupt, say) after some reports them alone; one stopped in
		// its first round reports the load it ran, without a baseline.
		complete int
	)
	for i := range n {
		var before, after loadtest.Result
		roundBaseCPU = cpuTally{}
		if withBaseline {
			logf("baseline: single-row INSERT transactions from %d clients for %v%s", c.baselineClients(), baseSlice(2*i), roundName(i, n, "before the load"))
			if before, err = baseline(baseSlice(2 * i)); err != nil {
				if complete == 0 {
					return rep, err
				}
				runErr = err
				break
			}
		}
		if i == 0 {
			// Idle RSS: turnd has started and done nothing yet.
			rep.Server.IdleRSSBytes, _, rep.Server.RSSSource = rss()
		}
		w := c.Workload
		if n > 1 {
			w.Duration = slice(c.Workload.Duration, n, i)
		}
		logf("load: %s%s", describe(w), roundName(i, n, ""))
		var load Load
		windowed, loadWindow := meter.watch(ctx)
		load, runErr = Run(windowed, target, w, progressPrinter(c, stderr), c.ProgressEvery)
		if runErr != nil && load.Result.Elapsed == 0 && i == 0 {
			return rep, runErr
		}
		if runErr == nil && withBaseline {
			logf("baseline: %v more%s", baseSlice(2*i+1), roundName(i, n, "after the load"))
			after, runErr = baseline(baseSlice(2*i + 1))
		}
		// A round stopped partway counts only when no round is complete.
		if load.Result.Elapsed > 0 && (runErr == nil || complete == 0) {
			loads = append(loads, load)
			loadCPU.add(loadWindow.opened, loadWindow.closed, load.Result.Ops)
		}
		if runErr != nil {
			if complete == 0 && withBaseline {
				rep.BaselineNote = "the run stopped before its baseline was complete"
			}
			break
		}
		if withBaseline {
			bases = append(bases, before, after)
			baseCPU.merge(roundBaseCPU)
			if n > 1 {
				rep.Rounds = append(rep.Rounds, roundInfo(load.Result, loadtest.Combine(before, after)))
			}
		}
		complete++
	}
	if runErr != nil && complete > 0 {
		rep.Note = fmt.Sprintf("stopped in round %d of %d: the report covers the %d complete rounds", complete+1, n, complete)
	}
	load := combineLoads(loads)
	var src string
	rep.Server.RSSBytes, rep.Server.PeakRSSBytes, src = rss()
	if src != rep.Server.RSSSource {
		rep.Server.IdleRSSBytes = 0
		rep.Server.RSSSource = src
	}
	if withBaseline && (runErr == nil || complete > 0) {
		b := loadtest.Combine(bases...)
		kind := BaselinePostgres
		if baselineDB == "" {
			kind = BaselineSQLite
		}
		client := BaselineClientGo
		if usePgbench {
			client = BaselineClientPgbench
		}
		rep.Baseline = &BaselineInfo{
			Kind: kind, Client: client, Clients: c.baselineClients(), Transactions: b.Ops, Errors: b.Errors,
			ElapsedSeconds: b.Elapsed.Seconds(), PerSec: b.PerSec, Latency: latencyMS(b),
			CPU: baseCPU.split(),
		}
		if kind == BaselineSQLite {
			rep.BaselineNote = "SQLite: INSERT transactions on a file beside turnd's, through one write connection as the embedded store writes"
		}
	}

	rep.fill(load, tools)
	rep.CPU = loadCPU.split()
	if tools != nil {
		_, _, _, first := tools.Stats()
		if first != nil && rep.FirstError == "" {
			rep.FirstError = "tool: " + first.Error()
		}
	}
	switch {
	case c.Markdown:
		rep.WriteMarkdownRow(stdout)
	case c.JSON:
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return rep, err
		}
	default:
		rep.WriteText(stdout)
	}
	if runErr != nil {
		return rep, runErr
	}
	return rep, nil
}

// fill puts the numbers of load and of the tool server (nil when the
// workload used the builtins) into r.
func (r *Report) fill(load Load, tools *ToolServer) {
	res := load.Result
	r.Turns = TurnStats{
		Started: res.Ops + res.Errors, OK: res.Ops, Failed: res.Errors,
		ElapsedSeconds: res.Elapsed.Seconds(), PerSec: res.PerSec,
		Calls: load.Calls, Reads: load.Reads, Writes: load.Writes, Deferred: load.Deferred,
		Truncated: load.Truncated,
	}
	if res.Elapsed > 0 {
		r.Turns.CallsPerSec = float64(res.Ops*r.Workload.Calls) / res.Elapsed.Seconds()
	}
	r.Latency = latencyMS(res)
	r.Errors = load.Errors
	if r.Errors == nil {
		r.Errors = map[string]int{}
	}
	r.FirstError = load.FirstError
	if tools != nil {
		calls, delivered, failed, _ := tools.Stats()
		r.Tool = &ToolStats{Calls: calls, Delivered: delivered, DeliveryErrors: failed}
	}
	if r.Baseline != nil {
		if x, ok := ratio(r.Turns.PerSec, r.Baseline.PerSec); ok {
			r.Ratio = &x
		}
	}
}

// describe says what w does, in one line.
func describe(w Workload) string {
	var b strings.Builder
	if w.closedLoop() {
		fmt.Fprintf(&b, "%d clients", w.Concurrency)
	} else {
		fmt.Fprintf(&b, "%g turns/s", w.Rate)
	}
	if w.Turns > 0 {
		fmt.Fprintf(&b, ", %d turns", w.Turns)
	} else {
		fmt.Fprintf(&b, " for %v", w.Duration)
	}
	fmt.Fprintf(&b, ", %d calls/turn", w.Calls)
	return b.String()
}

// checkTools makes sure a turnd the bench did not start has the tools the
// workload calls.
func checkTools(ctx context.Context, t Target, w Workload, tools *ToolServer) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(t.URL, "/")+"/v1/tools", nil)
	if err != nil {
		return err
	}
	if t.Token != "" {
		req.Header.Set("Authorization", "Bearer "+t.Token)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("reaching turnd at %s: %w", t.URL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("GET %s/v1/tools answered %d (a wrong --token?): %s", t.URL, resp.StatusCode, b)
	}
	var list struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return fmt.Errorf("GET %s/v1/tools: %w", t.URL, err)
	}
	have := map[string]bool{}
	for _, tl := range list.Tools {
		have[tl.Name] = true
	}
	need := []string{"echo"}
	if !w.Latency.IsZero() {
		need = []string{"sleep"}
	}
	hint := "list them in its tool config: builtin: [echo, sleep]"
	if w.Tools == ToolHTTP {
		need = []string{ToolRead, ToolWrite, ToolDeferred}
		hint = fmt.Sprintf("add these tools to its config (see `turnd bench --print-tool-config --tool-addr %s`), or use --tools builtin", strings.TrimPrefix(tools.URL(), "http://"))
	}
	var missing []string
	for _, n := range need {
		if !have[n] {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("turnd at %s has no tool %s: %s", t.URL, strings.Join(missing, ", "), hint)
	}
	return nil
}

// roundName says which round i of n a log line is about ("" for one round),
// with what, when given.
func roundName(i, n int, what string) string {
	switch {
	case n > 1 && what != "":
		return fmt.Sprintf(" (round %d of %d, %s)", i+1, n, what)
	case n > 1:
		return fmt.Sprintf(" (round %d of %d)", i+1, n)
	case what != "":
		return " (" + what + ")"
	}
	return ""
}

// combineLoads adds up the loads of the rounds of a run.
func combineLoads(loads []Load) Load {
	if len(loads) == 1 {
		return loads[0]
	}
	var (
		c       Load
		results []loadtest.Result
	)
	for _, l := range loads {
		results = append(results, l.Result)
		for k, v := range l.Errors {
			if c.Errors == nil {
				c.Errors = map[string]int{}
			}
			c.Errors[k] += v
		}
		if c.FirstError == "" {
			c.FirstError = l.FirstError
		}
		c.Calls += l.Calls
		c.Reads += l.Reads
		c.Writes += l.Writes
		c.Deferred += l.Deferred
		c.Truncated += l.Truncated
	}
	c.Result = loadtest.Combine(results...)
	return c
}
