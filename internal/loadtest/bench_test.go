package loadtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/turnd/turnd/api"
	"github.com/turnd/turnd/budget"
	"github.com/turnd/turnd/dispatch"
	"github.com/turnd/turnd/internal/bench"
	"github.com/turnd/turnd/internal/loadtest"
	"github.com/turnd/turnd/internal/pgtest"
	"github.com/turnd/turnd/store/postgres"
	"github.com/turnd/turnd/tool"
	"github.com/turnd/turnd/turn"
)

// BenchmarkTurnsVsInsert measures turnd's turn throughput against the speed
// of the PostgreSQL under it, in one run on one machine:
//
//   - insert: single-row INSERT transactions from the same number of
//     clients (each on its own connection), run by pgbench when it is
//     installed (bench.PgbenchBaseline), else by InsertBaseline's Go loop,
//     which drives fewer of them (LOADTEST_BASELINE=go asks for it);
//   - turns: Turns, turns of four echo calls (reads, answered at once)
//     posted over loopback HTTP to a whole turnd in this process — api on a
//     real http.Server, turn.Service, store/postgres — from as many clients,
//     each with a session of its own.
//
// The phases run insert, turns, turns, insert, so that a drift of the
// machine over the run (other load, checkpoints, a growing table) weighs on
// both sides alike. It reports turns/s, insert_tx/s, their ratio (the
// target is at least 0.3 on a 2-core machine that also runs the clients),
// the turn latency percentiles, and per turn: store calls, PostgreSQL
// transactions and WAL syncs, and the CPU time of this process (server and
// clients together) and of the PostgreSQL server processes. The details of
// every phase are printed on stdout.
//
// It needs DATABASE_URL (a server with synchronous_commit on; it creates
// and drops a schema of its own) and runs the measurement once whatever
// b.N is: it is a load test, not a loop to calibrate, so run it with
// -benchtime 1x. Environment knobs:
//
//	LOADTEST_CLIENTS     concurrent clients (default 32)
//	LOADTEST_PHASE       length of each phase (default 5s)
//	LOADTEST_MAXCONNS    turnd's pool size (default 32; turnd's own default is max(8, 4×GOMAXPROCS))
//	LOADTEST_SETTLE      pause after a turns phase so that PostgreSQL publishes its counters (default 11s; 0 skips the counters)
//	LOADTEST_CPUPROFILE  write a CPU profile of the first turns phase to this file
//	LOADTEST_BASELINE    pgbench (the default when it is installed) or go: who runs the insert phases
//	GOGC                 the collector's target; unset, 400, as `turnd serve` sets it
//	LOADTEST_SETUP_SQL   SQL to run in the benchmark's schema before measuring, for experiments
//	                     (e.g. dropping a constraint to see what it costs)
//	LOADTEST_EXPERIMENT  comma-separated what-ifs, to size an optimisation before writing it:
//	                     skip_answered: the store answers Answered with nothing, without a
//	                       query (right here, where call ids never repeat): the gain of
//	                       folding the lookup into ReceiveTurn or skipping it;
//	                     async_commit: allow synchronous_commit=off (set on the server):
//	                       the cost of waiting for WAL flushes. Not the comparison the
//	                       target is about.
//
// Run it against a throwaway cluster:
//
//	. scripts/pg.sh; pg_start; trap pg_stop EXIT
//	go test -run '^$' -bench TurnsVsInsert -benchtime 1x ./internal/loadtest/
func BenchmarkTurnsVsInsert(b *testing.B) {
	benchComparison(b, "turns", []string{"insert", "turns", "turns", "insert"})
}

// BenchmarkStoreTurnsVsInsert is BenchmarkTurnsVsInsert without HTTP and
// without the turn service: each client makes, directly on store/postgres,
// the three store calls a four-call read turn costs (ReceiveTurn, Answered,
// one settling Commit of 9 lines and 4 results), shaped as the service
// makes them. Set against BenchmarkTurnsVsInsert it splits a turn's cost
// between the database work and everything above the store; its
// store_turns/s bounds what turnd can reach without changing its SQL.
func BenchmarkStoreTurnsVsInsert(b *testing.B) {
	benchComparison(b, "store", []string{"insert", "store", "store", "insert"})
}

var lastComparison = map[string]map[string]float64{}

