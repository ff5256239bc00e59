package loadtest_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/turnd/turnd/internal/loadtest"
	"github.com/turnd/turnd/internal/pgtest"
	"github.com/turnd/turnd/store/postgres"
	"github.com/turnd/turnd/tool"
	"github.com/turnd/turnd/turn"
)

// The deferred-completion benchmarks. Like the others in this package they
// measure once whatever b.N is; run them with -benchtime 1x:
//
//	. scripts/pg.sh; pg_start; trap pg_stop EXIT
//	go test -run '^$' -bench 'Pending|Completion' -benchtime 1x -timeout 30m ./internal/loadtest/
//
// Every one parks its calls on a PendingTool served on loopback by this
// process: a deferred HTTP tool that answers each call 202
// {"pending": {"deadline": "24h"}} at once.

// deferredTool is the tool's name in turnd's config.
const deferredTool = "job"

// toolEffect is the deferred tool's effect: read unless
// LOADTEST_TOOL_EFFECT=write. A read tool parks the calls of a turn
// concurrently at one store transaction each; a write tool one after the
// other at two (its attempt is journaled first), which on the embedded
// store's single fsyncing writer would stretch parking 100 000 calls past
// three minutes. Parked, the calls are the same rows either way.
func toolEffect(b *testing.B) string {
	switch e := os.Getenv("LOADTEST_TOOL_EFFECT"); e {
	case "", "read":
		return "read"
	case "write":
		return e
	default:
		b.Fatalf("LOADTEST_TOOL_EFFECT=%q: want read or write", e)
		return ""
	}
}

// BenchmarkPendingRSS checks that parked calls cost turnd no memory: it
// builds cmd/turnd, serves it with the deferred tool, parks a warm-up batch
// of calls, idles 2s and reads its resident set size (VmRSS), then parks
// 100 000 calls (1 000 turns of 100, each in a session of its own, posted
// with Prefer: respond-async by one of 16 clients, which polls it until it
// is waiting), idles and reads VmRSS again. The target: growth under 50 MB.
// It reports rss_before_MB, rss_after_MB (after 5s of idling; the reading
// after 2s is logged too), growth_MB and peak_rss_MB, the OS threads before
// and after, and, from GODEBUG=gctrace=1, the live heap after the last
// garbage collection before each reading (heap_live_*_MB, in whole MB:
// what the Go heap really holds, as against the pages the runtime has not
// returned yet).
// turnd exposes no goroutine count (no /metrics, no pprof): if one
// appears at /metrics (go_goroutines) it is reported, else skipped.
//
// The sqlite sub-benchmark uses the embedded store in a temp dir; the
// postgres one a schema of its own on $DATABASE_URL (skipped without it).
// Knobs: LOADTEST_PENDING (calls, default 100000), LOADTEST_PENDING_CALLS
// (calls per turn, default 100), LOADTEST_PENDING_CLIENTS (default 16).
func BenchmarkPendingRSS(b *testing.B) {
	bin := buildTurnd(b)
	b.Run("sqlite", func(b *testing.B) {
		onceReport(b, "pending/sqlite", func() map[string]float64 {
			return measurePendingRSS(b, bin, filepath.Join(b.TempDir(), "turnd.db"), "")
		})
	})
	b.Run("postgres", func(b *testing.B) {
		if os.Getenv("DATABASE_URL") == "" {
			b.Skip("DATABASE_URL is not set")
		}
		onceReport(b, "pending/postgres", func() map[string]float64 {
			return measurePendingRSS(b, bin, "", pgtest.URL(b))
		})
	})
}

const pendingTargetMB = 50

