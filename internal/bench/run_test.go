package bench

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/turnd/turnd/client"
)

type turnBody struct {
	ID    string `json:"id"`
	Calls []struct {
		ID        string         `json:"id"`
		Name      string         `json:"name"`
		Arguments map[string]any `json:"arguments"`
	} `json:"calls"`
}

func TestTurnBodies(t *testing.T) {
	t.Parallel()
	lat, _ := ParseDist("uniform:1ms-2ms")
	delay, _ := ParseDist("fixed:7ms")
	w := Workload{Concurrency: 1, Turns: 1, Calls: 10, ReadFraction: 0.5, DeferredFraction: 0.2,
		Latency: lat, DeferredDelay: delay, OutputBytes: 123, Tools: ToolHTTP, Seed: 42}
	r := offlineRunner(t, w)
	kinds := map[string]int{}
	ids := map[string]bool{}
	const turns = 500
	for i := range turns {
		var b turnBody
		raw := r.body(i)
		if err := json.Unmarshal(raw, &b); err != nil {
			t.Fatalf("turn %d: %v\n%s", i, err, raw)
		}
		if len(b.Calls) != 10 {
			t.Fatalf("turn %d has %d calls", i, len(b.Calls))
		}
		for _, c := range b.Calls {
			if ids[c.ID] {
				t.Fatalf("call id %s repeats (turnd would replay it)", c.ID)
			}
			ids[c.ID] = true
			kinds[c.Name]++
			us := c.Arguments["latency_us"].(float64)
			if c.Arguments["bytes"].(float64) != 123 {
				t.Errorf("call %s: %v", c.ID, c.Arguments)
			}
			if c.Name == ToolDeferred && us != 7000 || c.Name != ToolDeferred && (us < 1000 || us > 2000) {
				t.Errorf("call %s of %s: latency %vus", c.ID, c.Name, us)
			}
		}
		// The same seed and index give the same turn.
		if again := r.body(i); string(again) != string(raw) {
			t.Fatalf("turn %d differs when built again", i)
		}
	}
	// 5000 calls: 20% deferred (1000), 40% reads, 40% writes; each within
	// ±15% of its expectation (many standard deviations, seed fixed).
	for name, want := range map[string]int{ToolDeferred: 1000, ToolRead: 2000, ToolWrite: 2000} {
		if got := kinds[name]; got < want*85/100 || got > want*115/100 {
			t.Errorf("%d calls of %s, want about %d", got, name, want)
		}
	}
	if int64(kinds[ToolDeferred]) != r.defs.Load()/2 || int64(kinds[ToolRead]) != r.reads.Load()/2 {
		t.Errorf("counters %d deferred %d reads do not match the bodies built (twice each)", r.defs.Load(), r.reads.Load())
	}
}

func TestBuiltinBodies(t *testing.T) {
	t.Parallel()
	w := Workload{Concurrency: 1, Turns: 1, Calls: 2, ReadFraction: 1, OutputBytes: 50, Tools: ToolBuiltin}
	r := offlineRunner(t, w)
	var b turnBody
	if err := json.Unmarshal(r.body(3), &b); err != nil {
		t.Fatal(err)
	}
	if b.ID != "t3" || b.Calls[0].Name != "echo" || b.Calls[1].ID != "t3.1" {
		t.Fatalf("%+v", b)
	}
	// echo returns its arguments: {"pad":"…"} is the output size asked.
	out, _ := json.Marshal(b.Calls[0].Arguments)
	if len(out) != 50 {
		t.Errorf("echo output %d bytes, want 50: %s", len(out), out)
	}
	w.OutputBytes = 0
	w.Latency, _ = ParseDist("fixed:2600us")
	r = offlineRunner(t, w)
	raw := string(r.body(0))
	if !strings.Contains(raw, `"name":"sleep","arguments":{"ms":3}`) {
		t.Errorf("a 2.6ms latency should sleep 3ms: %s", raw)
	}
}