func benchComparison(b *testing.B, name string, phases []string) {
	if os.Getenv("DATABASE_URL") == "" {
		b.Skip("DATABASE_URL is not set: this benchmark needs PostgreSQL (. scripts/pg.sh; pg_start starts a throwaway one)")
	}
	if os.Getenv("GOGC") == "" {
		// What `turnd serve` runs at unless GOGC is set (serveGCPercent in
		// cmd/turnd); the clients in this process share it.
		defer debug.SetGCPercent(debug.SetGCPercent(servedGCPercent))
	}
	m := lastComparison[name]
	if b.N == 1 || m == nil {
		// -benchtime Nx with N > 1 calls the benchmark again after a first
		// call with b.N == 1: the load test ran then; report what it
		// measured instead of running it again.
		m = measureComparison(b, benchConfigFromEnv(b), phases)
		lastComparison[name] = m
	}
	for unit, v := range m {
		b.ReportMetric(v, unit)
	}
}

// servedGCPercent is the garbage collector's target of `turnd serve`.
const servedGCPercent = 400

type benchConfig struct {
	pgbench    string // pgbench's path: it runs the insert phases; "" for the Go loop
	clients    int
	phase      time.Duration
	maxConns   int32
	settle     time.Duration
	cpuProfile string
	setupSQL   string
	// experiments named in LOADTEST_EXPERIMENT
	skipAnswered, asyncCommit bool
}

func benchConfigFromEnv(b *testing.B) benchConfig {
	b.Helper()
	c := benchConfig{clients: 32, phase: 5 * time.Second, maxConns: 32, settle: 11 * time.Second,
		cpuProfile: os.Getenv("LOADTEST_CPUPROFILE"), setupSQL: os.Getenv("LOADTEST_SETUP_SQL")}
	if v := os.Getenv("LOADTEST_CLIENTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("LOADTEST_CLIENTS=%q: want a positive integer", v)
		}
		c.clients = n
	}
	switch v := os.Getenv("LOADTEST_BASELINE"); v {
	case "", bench.BaselineClientPgbench:
		if p, ok := bench.PgbenchPath(); ok {
			c.pgbench = p
		} else if v != "" {
			b.Fatal("LOADTEST_BASELINE=pgbench: pgbench is not installed")
		}
	case bench.BaselineClientGo:
	default:
		b.Fatalf("LOADTEST_BASELINE=%q: want pgbench or go", v)
	}
	if v := os.Getenv("LOADTEST_MAXCONNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("LOADTEST_MAXCONNS=%q: want a positive integer", v)
		}
		c.maxConns = int32(n)
	}
	for _, d := range []struct {
		name string
		to   *time.Duration
	}{{"LOADTEST_PHASE", &c.phase}, {"LOADTEST_SETTLE", &c.settle}} {
		if v := os.Getenv(d.name); v != "" {
			x, err := time.ParseDuration(v)
			if err != nil || x < 0 {
				b.Fatalf("%s=%q: want a duration like 5s", d.name, v)
			}
			*d.to = x
		}
	}
	if c.phase <= 0 {
		b.Fatal("LOADTEST_PHASE must be positive")
	}
	for _, e := range strings.Split(os.Getenv("LOADTEST_EXPERIMENT"), ",") {
		switch strings.TrimSpace(e) {
		case "":
		case "skip_answered":
			c.skipAnswered = true
		case "async_commit":
			c.asyncCommit = true
		default:
			b.Fatalf("LOADTEST_EXPERIMENT: unknown experiment %q (skip_answered, async_commit)", e)
		}
	}
	return c
}

// stack is a whole turnd serving on loopback.
type stack struct {
	url   string
	store *postgres.Store
	timed *loadtest.TimedStore
}

func startStack(b *testing.B, dbURL string, cfg benchConfig) *stack {
	b.Helper()
	pg := openPostgres(b, dbURL, cfg.maxConns)
	var under turn.Store = pg
	if cfg.skipAnswered {
		under = noAnswered{pg}
	}
	timed := loadtest.NewTimedStore(under)
	reg, err := tool.Parse([]byte("builtin: [echo]\n"), tool.Options{})
	if err != nil {
		b.Fatal(err)
	}
	ln := listen(b)
	serve(b, turn.Config{Store: timed, Tools: func() *tool.Registry { return reg }}, ln)
	return &stack{url: "http://" + ln.Addr().String(), store: pg, timed: timed}
}