func measurePendingRSS(b *testing.B, bin, dataPath, dbURL string) map[string]float64 {
	b.Helper()
	total := envInt(b, "LOADTEST_PENDING", 100_000)
	perTurn := envInt(b, "LOADTEST_PENDING_CALLS", 100)
	clients := envInt(b, "LOADTEST_PENDING_CLIENTS", 16)
	turns := max(total/perTurn, 1)
	warmTurns := max(2000/perTurn, clients)
	ctx := context.Background()
	logLoad(b)

	tool, toolURL := servePendingTool(b)
	p := startTurnd(b, bin, deferredConfig(b, toolURL), dataPath, dbURL, true)
	body := loadtest.DeferredTurn(deferredTool, perTurn)

	// Warm-up: the same path as the measurement (pools, connections,
	// prepared statements, caches), in sessions of its own (Park names
	// them afresh on every call).
	if _, r, err := loadtest.Park(ctx, p.base, loadtest.Parking{Clients: clients, Turns: warmTurns, Body: body, Tool: tool}); err != nil {
		b.Fatalf("warm-up: %v\n%s", err, p.logs())
	} else {
		b.Logf("warm-up: parked %d calls in %d turns: %v", warmTurns*perTurn, warmTurns, r)
	}
	time.Sleep(2 * time.Second) // idle means idle: a pause, not a wait for an event
	before := p.sample(b)
	b.Logf("before: %s", before)

	t0 := time.Now()
	parked, r, err := loadtest.Park(ctx, p.base, loadtest.Parking{Clients: clients, Turns: turns, Body: body, Tool: tool})
	if err != nil {
		b.Fatalf("parking: %v\n%s", err, p.logs())
	}
	took := time.Since(t0)
	calls := 0
	for _, pt := range parked {
		calls += len(pt.Keys)
	}
	peak := p.sample(b)
	b.Logf("parked %d calls in %d turns in %v (%.0f calls/s; per turn until waiting: %v); at once: %s",
		calls, turns, took.Round(time.Millisecond), float64(calls)/took.Seconds(), r, peak)

	time.Sleep(2 * time.Second)
	after2 := p.sample(b)
	time.Sleep(3 * time.Second)
	after := p.sample(b)
	b.Logf("after 2s idle: %s", after2)
	b.Logf("after 5s idle: %s", after)
	// The calls are still parked: a parked turn is waiting.
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	for _, pt := range []loadtest.ParkedTurn{parked[0], parked[len(parked)-1]} {
		st, err := loadtest.AwaitTurn(ctx, client, p.base, pt.SessionID, pt.TurnID, 0)
		if err != nil || st != "waiting" {
			b.Errorf("turn %s/%s is %s (%v), not waiting", pt.SessionID, pt.TurnID, st, err)
		}
	}
	if n, _ := tool.Calls(); int(n) != calls+warmTurns*perTurn {
		b.Errorf("the tool parked %d calls, want %d", n, calls+warmTurns*perTurn)
	}
	growth := after.rssMB - before.rssMB
	verdict := "PASS"
	if growth > pendingTargetMB {
		verdict = "FAIL"
	}
	b.Logf("%s: %d parked calls grew VmRSS by %.1f MB (%.1f → %.1f MB; peak %.1f MB); target < %d MB",
		verdict, calls, growth, before.rssMB, after.rssMB, after.peakMB, pendingTargetMB)
	p.stop()
	m := map[string]float64{
		"rss_before_MB": before.rssMB, "rss_after_MB": after.rssMB, "growth_MB": growth, "peak_rss_MB": after.peakMB,
		"threads_before": float64(before.threads), "threads_after": float64(after.threads),
		"park_calls/s": float64(calls) / took.Seconds(),
	}
	if before.heapMB >= 0 && after.heapMB >= 0 {
		m["heap_live_before_MB"], m["heap_live_after_MB"] = before.heapMB, after.heapMB
	}
	if before.goroutines >= 0 && after.goroutines >= 0 {
		m["goroutines_before"], m["goroutines_after"] = float64(before.goroutines), float64(after.goroutines)
	}
	return m
}

