package bench

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/turnd/turnd/internal/loadtest"
)

func TestReportFill(t *testing.T) {
	t.Parallel()
	lat := []time.Duration{4 * time.Millisecond, time.Millisecond, 3 * time.Millisecond, 2 * time.Millisecond}
	load := Load{
		Result: loadtest.Summarize(lat, 2, 2*time.Second),
		Errors: map[string]int{"http_503:store_unavailable": 1, "call_error:tool_unavailable": 1},
		Calls:  24, Reads: 10, Writes: 8, Deferred: 6, Truncated: 3,
		FirstError: "http_503:store_unavailable: …",
	}
	r := Report{Workload: workloadInfo(Workload{Concurrency: 2, Calls: 4, Tools: ToolHTTP, Turns: 6})}
	r.Baseline = &BaselineInfo{PerSec: 8}
	r.fill(load, nil)
	tu := r.Turns
	if tu.Started != 6 || tu.OK != 4 || tu.Failed != 2 || tu.PerSec != 2 || tu.ElapsedSeconds != 2 || tu.CallsPerSec != 8 {
		t.Errorf("turns %+v", tu)
	}
	if r.Latency != (LatencyMS{P50: 2, P90: 4, P99: 4, Max: 4, Mean: 2.5}) {
		t.Errorf("latency %+v", r.Latency)
	}
	if r.Ratio == nil || *r.Ratio != 0.25 {
		t.Errorf("ratio %v, want 2/8", r.Ratio)
	}
	if r.Tool != nil {
		t.Errorf("tool stats without a tool server: %+v", r.Tool)
	}

	// No baseline: no ratio, and errors is an object, never null.
	var empty Report
	empty.fill(Load{Result: loadtest.Summarize(nil, 0, time.Second)}, nil)
	b, err := json.Marshal(empty)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"ratio":null`, `"baseline":null`, `"errors":{}`} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("JSON lacks %s: %s", want, b)
		}
	}
}

func TestReportText(t *testing.T) {
	t.Parallel()
	ratio := 0.31
	r := Report{
		Workload: workloadInfo(Workload{Rate: 50, MaxInFlight: 8, Calls: 4, Tools: ToolHTTP, Duration: time.Second}),
		Target:   TargetInfo{URL: "http://127.0.0.1:1", Started: true, Store: "postgres", StoreDetail: "DATABASE_URL"},
		Turns:    TurnStats{Started: 51, OK: 50, Failed: 1},
		Errors:   map[string]int{"timeout": 1}, FirstError: "timeout: slow",
		Server:   ServerInfo{RSSSource: "metrics", RSSBytes: 30 << 20},
		Baseline: &BaselineInfo{Kind: BaselinePostgres, Clients: 8, PerSec: 161.3},
		Ratio:    &ratio,
	}
	var out bytes.Buffer
	r.WriteText(&out)
	for _, want := range []string{"open loop, 50 turns/s (at most 8 in flight)", "errors     timeout 1", "first: timeout: slow",
		"30.0 MiB after the load (/metrics)", "postgres_insert", "ratio      0.310"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, out.String())
		}
	}
}

// TestReportTextCompletions: the completion workload's report speaks of
// completions and of the delivery → answer latency.
func TestReportTextCompletions(t *testing.T) {
	t.Parallel()
	ratio := 0.305
	r := Report{
		Workload: workloadInfo(Workload{Concurrency: 32, Calls: 1, Tools: ToolHTTP, Completions: true, Parked: 500}),
		Turns:    TurnStats{Started: 500, OK: 499, Failed: 1, ElapsedSeconds: 0.5, PerSec: 998},
		Errors:   map[string]int{"delivery_http_410:completion_gone": 1},
		Baseline: &BaselineInfo{Kind: BaselinePostgres, Clients: 32, PerSec: 3272},
		Ratio:    &ratio,
	}
	var out bytes.Buffer
	r.WriteText(&out)
	for _, want := range []string{"completions: 500 calls parked a round", "499 ok, 1 failed of 500 in 0.50s: 998.0 completions/s",
		"deliv→ans  p50", "delivery_http_410:completion_gone 1", "ratio      0.305 (completions/s ÷ INSERT tx/s)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	r.WriteMarkdownRow(&out)
	if !strings.HasPrefix(out.String(), "| completions, 32 deliverers | ") {
		t.Errorf("row %s", out.String())
	}
}

// TestRounds: a run's rounds add up into one load, and the report lists
// each round's ratio with their median.
func TestRounds(t *testing.T) {
	t.Parallel()
	ms := func(n ...int) []time.Duration {
		var d []time.Duration
		for _, x := range n {
			d = append(d, time.Duration(x)*time.Millisecond)
		}
		return d
	}
	a := Load{Result: loadtest.Summarize(ms(1, 2, 3), 1, time.Second), Errors: map[string]int{"timeout": 1},
		FirstError: "timeout: first", Calls: 16, Reads: 12, Writes: 4, Truncated: 2}
	b := Load{Result: loadtest.Summarize(ms(4, 5, 6, 7, 8), 2, time.Second), Errors: map[string]int{"timeout": 1, "transport": 1},
		FirstError: "transport: second", Calls: 28, Reads: 20, Deferred: 8, Truncated: 1}
	got := combineLoads([]Load{a, b})
	if got.Result.Ops != 8 || got.Result.Errors != 3 || got.Result.Elapsed != 2*time.Second || got.Result.PerSec != 4 {
		t.Errorf("combined result %+v, want 8 ok and 3 failed in 2s", got.Result)
	}
	if got.Result.P50 != 4*time.Millisecond || got.Result.Max != 8*time.Millisecond {
		t.Errorf("combined latencies p50 %v max %v, want those of all eight turns", got.Result.P50, got.Result.Max)
	}
	want := Load{Errors: map[string]int{"timeout": 2, "transport": 1}, FirstError: "timeout: first",
		Calls: 44, Reads: 32, Writes: 4, Deferred: 8, Truncated: 3}
	got.Result = loadtest.Result{}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("combined = %+v, want %+v", got, want)
	}
	if one := combineLoads([]Load{a}); !reflect.DeepEqual(one, a) {
		t.Errorf("one round combined = %+v, want it as it is", one)
	}

	r := Report{Rounds: []RoundInfo{
		roundInfo(loadtest.Summarize(ms(1, 1, 1), 0, time.Second), loadtest.Summarize(ms(1, 1, 1, 1, 1, 1, 1, 1, 1, 1), 0, time.Second)),
		{Ratio: 0.2}, {Ratio: 0.4}, {Ratio: 0.25},
	}}
	if r.Rounds[0].Ratio != 0.3 || r.Rounds[0].TurnsPerSec != 3 || r.Rounds[0].BaselinePerSec != 10 {
		t.Errorf("round = %+v, want 3 turns/s over 10 tx/s", r.Rounds[0])
	}
	var out bytes.Buffer
	r.WriteText(&out)
	if want := "rounds     4, ratios 0.200 0.250 0.300 0.400 (median 0.275)"; !strings.Contains(out.String(), want) {
		t.Errorf("text lacks %q:\n%s", want, out.String())
	}
	if _, median := roundRatios([]RoundInfo{{Ratio: 0.5}, {Ratio: 0.1}, {Ratio: 0.3}}); median != 0.3 {
		t.Errorf("median of three = %v, want 0.3", median)
	}
	if round := roundInfo(loadtest.Summarize(ms(1), 0, time.Second), loadtest.Result{}); round.Ratio != 0 {
		t.Errorf("a round without baseline transactions has ratio %v, want 0", round.Ratio)
	}
}

func TestReportMarkdownRow(t *testing.T) {
	t.Parallel()
	ratio := 0.0617
	r := Report{
		Label:    "a | b",
		Target:   TargetInfo{Store: "postgres"},
		Turns:    TurnStats{PerSec: 585.31, Failed: 2},
		Latency:  LatencyMS{P50: 50.68, P90: 75.2, P99: 125.3, Max: 250.1},
		Server:   ServerInfo{RSSSource: "proc", IdleRSSBytes: 20 << 20, RSSBytes: 28 << 20},
		Baseline: &BaselineInfo{PerSec: 9522.2, Client: BaselineClientPgbench},
		Ratio:    &ratio,
	}
	var out bytes.Buffer
	r.WriteMarkdownRow(&out)
	want := "| a / b | postgres | 585.3 | 50.7 | 75.2 | 125.3 | 250.1 | 2 | 9522 (pgbench) | 0.062 | 20 → 28 |\n"
	if out.String() != want {
		t.Errorf("row\n%s want\n%s", out.String(), want)
	}
	// As many columns as the header.
	if cols := strings.Count(strings.SplitN(MarkdownHeader, "\n", 2)[0], "|"); strings.Count(want, "|") != cols {
		t.Errorf("the row has %d separators, the header %d", strings.Count(want, "|"), cols)
	}
	out.Reset()
	Report{}.WriteMarkdownRow(&out)
	if !strings.Contains(out.String(), "| — | — | — |") {
		t.Errorf("a report without baseline or RSS: %s", out.String())
	}
}

func TestErrorKinds(t *testing.T) {
	t.Parallel()
	l := Load{Errors: map[string]int{"b": 2, "a": 2, "c": 5}}
	if got := strings.Join(l.ErrorKinds(), ","); got != "c,a,b" {
		t.Errorf("ErrorKinds = %s, want most frequent first, then by name", got)
	}
}

func TestParseMetricsRSS(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		text string
		want int64
		ok   bool
	}{
		{"plain", "# HELP process_resident_memory_bytes Resident memory size in bytes.\n# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes 2.4576e+07\n", 24576000, true},
		{"with labels and a timestamp", `process_resident_memory_bytes{job="turnd"} 1048576 1700000000000` + "\n", 1 << 20, true},
		{"a longer name is another metric", "process_resident_memory_bytes_total 5\n", 0, false},
		{"absent", "go_goroutines 12\n", 0, false},
		{"not a number", "process_resident_memory_bytes NaNish\n", 0, false},
		{"empty", "", 0, false},
	}
	for _, tt := range tests {
		got, ok := parseMetricsRSS(strings.NewReader(tt.text))
		if got != tt.want || ok != tt.ok {
			t.Errorf("%s: parseMetricsRSS = %d, %v; want %d, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}

func TestProgressPrinter(t *testing.T) {
	t.Parallel()
	var bar, lines bytes.Buffer
	pb := progressPrinter(Config{Progress: "bar"}, &bar)
	pl := progressPrinter(Config{Progress: "lines"}, &lines)
	if progressPrinter(Config{Progress: "none"}, &lines) != nil {
		t.Error("progress none prints")
	}
	mid := Snapshot{Elapsed: 2 * time.Second, OK: 100, Failed: 1, InFlight: 4, Fraction: 0.5}
	end := Snapshot{Elapsed: 4 * time.Second, OK: 200, Failed: 1, Fraction: 1}
	pb(mid)
	pb(end)
	pl(mid)
	pl(end)
	if !strings.Contains(bar.String(), "\r\x1b[K[###############...............]  50%") || !strings.HasSuffix(bar.String(), "\n") ||
		strings.Count(bar.String(), "\n") != 1 {
		t.Errorf("bar: %q", bar.String())
	}
	if got := lines.String(); strings.Count(got, "\n") != 2 || !strings.Contains(got, "bench:  50%") ||
		!strings.Contains(got, "bench: 100%") || !strings.Contains(got, "50.0 turns/s") {
		t.Errorf("lines: %q", got)
	}
}