// openPostgres opens the store at dbURL with at most maxConns
// connections, until the benchmark ends.
func openPostgres(b *testing.B, dbURL string, maxConns int32) *postgres.Store {
	b.Helper()
	pg, err := postgres.Open(context.Background(), dbURL, postgres.Options{MaxConns: maxConns})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pg.Close)
	return pg
}

// listen is a listener on a free loopback port.
func listen(b *testing.B) net.Listener {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	return ln
}

// serve starts a turn service of cfg and serves its API on ln; b.Cleanup
// shuts both down.
func serve(b *testing.B, cfg turn.Config, ln net.Listener) {
	b.Helper()
	ctx := context.Background()
	svc, err := turn.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := svc.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := svc.Shutdown(sctx); err != nil {
			b.Errorf("shutting the service down: %v", err)
		}
	})
	srv := &http.Server{Handler: api.New(api.Config{Service: svc}), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	b.Cleanup(func() {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			b.Errorf("shutting the HTTP server down: %v", err)
		}
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			b.Errorf("serving: %v", err)
		}
	})
}

// observation is everything read before and after a phase.
type observation struct {
	pg          loadtest.PGStats
	pgOK        bool
	pgCPU       time.Duration
	pgCPUOK     bool
	self        time.Duration
	busy, total time.Duration
	store       loadtest.StoreCalls
	pool        *poolStat
}

type poolStat struct {
	acquires, emptyAcquires int64
	acquireTime, emptyWait  time.Duration
}

func observe(ctx context.Context, b *testing.B, admin *pgx.Conn, st *stack) observation {
	b.Helper()
	var o observation
	var err error
	if o.pg, err = loadtest.ReadPGStats(ctx, admin); err != nil {
		b.Logf("no PostgreSQL counters: %v", err)
	} else {
		o.pgOK = true
	}
	if o.pgCPU, o.pgCPUOK, err = loadtest.PostgresCPU(ctx, admin); err != nil {
		b.Logf("no PostgreSQL CPU time: %v", err)
	}
	o.self, _ = loadtest.ProcessCPU(os.Getpid())
	o.busy, o.total, _ = loadtest.MachineCPU()
	o.store = st.timed.Snapshot()
	// Both pools: the group statements (the hot path's records) have
	// their own.
	o.pool = &poolStat{}
	for _, p := range []*pgxpool.Pool{st.store.Pool(), st.store.GroupPool()} {
		s := p.Stat()
		o.pool.acquires += s.AcquireCount()
		o.pool.emptyAcquires += s.EmptyAcquireCount()
		o.pool.acquireTime += s.AcquireDuration()
		o.pool.emptyWait += s.EmptyAcquireWaitTime()
	}
	return o
}

// phaseReport is what one phase measured.
type phaseReport struct {
	kind   string
	result loadtest.Result
	// Per operation, from the observations around the phase.
	xact, walSync, walWrite, walBytes float64 // NaN when unknown
	selfCPU, pgCPU                    time.Duration
	machineBusy                       float64 // share of all cores, 0–1
	store                             loadtest.StoreCalls
	poolWait                          time.Duration // mean wait for a pool connection per acquire
	emptyShare                        float64       // share of acquires that found the pool empty
}

// pgAdmin opens an administrative connection to the test database, closed
// at the benchmark's end, and reads the named server settings through it.
func pgAdmin(ctx context.Context, b *testing.B, settings ...string) (dbURL string, admin *pgx.Conn, values map[string]string) {
	b.Helper()
	dbURL = pgtest.URL(b)
	admin, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { admin.Close(context.Background()) })
	values, err = loadtest.PGSettings(ctx, admin, settings...)
	if err != nil {
		b.Fatal(err)
	}
	return dbURL, admin, values
}