// TestOrdinaryRequests: the ordinary client sends the same calls as the
// tuned one, by encoding/json.
func TestOrdinaryRequests(t *testing.T) {
	t.Parallel()
	lat, _ := ParseDist("uniform:1ms-9ms")
	tests := []struct {
		name string
		w    Workload
	}{
		{"http tools", Workload{Calls: 6, ReadFraction: 0.5, DeferredFraction: 0.2, Latency: lat, DeferredDelay: lat, OutputBytes: 77, Tools: ToolHTTP}},
		{"echo", Workload{Calls: 3, ReadFraction: 1, OutputBytes: 40, Tools: ToolBuiltin}},
		{"sleep", Workload{Calls: 2, ReadFraction: 1, Latency: lat, Tools: ToolBuiltin}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := tt.w
			w.Concurrency, w.Turns, w.Seed = 1, 1, 7
			tuned := offlineRunner(t, w)
			w.Client = ClientOrdinary
			ordinary := offlineRunner(t, w)
			if ordinary.h1 != nil || ordinary.transport.MaxIdleConnsPerHost < w.Concurrency || ordinary.transport.DisableCompression {
				t.Errorf("ordinary transport %+v: want the default's settings, keep-alive for every client", ordinary.transport)
			}
			for i := range 50 {
				var want, got turnBody
				if err := json.Unmarshal(tuned.body(i), &want); err != nil {
					t.Fatal(err)
				}
				req, err := ordinary.turnRequest(i)
				if err != nil {
					t.Fatal(err)
				}
				raw, err := json.Marshal(req)
				if err != nil {
					t.Fatal(err)
				}
				if err := json.Unmarshal(raw, &got); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("turn %d: ordinary %s\ntuned %s", i, raw, tuned.body(i))
				}
			}
			if tuned.reads.Load() != ordinary.reads.Load() || tuned.writes.Load() != ordinary.writes.Load() || tuned.defs.Load() != ordinary.defs.Load() {
				t.Errorf("calls counted differ: tuned %d/%d/%d, ordinary %d/%d/%d", tuned.reads.Load(), tuned.writes.Load(), tuned.defs.Load(),
					ordinary.reads.Load(), ordinary.writes.Load(), ordinary.defs.Load())
			}
		})
	}
}

// TestOrdinaryKeepsConnections: the ordinary client keeps one connection
// per client alive over a run, as a user's program with keep-alive does.
func TestOrdinaryKeepsConnections(t *testing.T) {
	t.Parallel()
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b turnBody
		if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		t := client.Turn{ID: b.ID, Status: client.StatusCompleted}
		for _, c := range b.Calls {
			t.Results = append(t.Results, client.Result{CallID: c.ID, Name: c.Name, Status: "ok", Output: json.RawMessage(`{}`)})
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(t)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	w := Workload{Concurrency: 8, Turns: 400, Calls: 3, ReadFraction: 1, Tools: ToolBuiltin, Client: ClientOrdinary}
	load, err := Run(t.Context(), Target{URL: srv.URL}, w, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if load.Result.Ops != 400 || load.Result.Errors != 0 || load.Calls != 1200 {
		t.Fatalf("load %+v, errors %v %q", load.Result, load.Errors, load.FirstError)
	}
	// net/http returns a connection to its idle pool from the goroutine
	// that read the answer's end, a moment after the client has it: a
	// client whose next request comes first may find no idle connection
	// and dial one. So a loaded machine sees a few more than one per
	// client; a client without keep-alive would open one per turn (400).
	if n := conns.Load(); n < 1 || n > 2*int64(w.Concurrency) {
		t.Errorf("%d connections opened for %d clients over %d turns: keep-alive does not hold", n, w.Concurrency, w.Turns)
	}
}

// offlineRunner is a runner of w aimed at a port where nothing listens (the
// tests only build and check its requests), closed when tb ends.
func offlineRunner(tb testing.TB, w Workload) *runner {
	tb.Helper()
	r, err := newRunner(Target{URL: "http://127.0.0.1:1"}, w)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(r.close)
	return r
}

// TestCheckCompletedByText: a waiter's answer checked by its text passes
// only when a decoded check would: the turn completed, its call ok with the
// delivered output; any other answer falls through to the decoded check and
// fails as it does.
func TestCheckCompletedByText(t *testing.T) {
	t.Parallel()
	answer := func(status, callStatus, output string) []byte {
		b, err := json.Marshal(client.Turn{ID: "c", SessionID: "s", Status: status, Results: []client.Result{
			{CallID: "c.0", Name: ToolDeferred, Status: callStatus, Output: json.RawMessage(output)}}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tests := []struct {
		name     string
		got      []byte
		n        int
		wantKind string
	}{
		{"completed with the delivered output", answer("completed", "ok", `{"n":10}`), 10, ""},
		{"another delivery's output that starts alike", answer("completed", "ok", `{"n":10}`), 1, "wrong_result"},
		{"the output nested deeper", answer("completed", "ok", `{"x":{"n":7}}`), 7, "wrong_result"},
		{"a failed call", answer("completed", "error", `{"n":3}`), 3, "call_error"},
		{"a turn still waiting", answer("waiting", "pending", `null`), 3, "turn_waiting"},
		{"not a turn", []byte(`{"status":"completed"`), 3, "bad_answer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// Fresh counters: every check of the loop but the
			// FullCheckEvery-th goes by the text first.
			c := &completions{runner: &runner{}}
			for i := range 3 {
				if kind, msg := c.checkCompleted(tt.got, tt.n); kind != tt.wantKind {
					t.Errorf("check %d: kind %q (%s), want %q", i, kind, msg, tt.wantKind)
				}
			}
		})
	}
}
