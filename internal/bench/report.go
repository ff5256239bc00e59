package bench

import (
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/turnd/turnd/internal/loadtest"
)

// Report is what a bench run measured; `turnd bench --json` prints it.
type Report struct {
	// Label names the workload (--label), for tables of several runs.
	Label     string         `json:"label,omitempty"`
	StartedAt time.Time      `json:"started_at"`
	Machine   MachineInfo    `json:"machine"`
	Target    TargetInfo     `json:"target"`
	Workload  WorkloadInfo   `json:"workload"`
	Turns     TurnStats      `json:"turns"`
	Latency   LatencyMS      `json:"latency_ms"`
	Errors    map[string]int `json:"errors"`
	// FirstError describes the first failed turn ("" when none failed).
	FirstError string     `json:"first_error"`
	Tool       *ToolStats `json:"tool"`
	Server     ServerInfo `json:"server"`
	// Baseline is the INSERT baseline, null when none ran (BaselineNote
	// says why).
	Baseline     *BaselineInfo `json:"baseline"`
	BaselineNote string        `json:"baseline_note,omitempty"`
	// Ratio is turns.per_sec / baseline.per_sec, null without a baseline.
	Ratio *float64 `json:"ratio"`
	// CPU is where the machine's time went over the load's windows, per
	// completed turn (see CPUSplit); null when /proc could not be read in
	// a window, turnd exited in one, or no turn completed.
	CPU *CPUSplit `json:"cpu"`
	// Statements are the costliest statements of turnd's PostgreSQL in the
	// load's windows, per completed turn (--statements; StatementsNote
	// says why they are missing when asked for).
	Statements     []StatementCost `json:"statements,omitempty"`
	StatementsNote string          `json:"statements_note,omitempty"`
	// Rounds are the rounds of a run of several (--rounds), each with its
	// own baseline; absent for one round or without a baseline.
	Rounds []RoundInfo `json:"rounds,omitempty"`
	// Note says what the report leaves out: a run stopped after some of
	// its rounds reports those alone.
	Note string `json:"note,omitempty"`
}

// RoundInfo is one round of a run of several: its load and the baseline
// around it.
type RoundInfo struct {
	TurnsPerSec    float64 `json:"turns_per_sec"`
	BaselinePerSec float64 `json:"baseline_per_sec"`
	Ratio          float64 `json:"ratio"`
}

func roundInfo(load, baseline loadtest.Result) RoundInfo {
	r := RoundInfo{TurnsPerSec: load.PerSec, BaselinePerSec: baseline.PerSec}
	r.Ratio, _ = ratio(load.PerSec, baseline.PerSec)
	return r
}

// ratio is turns/s ÷ tx/s to four places; ok is false when the baseline
// ran no transaction.
func ratio(turns, tx float64) (r float64, ok bool) {
	if tx <= 0 {
		return 0, false
	}
	return math.Round(turns/tx*1e4) / 1e4, true
}

// roundRatios returns the rounds' ratios, lowest first, and their median.
func roundRatios(rounds []RoundInfo) ([]float64, float64) {
	rs := make([]float64, len(rounds))
	for i, r := range rounds {
		rs[i] = r.Ratio
	}
	slices.Sort(rs)
	if len(rs) == 0 {
		return rs, 0
	}
	if len(rs)%2 == 1 {
		return rs, rs[len(rs)/2]
	}
	return rs, (rs[len(rs)/2-1] + rs[len(rs)/2]) / 2
}

