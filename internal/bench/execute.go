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
	// Statements also reports the execution time per operation of the
	// statements turnd's PostgreSQL ran in the load's windows, from
	// pg_stat_statements (statements.go): the bench's own cluster then
	// preloads it and creates the extension; on another it must be there.
	// Off by default: pg_stat_statements costs PostgreSQL a little on
	// every statement, the baseline's too.
	Statements bool

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
	case n > 1 && !c.Workload.Completions && c.Workload.Duration/time.Duration(n) < time.Second:
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
	e := &execution{c: c, stderr: stderr,
		rep: Report{Label: c.Label, StartedAt: time.Now().UTC().Truncate(time.Second), Machine: thisMachine(), Workload: workloadInfo(c.Workload)}}
	defer e.tearDown()
	if err := e.setUp(ctx); err != nil {
		return e.rep, err
	}
	runErr, report := e.runRounds(ctx)
	if !report {
		return e.rep, runErr
	}
	e.collect(ctx, runErr)
	if err := e.write(stdout); err != nil {
		return e.rep, err
	}
	return e.rep, runErr
}

// execution is one Execute: what it set up, and what it measured so far.
type execution struct {
	c      Config
	stderr io.Writer
	rep    Report

	dir      string   // the run's temp dir
	cleanups []func() // run backwards by tearDown
	// scratch is the PostgreSQL baseline's table, made at its first slice.
	scratch string

	tools  *ToolServer // nil for the builtin tools
	server *Server     // nil for a turnd at c.URL
	target Target
	// The baseline's store: the PostgreSQL at baselineDB, else the
	// SQLite file in sqliteDir; neither, no baseline.
	baselineDB, sqliteDir string
	withBaseline          bool
	pgbench               string
	usePgbench            bool
	measured              int // baseline slices measured

	// The CPU of the measured windows (see cpu.go), read at their edges
	// through each run's context (meter.watch): the load's after its
	// warm-up, a baseline slice's around its inserts (pgbench's run). A
	// round's counts join the report's when the round does.
	meter                          *cpuMeter
	loadCPU, baseCPU, roundBaseCPU cpuTally
	// statements reads pg_stat_statements at the load's windows' edges
	// (Config.Statements); when not asked, nothing.
	statements *statementMeter
	// ownCluster: the PostgreSQL is the bench's throwaway cluster.
	ownCluster bool

	bases []loadtest.Result
	loads []Load
	// complete counts the rounds run in full. A run stopped (by an
	// interrupt, say) after some reports them alone; one stopped in its
	// first round reports the load it ran, without a baseline.
	complete int
}

func (e *execution) logf(format string, args ...any) {
	fmt.Fprintf(e.stderr, "bench: "+format+"\n", args...)
}

// tearDown undoes what setUp did, last first.
func (e *execution) tearDown() {
	for _, f := range slices.Backward(e.cleanups) {
		f()
	}
	if e.dir != "" {
		os.RemoveAll(e.dir)
	}
}

// setUp makes the run's temp dir, starts the tool server and the target
// (or checks a running one), and decides how the baseline runs.
func (e *execution) setUp(ctx context.Context) error {
	var err error
	if e.dir, err = os.MkdirTemp("", "turnd-bench-"); err != nil {
		return err
	}
	if e.c.Workload.Tools == ToolHTTP {
		if e.tools, err = StartToolServer(e.c.ToolAddr); err != nil {
			return err
		}
		e.cleanups = append(e.cleanups, func() { _ = e.tools.Close() })
	}
	if err := e.startTarget(ctx); err != nil {
		return err
	}
	e.rep.Target.URL = e.target.URL

	serverPID := 0
	if e.server != nil {
		serverPID = e.server.PID()
	}
	e.meter = newCPUMeter(ctx, serverPID, e.baselineDB)
	e.statements = &statementMeter{} // reads nothing, says nothing
	switch {
	case !e.c.Statements:
	case e.baselineDB != "":
		e.statements = openStatementMeter(ctx, e.baselineDB, e.ownCluster)
		e.cleanups = append(e.cleanups, func() { e.statements.close(ctx) })
	case e.sqliteDir != "":
		e.statements = &statementMeter{note: "PostgreSQL's statements not measured: turnd's store is SQLite"}
	default:
		e.statements = &statementMeter{note: "PostgreSQL's statements not measured: turnd's database is not known to the bench (give --baseline-database-url)"}
	}
	pgbench, havePgbench := e.c.pgbench()
	e.pgbench = pgbench
	e.usePgbench = e.baselineDB != "" && havePgbench && e.c.BaselineClient != BaselineClientGo
	e.withBaseline = e.c.Baseline > 0 && (e.baselineDB != "" || e.sqliteDir != "")
	switch {
	case e.c.Baseline == 0:
		e.rep.BaselineNote = "skipped (--baseline 0)"
	case !e.withBaseline:
		e.rep.BaselineNote = "turnd's database is not known to the bench: give --baseline-database-url (the PostgreSQL turnd uses) to measure the INSERT baseline"
	}
	return nil
}