// BenchmarkCompletionLatency measures how soon a client holding
// `GET …/turns/{tid}` with `Prefer: wait=30` learns that its turn's
// deferred call was completed: 32 turns, each with one parked call, are
// waited on at once; one sender then posts their completions one after the
// other, and a sample is the time from just before a POST /v1/complete
// until the answer of the wait on that turn (see
// loadtest.CompletionLatency). The waiters of a round arrive at random
// over one second, then the sender waits 200ms more before its first POST.
// Rounds of 32 repeat until there are LOADTEST_LATENCY_SAMPLES samples
// (default 512), after a warm-up round.
//
// It runs real turnd binaries on one PostgreSQL schema ($DATABASE_URL;
// skipped without it): one_replica waits and delivers on replica A
// (target p50 < 10 ms); two_replicas waits on A and delivers to B (target
// p50 < 50 ms), which A learns of only through the database.
func BenchmarkCompletionLatency(b *testing.B) {
	if os.Getenv("DATABASE_URL") == "" {
		b.Skip("DATABASE_URL is not set: this benchmark needs PostgreSQL (. scripts/pg.sh; pg_start starts a throwaway one)")
	}
	samples := envInt(b, "LOADTEST_LATENCY_SAMPLES", 512)
	const batch = 32
	bin := buildTurnd(b)
	code := codeVersion()
	dbURL := pgtest.URL(b)
	tool, toolURL := servePendingTool(b)
	a := startTurnd(b, bin, deferredConfig(b, toolURL), "", dbURL, false)
	replica := startTurnd(b, bin, deferredConfig(b, toolURL), "", dbURL, false)

	for _, v := range []struct {
		name      string
		deliverTo *turndProc
		target    time.Duration
	}{{"one_replica", a, 10 * time.Millisecond}, {"two_replicas", replica, 50 * time.Millisecond}} {
		b.Run(v.name, func(b *testing.B) {
			onceReport(b, "latency/"+v.name, func() map[string]float64 {
				// A parent benchmark's log is not shown: log here.
				logLoad(b)
				b.Logf("code: %s", code)
				ctx := context.Background()
				rounds := (samples + batch - 1) / batch
				turns, _, err := loadtest.Park(ctx, a.base, loadtest.Parking{Clients: 16, Turns: (rounds + 1) * batch, Body: loadtest.DeferredTurn(deferredTool, 1), Tool: tool})
				if err != nil {
					b.Fatalf("parking: %v\n%s", err, a.logs())
				}
				// The waiters come at random within a second: WaitSettled
				// polls each on a one-second period (its fallback for
				// settlements by another replica).
				o := loadtest.LatencyOptions{Stagger: time.Second}
				if _, err := loadtest.CompletionLatency(ctx, a.base, v.deliverTo.base, turns[:batch], batch, o); err != nil {
					b.Fatalf("warm-up round: %v", err)
				}
				r, err := loadtest.CompletionLatency(ctx, a.base, v.deliverTo.base, turns[batch:], batch, o)
				if err != nil {
					b.Fatalf("%v (%v)", err, r)
				}
				verdict := "PASS"
				if r.P50 >= v.target {
					verdict = "FAIL"
				}
				b.Logf("%s: %d samples, p50 %v p99 %v max %v; target p50 < %v: %s",
					v.name, r.Ops, r.P50.Round(10*time.Microsecond), r.P99.Round(10*time.Microsecond), r.Max.Round(10*time.Microsecond), v.target, verdict)
				return map[string]float64{"p50_ms": ms(r.P50), "p99_ms": ms(r.P99), "max_ms": ms(r.Max), "samples": float64(r.Ops)}
			})
		})
	}
}

// BenchmarkCompletionsVsInsert measures the rate at which turnd accepts
// completions against the speed of the PostgreSQL under it, in one run:
// first (not timed) it parks LOADTEST_PARKED calls (default 20000) in
// turns of LOADTEST_PARK_CALLS (default 10) on a whole turnd in this
// process (api on a real http.Server, turn.Service, store/postgres and its
// Notifier, the deferred tool on loopback); then the phases insert, complete, insert
// run for LOADTEST_PHASE each, where complete is LOADTEST_CLIENTS (32)
// senders posting POST /v1/complete/{key} as fast as they can, each
// delivering the calls of one turn after the other (loadtest.Completions),
// and insert is InsertBaseline at the same concurrency. It reports
// completions/s, insert_tx/s, their ratio, the delivery latencies, and per
// completion: store calls, PostgreSQL transactions and WAL syncs, and CPU
// time. The store calls of each phase (completion ones included) are
// printed on stdout.
//
// Every turn is in a session of its own (LOADTEST_TURNS_PER_SESSION puts
// that many consecutive turns in one: their resolutions then queue on the
// session's ledger sequence). The knobs of BenchmarkTurnsVsInsert apply
// (LOADTEST_CLIENTS, LOADTEST_PHASE, LOADTEST_MAXCONNS, LOADTEST_SETTLE);
// and LOADTEST_COMPLETION_CPUPROFILE writes a CPU profile of the complete
// phase to the file it names.
func BenchmarkCompletionsVsInsert(b *testing.B) {
	if os.Getenv("DATABASE_URL") == "" {
		b.Skip("DATABASE_URL is not set: this benchmark needs PostgreSQL (. scripts/pg.sh; pg_start starts a throwaway one)")
	}
	onceReport(b, "completions", func() map[string]float64 { return measureCompletions(b) })
}