// MachineInfo describes where the bench ran.
type MachineInfo struct {
	CPUs       int    `json:"cpus"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	OS         string `json:"os"`
	Arch       string `json:"arch"`
}

func thisMachine() MachineInfo {
	return MachineInfo{CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), OS: runtime.GOOS, Arch: runtime.GOARCH}
}

// TargetInfo says which turnd ran on which store.
type TargetInfo struct {
	URL string `json:"url"`
	// Started is true when the bench started turnd itself.
	Started bool `json:"started"`
	// Store is "postgres", "sqlite", or "unknown" for a turnd the bench
	// did not start.
	Store string `json:"store"`
	// StoreDetail says where the store came from.
	StoreDetail string `json:"store_detail"`
}

// WorkloadInfo is the Workload as run.
type WorkloadInfo struct {
	Mode             string  `json:"mode"` // "closed" or "open"
	Rate             float64 `json:"rate,omitempty"`
	Concurrency      int     `json:"concurrency,omitempty"`
	MaxInFlight      int     `json:"max_in_flight,omitempty"`
	DurationSeconds  float64 `json:"duration_s,omitempty"`
	Turns            int     `json:"turns,omitempty"`
	Calls            int     `json:"calls"`
	ReadFraction     float64 `json:"read_fraction"`
	DeferredFraction float64 `json:"deferred_fraction"`
	Latency          string  `json:"latency"`
	DeferredDelay    string  `json:"deferred_delay"`
	OutputBytes      int64   `json:"output_bytes"`
	Tools            string  `json:"tools"`
	// Client is who posted the turns: ClientTuned or ClientOrdinary.
	Client      string `json:"client"`
	WaitSeconds int    `json:"wait_s"`
	Seed        uint64 `json:"seed,omitempty"`
	// Completions is the completion workload (--completions): the turns
	// are its completions, Parked a round, and the latencies run from a
	// delivery to its turn's answer.
	Completions bool `json:"completions,omitempty"`
	Parked      int  `json:"parked,omitempty"`
}

func workloadInfo(w Workload) WorkloadInfo {
	wi := WorkloadInfo{
		Mode: "closed", Rate: w.Rate, Concurrency: w.Concurrency, DurationSeconds: w.Duration.Seconds(),
		Turns: w.Turns, Calls: w.Calls, ReadFraction: w.ReadFraction, DeferredFraction: w.DeferredFraction,
		Latency: w.Latency.String(), DeferredDelay: w.DeferredDelay.String(), OutputBytes: w.OutputBytes,
		Tools: w.Tools, Client: w.client(), WaitSeconds: w.waitSeconds(), Seed: w.Seed,
	}
	if !w.closedLoop() {
		wi.Mode = "open"
		wi.MaxInFlight = w.maxInFlight()
	}
	if w.Completions {
		wi.Completions, wi.Parked = true, w.parked()
	}
	return wi
}

// TurnStats counts the turns of the window. Started = OK + Failed, and
// Failed is the sum of Report.Errors. Started counts the turns due in the
// window: posted, or (open loop) dropped as client_overload.
type TurnStats struct {
	Started        int     `json:"started"`
	OK             int     `json:"ok"`
	Failed         int     `json:"failed"`
	ElapsedSeconds float64 `json:"elapsed_s"`
	// PerSec is OK / ElapsedSeconds: completed turns per second.
	PerSec float64 `json:"per_sec"`
	// Calls counts the calls of the turns posted: Reads + Writes +
	// Deferred.
	Calls    int64 `json:"calls"`
	Reads    int64 `json:"reads"`
	Writes   int64 `json:"writes"`
	Deferred int64 `json:"deferred"`
	// CallsPerSec is the calls of completed turns per second.
	CallsPerSec float64 `json:"calls_per_sec"`
	// Truncated counts results of completed turns truncated by the budget.
	Truncated int64 `json:"truncated"`
}

// LatencyMS are nearest-rank percentiles of the latencies of completed
// turns, in milliseconds: from the POST (open loop: from when the turn was
// due) to the end of the answer.
type LatencyMS struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

func latencyMS(r loadtest.Result) LatencyMS {
	ms := func(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }
	return LatencyMS{P50: ms(r.P50), P90: ms(r.P90), P99: ms(r.P99), Max: ms(r.Max), Mean: ms(r.Mean)}
}

// ToolStats are the bench tool server's counters.
type ToolStats struct {
	Calls int64 `json:"calls"`
	// Delivered counts deferred results delivered to /v1/complete;
	// DeliveryErrors those that failed.
	Delivered      int64 `json:"delivered"`
	DeliveryErrors int64 `json:"delivery_errors"`
}

// ServerInfo is turnd's memory.
type ServerInfo struct {
	// RSSSource is "proc" (the bench started turnd and read /proc),
	// "metrics" (process_resident_memory_bytes of its /metrics) or ""
	// when neither could be read.
	RSSSource string `json:"rss_source"`
	// IdleRSSBytes is before the load (after the warm-up); RSSBytes
	// after it; PeakRSSBytes the highest (proc only).
	IdleRSSBytes int64 `json:"idle_rss_bytes,omitempty"`
	RSSBytes     int64 `json:"rss_bytes,omitempty"`
	PeakRSSBytes int64 `json:"peak_rss_bytes,omitempty"`
}

// BaselineInfo is the INSERT baseline: half of it ran before the load and
// half after (before and after each round's load, with rounds), combined,
// so that a drift of the machine weighs on both.
type BaselineInfo struct {
	Kind string `json:"kind"` // BaselinePostgres or BaselineSQLite
	// Client ran the transactions: BaselineClientPgbench, or
	// BaselineClientGo (the bench's own loop; always for SQLite).
	Client         string    `json:"client"`
	Clients        int       `json:"clients"`
	Transactions   int       `json:"transactions"`
	Errors         int       `json:"errors"`
	ElapsedSeconds float64   `json:"elapsed_s"`
	PerSec         float64   `json:"per_sec"`
	Latency        LatencyMS `json:"latency_ms"`
	// CPU is where the machine's time went over the baseline's slices,
	// per transaction; null as for Report.CPU.
	CPU *CPUSplit `json:"cpu"`
}

// WriteText writes r for people.
func (r Report) WriteText(w io.Writer) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	wl := r.Workload
	load := fmt.Sprintf("closed loop, %d clients", wl.Concurrency)
	if wl.Mode == "open" {
		load = fmt.Sprintf("open loop, %g turns/s (at most %d in flight)", wl.Rate, wl.MaxInFlight)
	}
	p("turnd bench — %s", r.StartedAt.Format(time.RFC3339))
	p("  target     %s (%s; store: %s, %s)", r.Target.URL, map[bool]string{true: "started by the bench", false: "running"}[r.Target.Started], r.Target.Store, r.Target.StoreDetail)
	p("  machine    %d CPUs, GOMAXPROCS %d, %s/%s", r.Machine.CPUs, r.Machine.GOMAXPROCS, r.Machine.OS, r.Machine.Arch)
	if wl.Completions {
		p("  workload   completions: %d calls parked a round, a turn each (its waiter holding the answer), delivered by %d clients", wl.Parked, wl.Concurrency)
	} else {
		p("  workload   %s; %d calls/turn, reads %.0f%% deferred %.0f%%, latency %s, deferred delay %s, output %d B, %s tools, %s client",
			load, wl.Calls, 100*wl.ReadFraction, 100*wl.DeferredFraction, wl.Latency, wl.DeferredDelay, wl.OutputBytes, wl.Tools, wl.Client)
	}
	t := r.Turns
	p("")
	unit, latency := "turns", "latency"
	if wl.Completions {
		unit, latency = "completions", "deliv→ans"
		p("  completions %d ok, %d failed of %d in %.2fs: %.1f completions/s", t.OK, t.Failed, t.Started, t.ElapsedSeconds, t.PerSec)
	} else {
		p("  turns      %d ok, %d failed of %d in %.2fs: %.1f turns/s, %.1f calls/s", t.OK, t.Failed, t.Started, t.ElapsedSeconds, t.PerSec, t.CallsPerSec)
		p("  calls      %d: %d reads, %d writes, %d deferred; %d results truncated by the budget", t.Calls, t.Reads, t.Writes, t.Deferred, t.Truncated)
	}
	l := r.Latency
	p("  %-10s p50 %.2fms  p90 %.2fms  p99 %.2fms  max %.2fms  mean %.2fms", latency, l.P50, l.P90, l.P99, l.Max, l.Mean)
	if len(r.Errors) == 0 {
		p("  errors     none")
	} else {
		var parts []string
		for _, k := range (Load{Errors: r.Errors}).ErrorKinds() {
			parts = append(parts, fmt.Sprintf("%s %d", k, r.Errors[k]))
		}
		p("  errors     %s", strings.Join(parts, ", "))
		p("             first: %.300s", r.FirstError)
	}
	if r.Tool != nil && r.Tool.Calls > 0 {
		p("  tool       %d requests, %d deferred results delivered, %d deliveries failed", r.Tool.Calls, r.Tool.Delivered, r.Tool.DeliveryErrors)
	}
	switch r.Server.RSSSource {
	case "proc":
		p("  server RSS %s idle, %s after the load, %s peak (/proc)", mib(r.Server.IdleRSSBytes), mib(r.Server.RSSBytes), mib(r.Server.PeakRSSBytes))
	case "metrics":
		p("  server RSS %s idle, %s after the load (/metrics)", mib(r.Server.IdleRSSBytes), mib(r.Server.RSSBytes))
	default:
		p("  server RSS unknown (turnd was not started by the bench and serves no /metrics)")
	}
	if r.CPU != nil {
		p("  cpu/%-6s %s", strings.TrimSuffix(unit, "s"), r.CPU.text("bench"))
	}
	if len(r.Statements) > 0 {
		p("  statements per %s, the costliest (pg_stat_statements: execution time, calls):", strings.TrimSuffix(unit, "s"))
		for _, l := range statementsText(r.Statements) {
			p("  %s", l)
		}
	} else if r.StatementsNote != "" {
		p("  statements %s", r.StatementsNote)
	}
	if b := r.Baseline; b != nil {
		p("  baseline   %s (%s): %d single-row INSERT transactions from %d clients in %.2fs: %.1f tx/s, p50 %.2fms p99 %.2fms",
			b.Kind, b.Client, b.Transactions, b.Clients, b.ElapsedSeconds, b.PerSec, b.Latency.P50, b.Latency.P99)
		if b.CPU != nil {
			client := "bench's loop"
			if b.Client == BaselineClientPgbench {
				client = "pgbench"
			}
			p("  cpu/tx     %s", b.CPU.text(client))
		}
	} else {
		p("  baseline   none: %s", r.BaselineNote)
	}
	if r.Ratio != nil {
		p("  ratio      %.3f (%s/s ÷ INSERT tx/s)", *r.Ratio, unit)
	}
	if r.Note != "" {
		p("  note       %s", r.Note)
	}
	if len(r.Rounds) > 0 {
		rs, median := roundRatios(r.Rounds)
		parts := make([]string, len(rs))
		for i, x := range rs {
			parts[i] = fmt.Sprintf("%.3f", x)
		}
		p("  rounds     %d, ratios %s (median %.3f)", len(rs), strings.Join(parts, " "), median)
	}
}

// MarkdownHeader is the header of the table whose rows WriteMarkdownRow
// writes.
const MarkdownHeader = `| workload | store | turns/s | p50 ms | p90 ms | p99 ms | max ms | failed | INSERT tx/s | ratio | RSS MiB (idle → after) |
|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|
`

// WriteMarkdownRow writes r as one row of a Markdown table (MarkdownHeader).
func (r Report) WriteMarkdownRow(w io.Writer) {
	label := r.Label
	if label == "" {
		label = fmt.Sprintf("%s loop, %d calls", r.Workload.Mode, r.Workload.Calls)
		if r.Workload.Completions {
			label = fmt.Sprintf("completions, %d deliverers", r.Workload.Concurrency)
		}
	}
	baseline, ratio := "—", "—"
	if r.Baseline != nil {
		baseline = fmt.Sprintf("%.0f", r.Baseline.PerSec)
		if r.Baseline.Client != "" {
			// pgbench drives more transactions than the Go loop: say whose.
			baseline += " (" + r.Baseline.Client + ")"
		}
	}
	if r.Ratio != nil {
		ratio = fmt.Sprintf("%.3f", *r.Ratio)
	}
	rss := "—"
	if r.Server.RSSSource != "" {
		rss = fmt.Sprintf("%.0f → %.0f", float64(r.Server.IdleRSSBytes)/(1<<20), float64(r.Server.RSSBytes)/(1<<20))
	}
	l := r.Latency
	fmt.Fprintf(w, "| %s | %s | %.1f | %.1f | %.1f | %.1f | %.1f | %d | %s | %s | %s |\n",
		strings.ReplaceAll(label, "|", "/"), r.Target.Store, r.Turns.PerSec, l.P50, l.P90, l.P99, l.Max, r.Turns.Failed, baseline, ratio, rss)
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