// startTarget starts a turnd on the store c asks for, or, for a turnd at
// c.URL, checks that it serves the workload's tools; either way it learns
// the baseline's store.
func (e *execution) startTarget(ctx context.Context) error {
	c := e.c
	e.target = Target{URL: c.URL, Token: c.Token}
	if c.URL != "" {
		e.rep.Target.Store, e.rep.Target.StoreDetail = "unknown", "a running turnd"
		e.baselineDB = c.BaselineDatabaseURL
		return checkTools(ctx, e.target, c.Workload, e.tools)
	}
	e.rep.Target.Started = true
	dbURL, err := e.openStore(ctx)
	if err != nil {
		return err
	}
	if e.rep.Target.Store == "postgres" {
		e.baselineDB = dbURL
	} else {
		dbURL, e.sqliteDir = "", e.dir
	}
	toolURL := "http://127.0.0.1:9" // unreachable: builtin tools only
	if e.tools != nil {
		toolURL = e.tools.URL()
	}
	e.logf("starting turnd (%s, store: %s)", c.ServerBinary, e.rep.Target.StoreDetail)
	server, err := StartServer(ctx, ServerConfig{Binary: c.ServerBinary, Dir: e.dir, DatabaseURL: dbURL, ToolConfig: ToolConfig(toolURL)})
	if err != nil {
		return err
	}
	e.server = server
	e.cleanups = append(e.cleanups, func() {
		if err := server.Stop(); err != nil {
			e.logf("stopping turnd: %v\n%s", err, server.LogTail(20))
		}
	})
	e.target.URL = server.URL
	return nil
}

// openStore chooses the store of the turnd the bench starts, starting a
// throwaway PostgreSQL when it must, and says which in the report. It
// returns the PostgreSQL's URL ("" for SQLite).
func (e *execution) openStore(ctx context.Context) (string, error) {
	c, t := e.c, &e.rep.Target
	switch {
	case c.Store == StoreSQLite:
		t.Store, t.StoreDetail = "sqlite", "embedded SQLite in a temp dir (--store sqlite)"
		return "", nil
	case c.DatabaseURL != "":
		t.Store, t.StoreDetail = "postgres", "DATABASE_URL"
		return c.DatabaseURL, nil
	}
	bin, ok := PostgresBinDir()
	if !ok {
		if c.Store == StorePostgres {
			return "", errors.New("store postgres: DATABASE_URL is not set and no PostgreSQL server binaries (initdb, pg_ctl) were found")
		}
		t.Store, t.StoreDetail = "sqlite", "embedded SQLite in a temp dir (no DATABASE_URL, no PostgreSQL server binaries)"
		return "", nil
	}
	e.logf("starting a throwaway PostgreSQL (%s)", bin)
	pg, err := StartPostgres(ctx, bin, e.dir, c.Statements)
	if err != nil {
		return "", err
	}
	e.cleanups = append(e.cleanups, func() {
		if err := pg.Stop(); err != nil {
			e.logf("%v", err)
		}
	})
	e.ownCluster = true
	t.Store, t.StoreDetail = "postgres", "throwaway PostgreSQL "+pg.Version+" cluster (synchronous_commit on)"
	return pg.URL, nil
}