func measureCompletions(b *testing.B) map[string]float64 {
	cfg := benchConfigFromEnv(b)
	parkedCalls := envInt(b, "LOADTEST_PARKED", 20_000)
	perTurn := envInt(b, "LOADTEST_PARK_CALLS", 10)
	perSession := envInt(b, "LOADTEST_TURNS_PER_SESSION", 1)
	profile := os.Getenv("LOADTEST_COMPLETION_CPUPROFILE")
	ctx := context.Background()
	dbURL, admin, settings := pgAdmin(ctx, b, "server_version", "synchronous_commit", "fsync", "shared_buffers")
	if settings["synchronous_commit"] == "off" {
		b.Fatal("synchronous_commit is off: the comparison needs commits that wait for the WAL flush")
	}
	b.Logf("PostgreSQL %s: synchronous_commit=%s fsync=%s shared_buffers=%s; GOMAXPROCS=%d clients=%d phase=%v turnd MaxConns=%d",
		settings["server_version"], settings["synchronous_commit"], settings["fsync"], settings["shared_buffers"],
		runtime.GOMAXPROCS(0), cfg.clients, cfg.phase, cfg.maxConns)
	logLoad(b)
	b.Logf("code: %s", codeVersion())

	tool, toolURL := servePendingTool(b)
	st, completions := startDeferredStack(b, dbURL, cfg, toolURL)

	t0 := time.Now()
	turns, pr, err := loadtest.Park(ctx, st.url, loadtest.Parking{Clients: 16, Turns: max(parkedCalls/perTurn, 1),
		Body: loadtest.DeferredTurn(deferredTool, perTurn), Tool: tool, TurnsPerSession: perSession})
	if err != nil {
		b.Fatalf("parking: %v", err)
	}
	b.Logf("parked %d calls in %d turns of %d, %d turns per session, in %v (not timed; per turn: %v)",
		len(turns)*perTurn, len(turns), perTurn, perSession, time.Since(t0).Round(time.Millisecond), pr)

	var inserts, dels []loadtest.Result
	var reps []phaseReport
	var calls loadtest.StoreCalls
	for i, kind := range []string{"insert", "complete", "insert"} {
		before := observe(ctx, b, admin, st)
		c0 := completions.Snapshot()
		var r loadtest.Result
		switch kind {
		case "insert":
			r, err = loadtest.InsertBaseline(ctx, dbURL, cfg.clients, cfg.phase)
		case "complete":
			stop := func() {}
			if profile != "" {
				stop = cpuProfile(b, profile, "the complete phase")
			}
			var exhausted bool
			r, exhausted, err = loadtest.Completions(ctx, st.url, cfg.clients, cfg.phase, turns)
			stop()
			if exhausted {
				b.Logf("warning: every parked call was delivered before the window closed (after %v): set LOADTEST_PARKED higher", r.Elapsed.Round(time.Millisecond))
			}
		}
		if err != nil {
			b.Fatalf("phase %d (%s): %v", i+1, kind, err)
		}
		if kind != "insert" {
			calls = completions.Snapshot().Sub(c0)
		}
		rep := endPhase(ctx, b, admin, st, cfg.settle, i, kind, r, before)
		reps = append(reps, rep)
		if kind == "complete" {
			ops := float64(max(r.Ops+r.Errors, 1))
			fmt.Printf("    completion store calls per delivery:")
			for _, c := range calls {
				if c.Calls > 0 {
					fmt.Printf(" %s %.2f×%v", c.Name, float64(c.Calls)/ops, c.Mean().Round(10*time.Microsecond))
				}
			}
			fmt.Println()
			dels = append(dels, r)
		} else {
			inserts = append(inserts, r)
		}
	}

	// The turns whose every call was delivered are settled.
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	if s, err := loadtest.AwaitTurn(ctx, client, st.url, turns[0].SessionID, turns[0].TurnID, 0); err != nil || s != "completed" {
		b.Errorf("turn %s/%s is %s (%v) after all its calls were delivered", turns[0].SessionID, turns[0].TurnID, s, err)
	}

	ins, del := loadtest.Combine(inserts...), loadtest.Combine(dels...)
	ratio := del.PerSec / ins.PerSec
	b.Logf("insert (both phases): %v", ins)
	b.Logf("complete: %v", del)
	b.Logf("completions/s ÷ insert_tx/s = %.3f; per-phase details on stdout", ratio)
	m := map[string]float64{
		"completions/s": del.PerSec, "insert_tx/s": ins.PerSec, "ratio": ratio,
		"p50_ms": ms(del.P50), "p99_ms": ms(del.P99),
		"insert_p50_ms": ms(ins.P50), "insert_p99_ms": ms(ins.P99),
	}
	rep := reps[1]
	ops := float64(max(rep.result.Ops+rep.result.Errors, 1))
	m["store_calls/completion"] = float64(rep.store.Calls()+calls.Calls()) / ops
	m["go_cpu_us/completion"] = float64(rep.selfCPU) / 1e3
	if rep.xact >= 0 {
		m["xact/completion"] = rep.xact
	}
	if rep.walSync >= 0 {
		m["wal_syncs/completion"] = rep.walSync
	}
	if rep.pgCPU > 0 {
		m["pg_cpu_us/completion"] = float64(rep.pgCPU) / 1e3
	}
	return m
}