func measureComparison(b *testing.B, cfg benchConfig, phases []string) map[string]float64 {
	ctx := context.Background()
	dbURL, admin, settings := pgAdmin(ctx, b, "server_version", "synchronous_commit", "fsync",
		"wal_sync_method", "commit_delay", "full_page_writes", "shared_buffers", "max_wal_size")
	b.Logf("PostgreSQL %s: synchronous_commit=%s fsync=%s wal_sync_method=%s commit_delay=%s full_page_writes=%s shared_buffers=%s max_wal_size=%s",
		settings["server_version"], settings["synchronous_commit"], settings["fsync"], settings["wal_sync_method"],
		settings["commit_delay"], settings["full_page_writes"], settings["shared_buffers"], settings["max_wal_size"])
	if settings["synchronous_commit"] == "off" && !cfg.asyncCommit {
		b.Fatal("synchronous_commit is off: the comparison needs commits that wait for the WAL flush")
	}
	if settings["fsync"] != "on" {
		b.Logf("warning: fsync is %s: commits do not reach the disk, the numbers flatter both sides", settings["fsync"])
	}
	load, _ := os.ReadFile("/proc/loadavg")
	baselineBy := "the Go loop"
	if cfg.pgbench != "" {
		baselineBy = cfg.pgbench
	}
	b.Logf("GOMAXPROCS=%d NumCPU=%d clients=%d phase=%v turnd MaxConns=%d loadavg=%s experiments=%q baseline=%s",
		runtime.GOMAXPROCS(0), runtime.NumCPU(), cfg.clients, cfg.phase, cfg.maxConns, strings.TrimSpace(string(load)),
		os.Getenv("LOADTEST_EXPERIMENT"), baselineBy)

	if cfg.setupSQL != "" {
		if _, err := admin.Exec(ctx, cfg.setupSQL); err != nil {
			b.Fatalf("LOADTEST_SETUP_SQL: %v", err)
		}
		b.Logf("LOADTEST_SETUP_SQL: %s", cfg.setupSQL)
	}

	st := startStack(b, dbURL, cfg)
	const perTurn = 4 // issue 3's turn: 4 reads
	body := loadtest.EchoTurn(perTurn)
	direct := &storeTurns{store: st.timed, prefix: "st-" + strconv.FormatInt(time.Now().UnixNano(), 36)}

	var inserts, turns []loadtest.Result
	var reports []phaseReport
	profiled := false
	for i, kind := range phases {
		before := observe(ctx, b, admin, st)
		var r loadtest.Result
		var err error
		switch kind {
		case "insert":
			if cfg.pgbench != "" {
				r, err = bench.PgbenchBaseline(ctx, cfg.pgbench, dbURL, b.TempDir(), "", cfg.clients, cfg.phase)
			} else {
				r, err = loadtest.InsertBaseline(ctx, dbURL, cfg.clients, cfg.phase)
			}
		case "turns", "store":
			stop := func() {}
			if cfg.cpuProfile != "" && !profiled {
				profiled = true
				stop = cpuProfile(b, cfg.cpuProfile, "the first turns phase")
			}
			if kind == "turns" {
				r, err = loadtest.Turns(ctx, st.url, cfg.clients, cfg.phase, perTurn, body)
			} else {
				r, err = loadtest.Loop(ctx, cfg.clients, cfg.phase, direct.turn, direct.turn)
			}
			stop()
		}
		if err != nil {
			b.Fatalf("phase %d (%s): %v", i+1, kind, err)
		}
		reports = append(reports, endPhase(ctx, b, admin, st, cfg.settle, i, kind, r, before))
		if kind == "insert" {
			inserts = append(inserts, r)
		} else {
			turns = append(turns, r)
		}
	}

	ins, trn := loadtest.Combine(inserts...), loadtest.Combine(turns...)
	ratio := trn.PerSec / ins.PerSec
	kind := phases[1]
	unit := map[string]string{"turns": "turns/s", "store": "store_turns/s"}[kind]
	b.Logf("insert (both phases): %v", ins)
	b.Logf("%s (both phases): %v", kind, trn)
	b.Logf("%s ÷ insert_tx/s = %.3f (target ≥ 0.3); per-phase details on stdout", unit, ratio)
	m := map[string]float64{
		unit:            trn.PerSec,
		"insert_tx/s":   ins.PerSec,
		"ratio":         ratio,
		"p50_ms":        ms(trn.P50),
		"p99_ms":        ms(trn.P99),
		"insert_p50_ms": ms(ins.P50),
		"insert_p99_ms": ms(ins.P99),
	}
	// Per-turn costs, averaged over the turns phases.
	var n, calls, xact, syncs, self, pgc float64
	pgKnown := true
	for _, r := range reports {
		if r.kind == "insert" {
			continue
		}
		ops := float64(r.result.Ops)
		n += ops
		calls += float64(r.store.Calls())
		xact += r.xact * ops
		syncs += r.walSync * ops
		self += float64(r.selfCPU) * ops
		pgc += float64(r.pgCPU) * ops
		pgKnown = pgKnown && r.pgCPU > 0
	}
	if n > 0 {
		m["store_calls/turn"] = calls / n
		m["go_cpu_us/turn"] = self / n / 1e3
		if cfg.settle > 0 {
			m["xact/turn"] = xact / n
			m["wal_syncs/turn"] = syncs / n
		}
		if pgKnown {
			m["pg_cpu_us/turn"] = pgc / n / 1e3
		}
	}
	return m
}