// runRounds runs the rounds, each a slice of baseline, a slice of load and
// a slice of baseline (one round: half the baseline before the load, half
// after). It returns the error that stopped them, and whether there is a
// report to write: not when the first round stopped before any load ran.
func (e *execution) runRounds(ctx context.Context) (runErr error, report bool) {
	n := e.c.rounds()
	for i := range n {
		var before, after loadtest.Result
		e.roundBaseCPU = cpuTally{}
		if e.withBaseline {
			e.logf("baseline: single-row INSERT transactions from %d clients for %v%s", e.c.baselineClients(), e.baseSlice(2*i), roundName(i, n, "before the load"))
			var err error
			if before, err = e.baseline(ctx, e.baseSlice(2*i)); err != nil {
				return err, e.complete > 0
			}
		}
		if i == 0 {
			// Idle RSS: turnd has started and done nothing yet.
			e.rep.Server.IdleRSSBytes, _, e.rep.Server.RSSSource = e.rss(ctx)
		}
		w := e.c.Workload
		if n > 1 {
			w.Duration = slice(e.c.Workload.Duration, n, i)
		}
		e.logf("load: %s%s", describe(w), roundName(i, n, ""))
		windowed, loadWindow := e.meter.watch(ctx)
		windowed, stmtWindow := e.statements.watch(windowed)
		var runErr error
		var load Load
		if w.Completions {
			load, runErr = RunCompletions(windowed, e.target, e.tools, w, progressPrinter(e.c, e.stderr), e.c.ProgressEvery)
		} else {
			load, runErr = Run(windowed, e.target, w, progressPrinter(e.c, e.stderr), e.c.ProgressEvery)
		}
		if runErr != nil && load.Result.Elapsed == 0 && i == 0 {
			return runErr, false
		}
		if runErr == nil && e.withBaseline {
			e.logf("baseline: %v more%s", e.baseSlice(2*i+1), roundName(i, n, "after the load"))
			after, runErr = e.baseline(ctx, e.baseSlice(2*i+1))
		}
		// A round stopped partway counts only when no round is complete.
		if load.Result.Elapsed > 0 && (runErr == nil || e.complete == 0) {
			e.loads = append(e.loads, load)
			e.loadCPU.add(loadWindow.opened, loadWindow.closed, load.Result.Ops)
			e.statements.add(stmtWindow, load.Result.Ops)
		}
		if runErr != nil {
			if e.complete == 0 && e.withBaseline {
				e.rep.BaselineNote = "the run stopped before its baseline was complete"
			}
			return runErr, true
		}
		if e.withBaseline {
			e.bases = append(e.bases, before, after)
			e.baseCPU.merge(e.roundBaseCPU)
			if n > 1 {
				e.rep.Rounds = append(e.rep.Rounds, roundInfo(load.Result, loadtest.Combine(before, after)))
			}
		}
		e.complete++
	}
	return nil, true
}

// slice is part i of total cut in parts.
func slice(total time.Duration, parts, i int) time.Duration {
	return total*time.Duration(i+1)/time.Duration(parts) - total*time.Duration(i)/time.Duration(parts)
}

// baseSlice is slice i of the baseline, as long as it will run (pgbench
// runs whole seconds).
func (e *execution) baseSlice(i int) time.Duration {
	d := slice(e.c.Baseline, 2*e.c.rounds(), i)
	if e.usePgbench {
		d = pgbenchDuration(d)
	}
	return d
}

// baseline runs a slice of baseline of d, its window's CPU counted in the
// round's.
func (e *execution) baseline(ctx context.Context, d time.Duration) (loadtest.Result, error) {
	windowed, w := e.meter.watch(ctx)
	r, err := e.inserts(ctx, windowed, d)
	if err == nil {
		e.roundBaseCPU.add(w.opened, w.closed, r.Ops)
	}
	return r, err
}