// startDeferredStack serves a whole turnd on loopback, as startStack does,
// with the deferred tool at toolURL and, as `turnd serve` on Postgres has,
// a postgres.Notifier. Its TimedStore wraps a TimedCompletions, returned
// too.
func startDeferredStack(b *testing.B, dbURL string, cfg benchConfig, toolURL string) (*stack, *loadtest.TimedCompletions) {
	b.Helper()
	ctx := context.Background()
	pg := openPostgres(b, dbURL, cfg.maxConns)
	completions := loadtest.NewTimedCompletions(pg)
	timed := loadtest.NewTimedStore(completions)
	reg, err := tool.Parse(deferredConfig(b, toolURL), tool.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(reg.CloseIdleConnections)
	ln := listen(b)
	base := "http://" + ln.Addr().String()
	// The notifier turnd serve gives every replica on Postgres: each change
	// is published (batched) for the other replicas.
	notifier, err := postgres.NewNotifier(ctx, pg, postgres.NotifierOptions{})
	if err != nil {
		b.Fatal(err)
	}
	serve(b, turn.Config{Store: timed, Notifier: notifier, Tools: func() *tool.Registry { return reg },
		CompleteURL: func(key string) string { return base + "/v1/complete/" + key }}, ln)
	return &stack{url: base, store: pg, timed: timed}, completions
}

// servePendingTool serves a PendingTool on loopback until the benchmark
// ends (after the turnd processes started later, which b.Cleanup stops
// first).
func servePendingTool(b *testing.B) (*loadtest.PendingTool, string) {
	b.Helper()
	t := loadtest.NewPendingTool("")
	srv := httptest.NewServer(t)
	b.Cleanup(srv.Close)
	return t, srv.URL + "/job"
}

// deferredConfig is the tool config of the deferred tool at toolURL.
func deferredConfig(b *testing.B, toolURL string) []byte {
	return loadtest.DeferredToolConfig(deferredTool, toolURL, toolEffect(b))
}

// buildTurnd builds cmd/turnd as `make build` does (the build cache makes
// every build after the first a link).
func buildTurnd(b *testing.B) string {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "turnd")
	if out, err := exec.Command(goTool(), "build", "-o", bin, "github.com/turnd/turnd/cmd/turnd").CombinedOutput(); err != nil {
		b.Fatalf("building turnd: %v\n%s", err, out)
	}
	return bin
}

