package bench

import (
	"math"
	"strings"
	"testing"
	"time"
)

func goodWorkload() Workload {
	return Workload{Concurrency: 4, Turns: 10, Calls: 4, ReadFraction: 1, Tools: ToolHTTP}
}

func TestWorkloadValidate(t *testing.T) {
	t.Parallel()
	if err := goodWorkload().Validate(); err != nil {
		t.Fatalf("a good workload: %v", err)
	}
	lat, _ := ParseDist("fixed:1ms")
	tests := []struct {
		name   string
		change func(w *Workload)
		want   string
	}{
		{"negative rate", func(w *Workload) { w.Rate, w.Concurrency = -1, 0 }, "rate"},
		{"NaN rate", func(w *Workload) { w.Rate, w.Concurrency = math.NaN(), 0 }, "rate"},
		{"infinite rate", func(w *Workload) { w.Rate, w.Concurrency = math.Inf(1), 0 }, "rate"},
		{"absurd rate", func(w *Workload) { w.Rate, w.Concurrency = 1e9, 0 }, "million"},
		{"rate and concurrency", func(w *Workload) { w.Rate = 10 }, "exclusive"},
		{"neither rate nor concurrency", func(w *Workload) { w.Concurrency = 0 }, "concurrency"},
		{"too many clients", func(w *Workload) { w.Concurrency = 20000 }, "at most"},
		{"negative max in flight", func(w *Workload) { w.MaxInFlight = -1 }, "max in flight"},
		{"duration and turns", func(w *Workload) { w.Duration = time.Second }, "exclusive"},
		{"neither duration nor turns", func(w *Workload) { w.Turns = 0 }, "duration or a number of turns"},
		{"negative turns", func(w *Workload) { w.Turns = -5 }, "turns"},
		{"negative duration", func(w *Workload) { w.Turns, w.Duration = 0, -time.Second }, "duration"},
		{"no calls", func(w *Workload) { w.Calls = 0 }, "calls"},
		{"too many calls", func(w *Workload) { w.Calls = MaxCalls + 1 }, "calls"},
		{"read fraction under 0", func(w *Workload) { w.ReadFraction = -0.01 }, "read fraction"},
		{"read fraction over 1", func(w *Workload) { w.ReadFraction = 1.01 }, "read fraction"},
		{"NaN deferred fraction", func(w *Workload) { w.DeferredFraction = math.NaN() }, "deferred fraction"},
		{"deferred fraction over 1", func(w *Workload) { w.DeferredFraction = 3 }, "deferred fraction"},
		{"negative output", func(w *Workload) { w.OutputBytes = -1 }, "output bytes"},
		{"output over the maximum", func(w *Workload) { w.OutputBytes = MaxOutputBytes + 1 }, "output bytes"},
		{"wait under a second", func(w *Workload) { w.Wait = time.Millisecond }, "wait"},
		{"wait over the maximum", func(w *Workload) { w.Wait = time.Hour }, "wait"},
		{"no tools", func(w *Workload) { w.Tools = "" }, "tools"},
		{"builtin writes", func(w *Workload) { w.Tools, w.ReadFraction = ToolBuiltin, 0.5 }, "builtin tools are all reads"},
		{"builtin deferred", func(w *Workload) { w.Tools, w.DeferredFraction = ToolBuiltin, 0.5 }, "cannot defer"},
		{"builtin latency and output", func(w *Workload) { w.Tools, w.Latency, w.OutputBytes = ToolBuiltin, lat, 10 }, "not both"},
	}
	for _, tt := range tests {
		w := goodWorkload()
		tt.change(&w)
		if err := w.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Validate() = %v, want an error containing %q", tt.name, err, tt.want)
		}
	}
	// The completion workload: one call a turn, parked on the bench's tool.
	completions := func(w *Workload) { w.Completions, w.Turns, w.Calls = true, 0, 1 }
	good := goodWorkload()
	completions(&good)
	if err := good.Validate(); err != nil {
		t.Errorf("a good completion workload: %v", err)
	}
	for _, tt := range []struct {
		name   string
		change func(w *Workload)
		want   string
	}{
		{"a count of turns", func(w *Workload) { w.Turns = 10 }, "--parked"},
		{"open loop", func(w *Workload) { w.Rate, w.Concurrency = 10, 0 }, "closed loop"},
		{"the builtins", func(w *Workload) { w.Tools = ToolBuiltin }, "--tools http"},
		{"several calls", func(w *Workload) { w.Calls = 3 }, "1 call"},
		{"a deferred fraction", func(w *Workload) { w.DeferredFraction = 0.5 }, "one deferred call"},
		{"the ordinary client", func(w *Workload) { w.Client = ClientOrdinary }, "tuned client"},
		{"too many parked", func(w *Workload) { w.Parked = MaxParked + 1 }, "parked"},
		{"negative parked", func(w *Workload) { w.Parked = -1 }, "parked"},
	} {
		w := goodWorkload()
		completions(&w)
		tt.change(&w)
		if err := w.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("completions, %s: Validate() = %v, want an error containing %q", tt.name, err, tt.want)
		}
	}
	// Every problem is reported at once.
	w := goodWorkload()
	w.Calls, w.ReadFraction, w.OutputBytes = 0, 2, -1
	if err := w.Validate(); err == nil || strings.Count(err.Error(), "\n") != 2 {
		t.Errorf("three problems: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	good := Config{Workload: goodWorkload(), ServerBinary: "turnd", Store: StoreAuto, Baseline: time.Second}
	if err := good.Validate(); err != nil {
		t.Fatalf("a good config: %v", err)
	}
	rounds := good
	rounds.Rounds, rounds.Workload.Turns, rounds.Workload.Duration, rounds.Baseline = 3, 0, 3*time.Second, 1500*time.Millisecond
	if err := rounds.Validate(); err != nil {
		t.Fatalf("a good config of rounds: %v", err)
	}
	remote := good
	remote.URL, remote.ServerBinary, remote.BaselineDatabaseURL, remote.ToolAddr = "http://127.0.0.1:8080", "", "postgres://x/y", "127.0.0.1:9100"
	if err := remote.Validate(); err != nil {
		t.Fatalf("a good remote config: %v", err)
	}
	tests := []struct {
		name   string
		change func(c *Config)
		want   string
	}{
		{"bad workload", func(c *Config) { c.Workload.Calls = 0 }, "calls"},
		{"no binary", func(c *Config) { c.ServerBinary = "" }, "binary"},
		{"unknown store", func(c *Config) { c.Store = "mysql" }, "store"},
		{"sqlite with a database", func(c *Config) { c.Store, c.DatabaseURL = StoreSQLite, "postgres://x/y" }, "DATABASE_URL"},
		{"baseline database without a url", func(c *Config) { c.BaselineDatabaseURL = "postgres://x/y" }, "only with --url"},
		{"url without a scheme", func(c *Config) { c.URL = "localhost:8080" }, "http(s)"},
		{"store with a url", func(c *Config) { c.URL, c.Store = "http://127.0.0.1:1", StorePostgres }, "without --url"},
		{"negative baseline", func(c *Config) { c.Baseline = -time.Second }, "baseline"},
		{"http tools of a running turnd without their address", func(c *Config) { c.URL = "http://127.0.0.1:1" }, "--tool-addr"},
		{"json and markdown", func(c *Config) { c.JSON, c.Markdown = true, true }, "exclusive"},
		{"baseline clients", func(c *Config) { c.BaselineClients = 5000 }, "baseline-clients"},
		{"progress", func(c *Config) { c.Progress = "spinner" }, "progress"},
		{"unknown baseline client", func(c *Config) { c.BaselineClient = "psql" }, "baseline-client"},
		{"negative rounds", func(c *Config) { c.Rounds = -1 }, "rounds -1"},
		{"too many rounds", func(c *Config) { c.Rounds = 101 }, "rounds 101"},
		{"rounds with a turn count", func(c *Config) { c.Rounds = 2 }, "not with --turns"},
		{"rounds under a second", func(c *Config) { c.Rounds, c.Workload.Turns, c.Workload.Duration = 4, 0, 3*time.Second }, "at least 1s per round"},
		{"baseline slices too short", func(c *Config) {
			c.Rounds, c.Workload.Turns, c.Workload.Duration, c.Baseline = 3, 0, 3*time.Second, time.Second
		}, "500ms of --baseline per round"},
	}
	for _, tt := range tests {
		c := good
		tt.change(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Validate() = %v, want an error containing %q", tt.name, err, tt.want)
		}
	}
}

func TestBaselineClients(t *testing.T) {
	t.Parallel()
	c := Config{Workload: goodWorkload()}
	if n := c.baselineClients(); n != 4 {
		t.Errorf("closed loop: %d clients, want the workload's 4", n)
	}
	c.Workload.Rate, c.Workload.Concurrency = 50, 0
	if n := c.baselineClients(); n != 32 {
		t.Errorf("open loop, default in flight: %d clients, want 32", n)
	}
	c.Workload.MaxInFlight = 8
	if n := c.baselineClients(); n != 8 {
		t.Errorf("open loop, 8 in flight: %d clients, want 8", n)
	}
	c.BaselineClients = 3
	if n := c.baselineClients(); n != 3 {
		t.Errorf("explicit: %d clients, want 3", n)
	}
}