// endPhase measures phase i, of kind, which ran r since before: this
// process's and the machine's CPU right away (the settle pause must not
// dilute them), the counters after the pause. It prints the phase's report
// (the testing package keeps only the first 10 lines of a benchmark's
// log: the details go to stdout) and returns it.
func endPhase(ctx context.Context, b *testing.B, admin *pgx.Conn, st *stack, settle time.Duration, i int, kind string, r loadtest.Result, before observation) phaseReport {
	b.Helper()
	self, _ := loadtest.ProcessCPU(os.Getpid())
	busy, total, _ := loadtest.MachineCPU()
	pgCPU, pgCPUOK, _ := loadtest.PostgresCPU(ctx, admin)
	if kind != "insert" {
		time.Sleep(settle) // idle backends publish their counters within 10s
	} else {
		time.Sleep(min(settle, time.Second)) // closed backends publish theirs at exit
	}
	after := observe(ctx, b, admin, st)
	after.self, after.busy, after.total, after.pgCPU, after.pgCPUOK = self, busy, total, pgCPU, pgCPUOK
	rep := report(kind, r, before, after, settle > 0)
	fmt.Printf("phase %d %s\n", i+1, rep)
	return rep
}

func report(kind string, r loadtest.Result, before, after observation, counters bool) phaseReport {
	ops := float64(max(r.Ops+r.Errors, 1))
	rep := phaseReport{kind: kind, result: r, store: after.store.Sub(before.store)}
	rep.xact, rep.walSync, rep.walWrite, rep.walBytes = -1, -1, -1, -1
	if counters && before.pgOK && after.pgOK {
		d := after.pg.Sub(before.pg)
		rep.xact = float64(d.XactCommit) / ops
		if d.WAL {
			rep.walSync = float64(d.WALSync) / ops
			rep.walWrite = float64(d.WALWrite) / ops
			rep.walBytes = float64(d.WALBytes) / ops
		}
	}
	rep.selfCPU = time.Duration(float64(after.self-before.self) / ops)
	if before.pgCPUOK && after.pgCPUOK && kind != "insert" {
		// The insert phase's backends exit before its closing reading.
		rep.pgCPU = time.Duration(float64(after.pgCPU-before.pgCPU) / ops)
	}
	if t := after.total - before.total; t > 0 {
		rep.machineBusy = float64(after.busy-before.busy) / float64(t)
	}
	if a := after.pool.acquires - before.pool.acquires; a > 0 && kind != "insert" {
		rep.poolWait = (after.pool.acquireTime - before.pool.acquireTime) / time.Duration(a)
		rep.emptyShare = float64(after.pool.emptyAcquires-before.pool.emptyAcquires) / float64(a)
	}
	return rep
}

func (p phaseReport) String() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s: %v\n", p.kind, p.result)
	fmt.Fprintf(&sb, "    machine busy %.0f%% of all cores; CPU per op: this process %v", 100*p.machineBusy, p.selfCPU.Round(time.Microsecond))
	if p.pgCPU > 0 {
		fmt.Fprintf(&sb, ", PostgreSQL %v", p.pgCPU.Round(time.Microsecond))
	}
	sb.WriteString("\n")
	if p.xact >= 0 {
		fmt.Fprintf(&sb, "    per op: %.2f commits", p.xact)
		if p.walSync >= 0 {
			fmt.Fprintf(&sb, ", %.3f WAL fsyncs (%.1f commits per fsync), %.3f WAL writes, %.0f WAL bytes",
				p.walSync, p.xact/max(p.walSync, 1e-9), p.walWrite, p.walBytes)
		}
		sb.WriteString("\n")
	}
	if p.kind != "insert" {
		ops := float64(max(p.result.Ops+p.result.Errors, 1))
		fmt.Fprintf(&sb, "    store calls per turn %.2f:", float64(p.store.Calls())/ops)
		for _, c := range p.store {
			if c.Calls > 0 {
				fmt.Fprintf(&sb, " %s %.2f×%v", c.Name, float64(c.Calls)/ops, c.Mean().Round(10*time.Microsecond))
			}
		}
		fmt.Fprintf(&sb, "\n    pool: mean acquire %v, %.0f%% of acquires found no idle connection",
			p.poolWait.Round(time.Microsecond), 100*p.emptyShare)
	}
	return strings.TrimSuffix(sb.String(), "\n")
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// noAnswered is the skip_answered experiment: a store whose Answered finds
// nothing without asking the database.
type noAnswered struct{ turn.Store }