var (
	gcLine                     = regexp.MustCompile(`^gc \d+ @.* (\d+)->(\d+)->(\d+) MB, (\d+) MB goal`)
	goroutinesMetric           = regexp.MustCompile(`(?m)^go_goroutines (\d+)`)
	errGoroutinesNotExposed    = errors.New("not exposed")
	loggedGoroutinesNotExposed atomic.Bool
)

// turndProc is a `turnd serve` child process.
type turndProc struct {
	base   string
	pid    int
	stop   func()
	logs   func() string
	heapMB atomic.Int64 // live heap after the last GC (gctrace), -1 unknown
}

// startTurnd starts `turnd serve` on a loopback port with the tool config
// toolConfig, on the embedded store at dataPath or, with dbURL, Postgres,
// and waits until it is ready. gctrace turns on GODEBUG=gctrace=1, whose
// lines feed turndProc.heapMB. b.Cleanup stops it.
func startTurnd(b *testing.B, bin string, toolConfig []byte, dataPath, dbURL string, gctrace bool) *turndProc {
	b.Helper()
	dir := b.TempDir()
	config := filepath.Join(dir, "turnd.yaml")
	if err := os.WriteFile(config, toolConfig, 0o600); err != nil {
		b.Fatal(err)
	}
	args := []string{"serve", "--addr", "127.0.0.1:0", "--config", config, "--log-format", "json"}
	if dataPath != "" {
		args = append(args, "--data", dataPath)
	}
	cmd := exec.Command(bin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DATABASE_URL") && !strings.HasPrefix(kv, "TURND_") && !strings.HasPrefix(kv, "GODEBUG=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	if dbURL != "" {
		cmd.Env = append(cmd.Env, "DATABASE_URL="+dbURL)
	}
	if gctrace {
		cmd.Env = append(cmd.Env, "GODEBUG=gctrace=1")
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	p := &turndProc{pid: cmd.Process.Pid}
	p.heapMB.Store(-1)
	exited := make(chan struct{})
	addr := make(chan string, 1)
	var mu sync.Mutex
	var all strings.Builder // the log, without the gctrace lines
	p.logs = func() string {
		mu.Lock()
		defer mu.Unlock()
		return all.String()
	}
	go func() {
		defer close(exited)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if m := gcLine.FindStringSubmatch(line); m != nil {
				live, _ := strconv.ParseInt(m[3], 10, 64)
				p.heapMB.Store(live)
				continue
			}
			mu.Lock()
			if all.Len() < 1<<20 {
				all.WriteString(line + "\n")
			}
			mu.Unlock()
			var rec struct{ Msg, Addr string }
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "turnd serving" {
				addr <- rec.Addr
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		_ = cmd.Wait()
	}()
	stopped := false
	p.stop = func() {
		if stopped {
			return
		}
		stopped = true
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	b.Cleanup(p.stop)
	select {
	case a := <-addr:
		p.base = "http://" + a
	case <-exited:
		b.Fatalf("turnd exited before serving:\n%s", p.logs())
	case <-time.After(60 * time.Second):
		p.stop()
		b.Fatalf("turnd did not serve within 60s:\n%s", p.logs())
	}
	if err := waitReady(p.base, 30*time.Second); err != nil {
		p.stop()
		b.Fatalf("%v\n%s", err, p.logs())
	}
	return p
}

// procSample is one reading of a turnd process.
type procSample struct {
	rssMB, peakMB float64
	threads       int
	heapMB        float64 // live heap after the last GC; -1 unknown
	goroutines    int     // -1 when not exposed
}

func (s procSample) String() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "VmRSS %.1f MB (peak %.1f MB), %d threads", s.rssMB, s.peakMB, s.threads)
	if s.heapMB >= 0 {
		fmt.Fprintf(&sb, ", live heap after the last GC %.0f MB", s.heapMB)
	}
	if s.goroutines >= 0 {
		fmt.Fprintf(&sb, ", %d goroutines", s.goroutines)
	} else {
		sb.WriteString(", goroutines not exposed")
	}
	return sb.String()
}

func (p *turndProc) sample(b *testing.B) procSample {
	b.Helper()
	rss, err := loadtest.RSS(p.pid)
	if err != nil {
		b.Fatal(err)
	}
	peak, err := loadtest.PeakRSS(p.pid)
	if err != nil {
		b.Fatal(err)
	}
	th, _ := loadtest.Threads(p.pid)
	s := procSample{rssMB: float64(rss) / (1 << 20), peakMB: float64(peak) / (1 << 20), threads: th,
		heapMB: float64(p.heapMB.Load()), goroutines: -1}
	if n, err := goroutines(p.base); err == nil {
		s.goroutines = n
	} else if !loggedGoroutinesNotExposed.Swap(true) {
		b.Logf("goroutine count: %v; skipped", err)
	}
	return s
}

// goroutines reads go_goroutines from /metrics, if turnd serves it.
func goroutines(base string) (int, error) {
	client := &http.Client{Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()
	resp, err := client.Get(base + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%w (GET /metrics answered %d)", errGoroutinesNotExposed, resp.StatusCode)
	}
	m := goroutinesMetric.FindSubmatch(body)
	if m == nil {
		return 0, fmt.Errorf("%w (no go_goroutines in /metrics)", errGoroutinesNotExposed)
	}
	return strconv.Atoi(string(m[1]))
}

// cpuProfile profiles this process into path until the returned function
// is called; what names the part profiled, in the log.
func cpuProfile(b *testing.B, path, what string) (stop func()) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		b.Logf("no CPU profile of %s (is -cpuprofile set?): %v", what, err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Errorf("writing the CPU profile: %v", err)
		}
		b.Logf("CPU profile of %s: %s (go tool pprof -top -cum %s)", what, path, path)
	}
}

func envInt(b *testing.B, name string, def int) int {
	b.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

func logLoad(b *testing.B) {
	b.Helper()
	load, _ := os.ReadFile("/proc/loadavg")
	b.Logf("GOMAXPROCS=%d NumCPU=%d loadavg=%s", runtime.GOMAXPROCS(0), runtime.NumCPU(), strings.TrimSpace(string(load)))
}

// codeVersion names the code measured: the commit, and the uncommitted
// changes in the packages the completion path runs through, counted and
// digested (SHA-256 of their diff and of the new files), so that runs of
// one working tree can be told from runs of another.
func codeVersion() string {
	root, err := exec.Command(goTool(), "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		return "unknown"
	}
	dir := strings.TrimSpace(string(root))
	paths := []string{"--", "turn", "api", "store", "cmd", "completion", "migrations", "tool", "dispatch"}
	head, err := exec.Command("git", "-C", dir, "log", "-1", "--format=%h").Output()
	if err != nil {
		return "unknown (no git)"
	}
	diff, err1 := exec.Command("git", append([]string{"-C", dir, "diff", "HEAD"}, paths...)...).Output()
	changed, err2 := exec.Command("git", append([]string{"-C", dir, "diff", "HEAD", "--name-only"}, paths...)...).Output()
	untracked, err3 := exec.Command("git", append([]string{"-C", dir, "ls-files", "-o", "--exclude-standard"}, paths...)...).Output()
	if err := errors.Join(err1, err2, err3); err != nil {
		return "commit " + strings.TrimSpace(string(head)) + " (uncommitted changes unknown)"
	}
	h := sha256.New()
	h.Write(diff)
	news := strings.Fields(string(untracked))
	for _, f := range news {
		h.Write([]byte(f))
		if b, err := os.ReadFile(filepath.Join(dir, f)); err == nil {
			h.Write(b)
		}
	}
	mods := strings.Fields(string(changed))
	if len(mods)+len(news) == 0 {
		return "commit " + strings.TrimSpace(string(head)) + ", no uncommitted changes"
	}
	return fmt.Sprintf("commit %s + %d modified and %d new files (%s) digest %x",
		strings.TrimSpace(string(head)), len(mods), len(news), strings.Join(paths[1:], ","), h.Sum(nil)[:6])
}