// inserts runs the INSERT transactions of a baseline slice of d on
// windowed, ctx being the run's.
func (e *execution) inserts(ctx, windowed context.Context, d time.Duration) (loadtest.Result, error) {
	defer func() { e.measured++ }()
	c := e.c
	if e.baselineDB != "" && e.scratch == "" {
		// One scratch table for every slice, made before the first and
		// dropped when the run ends (loadtest.InsertInto says why).
		table, drop, err := loadtest.ScratchTable(ctx, e.baselineDB, loadtest.ScratchName())
		if err != nil {
			return loadtest.Result{}, fmt.Errorf("baseline: %w", err)
		}
		e.scratch = table
		e.cleanups = append(e.cleanups, drop)
	}
	switch {
	case e.usePgbench:
		r, err := PgbenchBaseline(windowed, e.pgbench, e.baselineDB, e.dir, e.scratch, c.baselineClients(), d)
		if err == nil || c.BaselineClient == BaselineClientPgbench || e.measured > 0 || ctx.Err() != nil {
			return r, err
		}
		// auto: a pgbench that does not work here (too old a report,
		// a connection it cannot make) leaves the run to the Go loop,
		// for all of its baseline.
		e.logf("pgbench failed, the baseline runs on the Go loop instead: %v", err)
		e.usePgbench = false
		return loadtest.InsertInto(windowed, e.baselineDB, e.scratch, c.baselineClients(), d)
	case e.baselineDB != "":
		return loadtest.InsertInto(windowed, e.baselineDB, e.scratch, c.baselineClients(), d)
	}
	return SQLiteBaseline(windowed, e.sqliteDir, c.baselineClients(), d)
}

// rss reads turnd's memory: from /proc for a turnd the bench started,
// else from its /metrics; src says which ("" for neither).
func (e *execution) rss(ctx context.Context) (cur, peak int64, src string) {
	if e.server != nil {
		if cur, peak, err := e.server.ProcRSS(); err == nil {
			return cur, peak, "proc"
		}
	}
	if v, ok := MetricsRSS(ctx, e.target.URL, e.target.Token); ok {
		return v, 0, "metrics"
	}
	return 0, 0, ""
}

// collect puts what the rounds measured into the report; runErr is the
// error that stopped them.
func (e *execution) collect(ctx context.Context, runErr error) {
	rep := &e.rep
	if runErr != nil && e.complete > 0 {
		rep.Note = fmt.Sprintf("stopped in round %d of %d: the report covers the %d complete rounds", e.complete+1, e.c.rounds(), e.complete)
	}
	var src string
	rep.Server.RSSBytes, rep.Server.PeakRSSBytes, src = e.rss(ctx)
	if src != rep.Server.RSSSource {
		rep.Server.IdleRSSBytes = 0
		rep.Server.RSSSource = src
	}
	if e.withBaseline && (runErr == nil || e.complete > 0) {
		rep.Baseline = e.baselineInfo()
		if rep.Baseline.Kind == BaselineSQLite {
			rep.BaselineNote = "SQLite: INSERT transactions on a file beside turnd's, through one write connection as the embedded store writes"
		}
	}
	rep.fill(combineLoads(e.loads), e.tools)
	rep.CPU = e.loadCPU.split()
	rep.Statements, rep.StatementsNote = e.statements.costs(statementLimit)
	if e.tools != nil {
		_, _, _, first := e.tools.Stats()
		if first != nil && rep.FirstError == "" {
			rep.FirstError = "tool: " + first.Error()
		}
	}
}

// baselineInfo is the baseline's slices combined.
func (e *execution) baselineInfo() *BaselineInfo {
	b := loadtest.Combine(e.bases...)
	kind := BaselinePostgres
	if e.baselineDB == "" {
		kind = BaselineSQLite
	}
	client := BaselineClientGo
	if e.usePgbench {
		client = BaselineClientPgbench
	}
	return &BaselineInfo{
		Kind: kind, Client: client, Clients: e.c.baselineClients(), Transactions: b.Ops, Errors: b.Errors,
		ElapsedSeconds: b.Elapsed.Seconds(), PerSec: b.PerSec, Latency: latencyMS(b),
		CPU: e.baseCPU.split(),
	}
}

// write writes the report as c asks: a Markdown row, JSON or text.
func (e *execution) write(stdout io.Writer) error {
	switch {
	case e.c.Markdown:
		e.rep.WriteMarkdownRow(stdout)
	case e.c.JSON:
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(e.rep)
	default:
		e.rep.WriteText(stdout)
	}
	return nil
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
	if w.Completions {
		fmt.Fprintf(&b, "completions: %d calls parked, then delivered by %d clients", w.parked(), w.Concurrency)
		return b.String()
	}
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