func (noAnswered) Answered(context.Context, string, []string) (map[string]turn.Result, error) {
	return map[string]turn.Result{}, nil
}

// storeTurns makes, directly on a store, the calls the turn service makes
// for a turn of four echo calls that are all reads: ReceiveTurn, Answered
// for its call ids, then one Commit that settles it with its 9 ledger lines
// (4 call_admitted, 4 call_answered, turn_settled) and 4 results. Each
// client has a session of its own, created by its first turn.
type storeTurns struct {
	store  turn.Store
	prefix string
	next   atomic.Int64
}

func (s *storeTurns) turn(ctx context.Context, client int) error {
	i := strconv.FormatInt(s.next.Add(1), 10)
	sid, tid := s.prefix+"-"+strconv.Itoa(client), "t"+i
	now := time.Now().UTC().Truncate(time.Microsecond)
	until := now.Add(10 * time.Second)
	calls := make([]turn.Call, 4)
	ids := make([]string, 4)
	for k := range calls {
		ids[k] = tid + "." + strconv.Itoa(k)
		calls[k] = turn.Call{ID: ids[k], Name: "echo", Arguments: json.RawMessage(`{"n":` + i + `,"k":` + strconv.Itoa(k) + `}`)}
	}
	t := turn.Turn{SessionID: sid, ID: tid, Status: turn.StatusRunning, Mode: dispatch.ModeOrdered,
		FailurePolicy: dispatch.PolicyIsolate, Calls: calls, Hash: "h" + i, CreatedAt: now}
	received := `{"calls":[{"id":"` + ids[0] + `","name":"echo"},{"id":"` + ids[1] + `","name":"echo"},{"id":"` +
		ids[2] + `","name":"echo"},{"id":"` + ids[3] + `","name":"echo"}],"mode":"ordered","failure_policy":"isolate"}`
	_, err := s.store.ReceiveTurn(ctx, turn.Receive{
		Session:    turn.Session{ID: sid, Budget: budget.Config{}.WithDefaults(), CreatedAt: now},
		Turn:       t,
		Line:       turn.Line{SessionID: sid, TurnID: tid, Kind: turn.LineTurnReceived, At: now, Data: json.RawMessage(received)},
		LeaseOwner: "loadtest", LeaseUntil: until,
	})
	if err != nil {
		return err
	}
	if _, err := s.store.Answered(ctx, sid, ids); err != nil {
		return err
	}
	c := turn.Commit{Key: turn.TurnKey{SessionID: sid, TurnID: tid}, LeaseOwner: "loadtest", LeaseUntil: until,
		Status: turn.StatusCompleted, SettledAt: now}
	for k, c0 := range calls {
		c.Lines = append(c.Lines,
			turn.Line{SessionID: sid, TurnID: tid, CallID: c0.ID, Kind: turn.LineCallAdmitted, At: now,
				Data: json.RawMessage(`{"effect":"read","index":` + strconv.Itoa(k) + `,"name":"echo"}`)},
			turn.Line{SessionID: sid, TurnID: tid, CallID: c0.ID, Kind: turn.LineCallAnswered, At: now,
				Data: json.RawMessage(`{"attempts":1,"status":"ok"}`)})
		c.Results = append(c.Results, turn.Result{Index: k, CallID: c0.ID, Name: "echo", Effect: dispatch.EffectRead,
			Status: turn.CallOK, Output: c0.Arguments, OriginalBytes: int64(len(c0.Arguments)), OriginalLines: 1,
			Attempts: 1, StartedAt: now, FinishedAt: now})
	}
	c.Lines = append(c.Lines, turn.Line{SessionID: sid, TurnID: tid, Kind: turn.LineTurnSettled, At: now,
		Data: json.RawMessage(`{"status":"completed"}`)})
	return s.store.Commit(ctx, c)
}
