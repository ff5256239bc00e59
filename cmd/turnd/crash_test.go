package main

// Crash safety of the real binary: turnd is SIGKILLed in the middle of a
// turn and started again on the same database; the restarted process
// resumes the turn once the dead process's lease expires. Both processes
// run with --lease-ttl 1s so that this takes about a second.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// execution is one request the tool server received.
type execution struct {
	path           string // /read, /write, /iwrite
	idempotencyKey string
	attempt        int
}

// toolServer is the HTTP tools' endpoint, in the test process: /read (a
// read tool), /write (a write tool, not idempotent) and /iwrite (an
// idempotent write tool). It records every call it receives and can hold
// the first execution of a chosen call id until the test releases it (or
// the caller goes away — turnd killed).
type toolServer struct {
	t   *testing.T
	srv *httptest.Server

	mu      sync.Mutex
	calls   map[string][]execution   // call id → executions
	arrived map[string]chan struct{} // call id → closed at its first execution
	hold    map[string]chan struct{} // call id → its first execution waits for this
	quit    chan struct{}            // closed in cleanup: release everything
}

func newToolServer(t *testing.T) *toolServer {
	ts := &toolServer{
		t:       t,
		calls:   map[string][]execution{},
		arrived: map[string]chan struct{}{},
		hold:    map[string]chan struct{}{},
		quit:    make(chan struct{}),
	}
	ts.srv = httptest.NewServer(http.HandlerFunc(ts.serve))
	t.Cleanup(func() {
		close(ts.quit)
		ts.srv.Close()
	})
	return ts
}

// holdFirst makes the first execution of callID wait until release is
// called, turnd goes away, or the test ends.
func (ts *toolServer) holdFirst(callID string) (release func()) {
	ch := make(chan struct{})
	ts.mu.Lock()
	ts.hold[callID] = ch
	ts.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { close(ch) }) }
}

func (ts *toolServer) arrivedCh(callID string) chan struct{} {
	ch, ok := ts.arrived[callID]
	if !ok {
		ch = make(chan struct{})
		ts.arrived[callID] = ch
	}
	return ch
}

// waitArrival waits (bounded) until the tool server receives callID.
func (ts *toolServer) waitArrival(p *proc, callID string) {
	ts.t.Helper()
	ts.mu.Lock()
	ch := ts.arrivedCh(callID)
	ts.mu.Unlock()
	select {
	case <-ch:
	case <-p.exited:
		ts.t.Fatalf("%s exited before call %s reached the tool", p.name, callID)
	case <-time.After(settleTimeout):
		ts.t.Fatalf("call %s never reached the tool", callID)
	}
}

func (ts *toolServer) executions(callID string) []execution {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return append([]execution(nil), ts.calls[callID]...)
}

func (ts *toolServer) serve(w http.ResponseWriter, r *http.Request) {
	var req struct {
		SessionID string `json:"session_id"`
		TurnID    string `json:"turn_id"`
		CallID    string `json:"call_id"`
		Attempt   int    `json:"attempt"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	ts.mu.Lock()
	ts.calls[req.CallID] = append(ts.calls[req.CallID], execution{r.URL.Path, r.Header.Get("Idempotency-Key"), req.Attempt})
	n := len(ts.calls[req.CallID])
	hold := ts.hold[req.CallID]
	delete(ts.hold, req.CallID)
	arrived := ts.arrivedCh(req.CallID)
	ts.mu.Unlock()
	if n == 1 {
		close(arrived)
	}
	if hold != nil {
		select {
		case <-hold:
		case <-r.Context().Done(): // turnd died
			return
		case <-ts.quit:
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	// Keys out of order and spaced: the answer must read the same after a
	// restart, whatever the store does with JSON.
	fmt.Fprintf(w, `{"output": {"tool": %q, "call": %q, "execution": %d, "a": [1, 2]}}`, r.URL.Path, req.CallID, n)
}

// writeToolConfig writes a tool config naming the tool server's tools.
func writeToolConfig(t *testing.T, ts *toolServer) string {
	t.Helper()
	cfg := fmt.Sprintf(`builtin: [echo, sleep, now]
tools:
  - name: read
    effect: read
    http: {url: %[1]s/read, timeout: 30s}
  - name: write
    effect: write
    idempotent: false
    http: {url: %[1]s/write, timeout: 30s}
  - name: iwrite
    effect: write
    idempotent: true
    http: {url: %[1]s/iwrite, timeout: 30s}
`, ts.srv.URL)
	return writeConfigFile(t, cfg)
}

// writeConfigFile writes cfg as a tool config in the test's temp dir and
// returns its path.
func writeConfigFile(t *testing.T, cfg string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tools.yaml")
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// crashRig is one crash test: a tool server, a config and a database, and
// the flags every turnd of the test runs with.
type crashRig struct {
	t    *testing.T
	ts   *toolServer
	args []string
}

func newCrashRig(t *testing.T, b backend) *crashRig {
	ts := newToolServer(t)
	args := append([]string{"--config", writeToolConfig(t, ts), "--lease-ttl", "1s"}, b.args(t)...)
	return &crashRig{t: t, ts: ts, args: args}
}

func (c *crashRig) start(name string) *proc {
	return startTurnd(c.t, procOptions{name: name, args: c.args})
}

// threeCalls is the turn of the crash scenarios: a read, then two writes.
func threeCalls(id string) string {
	return `{"id":"` + id + `","calls":[
		{"id":"r1","name":"read","arguments":{}},
		{"id":"w1","name":"write","arguments":{}},
		{"id":"w2","name":"write","arguments":{}}]}`
}

// wantExecutions checks how many times the tool server ran each call.
func (c *crashRig) wantExecutions(want map[string]int) {
	c.t.Helper()
	for id, n := range want {
		if got := c.ts.executions(id); len(got) != n {
			c.t.Errorf("call %s executed %d times, want %d: %+v", id, len(got), n, got)
		}
	}
}

// checkResumed checks the ledger after resumes resumes: gap-free (ledger
// checks that), that many turn_resumed, one settlement at the end.
func checkResumed(t *testing.T, p *proc, sessionID string, resumes int) []lineJSON {
	t.Helper()
	lines := p.ledger(sessionID)
	k := kinds(lines, "")
	if k["turn_resumed"] != resumes || k["turn_settled"] != 1 || lines[len(lines)-1].Kind != "turn_settled" {
		t.Errorf("ledger kinds %v, want %d turn_resumed and one turn_settled at the end:\n%s", k, resumes, formatLedger(lines))
	}
	return lines
}

// crashScenario is a turn posted to a turnd that is killed, once or more,
// while the tool server holds some of its calls, and what the turn must
// read once a restarted process has resumed and settled it.
type crashScenario struct {
	name string
	// backend, when set, runs the scenario on that backend only.
	backend string
	id      string // the turn's id
	turn    string // the turn posted (asynchronously) to session s
	// hold are the calls whose first execution the tool holds.
	hold []string
	// kills are, for each process in turn, the calls that must reach the
	// tool before it is killed; the process after the last one settles
	// the turn.
	kills [][]string
	// recorded are the results (call ids) the first process recorded
	// before it was killed; they must read the same after.
	recorded []string
	// restartConfig is the tool config of the restarted processes (""
	// the test's).
	restartConfig func(c *crashRig) string

	// What the settled turn must say.
	status          string            // its status ("" any)
	ids             string            // its results' call ids, as fmt prints them
	results         map[string]string // call id → "ok", or "status:code"
	outputs         map[string]string // call id → part of its output
	executions      map[string]int    // call id → executions the tool saw
	idempotencyKeys map[string]string // call id → the key of every execution
	// resumes is the turn_resumed lines of a ledger that ends with the
	// one turn_settled; 0 leaves the ledger unchecked.
	resumes int
	ledger  map[string]map[string]int // call id ("" any) → line kind → count
}

// crashScenarios are the crash scenarios: where a process dies, and what
// its successor must make of the turn.
var crashScenarios = []crashScenario{
	{
		// Scenario A: killed while the tool runs w1, the restarted process
		// answers w1 "interrupted" without running it again, replays r1
		// from the record (its outcome was committed with w1's
		// write-ahead) and runs w2.
		name: "during a write", id: "a", turn: threeCalls("a"),
		hold: []string{"w1"}, kills: [][]string{{"w1"}},
		ids:        "[r1 w1 w2]",
		results:    map[string]string{"r1": "ok", "w1": "error:interrupted", "w2": "ok"},
		executions: map[string]int{"r1": 1, "w1": 1, "w2": 1},
		resumes:    1, ledger: map[string]map[string]int{"w1": {"attempt_started": 1, "call_answered": 1}},
	},
	{
		// Scenario B: killed while w2 runs, after w1 answered; w1's
		// outcome is read from the record.
		name: "after a write answered", id: "b", turn: threeCalls("b"),
		hold: []string{"w2"}, kills: [][]string{{"w2"}}, recorded: []string{"r1", "w1"},
		ids:        "[r1 w1 w2]",
		results:    map[string]string{"w1": "ok", "w2": "error:interrupted"},
		executions: map[string]int{"r1": 1, "w1": 1, "w2": 1},
		resumes:    1,
	},
	{
		// A write tool declared idempotent is run again after a crash,
		// under the same Idempotency-Key.
		name: "during an idempotent write", id: "d",
		turn: `{"id":"d","calls":[{"id":"i1","name":"iwrite","arguments":{}},{"id":"w1","name":"write","arguments":{}}]}`,
		hold: []string{"i1"}, kills: [][]string{{"i1"}},
		status: "completed", ids: "[i1 w1]",
		results:         map[string]string{"i1": "ok"},
		outputs:         map[string]string{"i1": `"execution":2`},
		executions:      map[string]int{"i1": 2, "w1": 1},
		idempotencyKeys: map[string]string{"i1": "s/d/i1"},
		resumes:         1, ledger: map[string]map[string]int{"i1": {"attempt_started": 2, "call_answered": 1}},
	},
	{
		// Read outcomes are committed with the next write-ahead, so reads
		// in flight (or answered but not yet committed) at a crash run
		// again; the write after them runs once.
		name: "during reads", id: "r",
		turn: `{"id":"r","calls":[{"id":"r1","name":"read","arguments":{}},{"id":"r2","name":"read","arguments":{}},{"id":"w1","name":"write","arguments":{}}]}`,
		hold: []string{"r1"}, kills: [][]string{{"r1", "r2"}},
		status: "completed", ids: "[r1 r2 w1]",
		results:    map[string]string{"r1": "ok", "r2": "ok", "w1": "ok"},
		outputs:    map[string]string{"r1": `"execution":2`},
		executions: map[string]int{"r1": 2, "r2": 2, "w1": 1},
		resumes:    1,
	},
	{
		// The process that resumed a turn crashes too; the third resumes
		// what is left, and the ledger stays gap-free.
		name: "twice", id: "x", turn: threeCalls("x"),
		hold: []string{"w1", "w2"}, kills: [][]string{{"w1"}, {"w2"}},
		status: "completed", ids: "[r1 w1 w2]",
		results:    map[string]string{"r1": "ok", "w1": "error:interrupted", "w2": "error:interrupted"},
		executions: map[string]int{"r1": 1, "w1": 1, "w2": 1},
		resumes:    2, ledger: map[string]map[string]int{"": {"call_answered": 3}},
	},
	{
		// The write journaled as started before the crash is answered
		// "interrupted" even when the restarted process's config no
		// longer has its tool: it may have taken effect, so it must not
		// read as refused (never run).
		name: "then the tool removed", backend: "sqlite", id: "g", turn: threeCalls("g"),
		hold: []string{"w1"}, kills: [][]string{{"w1"}},
		restartConfig: func(c *crashRig) string {
			cfg := filepath.Join(c.t.TempDir(), "tools.yaml")
			if err := os.WriteFile(cfg, []byte("tools:\n  - name: read\n    effect: read\n    http: {url: "+c.ts.srv.URL+"/read}\n"), 0o600); err != nil {
				c.t.Fatal(err)
			}
			return cfg
		},
		ids:        "[r1 w1 w2]",
		results:    map[string]string{"w1": "error:interrupted", "w2": "refused:unknown_tool"},
		executions: map[string]int{"w1": 1, "w2": 0},
	},
}

// TestCrash runs each crash scenario on each backend: turnd SIGKILLed in
// the middle of a turn, started again on the same database.
func TestCrash(t *testing.T) {
	t.Parallel()
	for _, sc := range crashScenarios {
		for _, b := range backends {
			if sc.backend != "" && sc.backend != b.name {
				continue
			}
			t.Run(sc.name+"/"+b.name, func(t *testing.T) {
				t.Parallel()
				sc.run(t, newCrashRig(t, b))
			})
		}
	}
}

func (sc crashScenario) run(t *testing.T, c *crashRig) {
	for _, id := range sc.hold {
		c.ts.holdFirst(id)
	}
	p := c.start("first")
	p.must(http.StatusAccepted, http.MethodPost, "/v1/sessions/s/turns", sc.turn, "Prefer", "respond-async")
	var before turnJSON
	for k, calls := range sc.kills {
		for _, id := range calls {
			c.ts.waitArrival(p, id)
		}
		if k == 0 && sc.recorded != nil {
			var data []byte
			if before, data = p.getTurn("s", sc.id); before.Status != "running" || fmt.Sprint(before.callIDs()) != fmt.Sprint(sc.recorded) {
				t.Fatalf("before the kill: %s", data)
			}
		}
		p.kill()
		if sc.restartConfig != nil && k == 0 {
			c.args = append([]string(nil), c.args...)
			c.args[1] = sc.restartConfig(c) // --config
		}
		p = c.start(fmt.Sprintf("restart %d", k+1))
	}

	tj, data := p.awaitSettled("s", sc.id)
	if (sc.status != "" && tj.Status != sc.status) || fmt.Sprint(tj.callIDs()) != sc.ids {
		t.Fatalf("after the restart, want status %q and results %s: %s", sc.status, sc.ids, data)
	}
	for i, id := range sc.recorded {
		was, _ := json.Marshal(before.Results[i])
		now, _ := json.Marshal(tj.result(t, id))
		if !bytes.Equal(was, now) {
			t.Errorf("%s changed across the crash:\nbefore %s\nafter  %s", id, was, now)
		}
	}
	for id, want := range sc.results {
		r := tj.result(t, id)
		got := r.Status
		if r.Error != nil {
			got += ":" + r.Error.Code
		}
		if got != want {
			t.Errorf("%s: %s, want %s: %s", id, got, want, data)
		}
	}
	for id, part := range sc.outputs {
		if r := tj.result(t, id); !bytes.Contains(r.Output, []byte(part)) {
			t.Errorf("%s's output lacks %s: %s", id, part, data)
		}
	}
	c.wantExecutions(sc.executions)
	for id, key := range sc.idempotencyKeys {
		for _, ex := range c.ts.executions(id) {
			if ex.idempotencyKey != key {
				t.Errorf("%s: executions %+v, want every one under Idempotency-Key %s", id, c.ts.executions(id), key)
				break
			}
		}
	}
	if sc.resumes == 0 {
		return
	}
	lines := checkResumed(t, p, "s", sc.resumes)
	for id, want := range sc.ledger {
		if k := kinds(lines, id); !maps.Equal(subset(k, want), want) {
			t.Errorf("call %q's lines %v, want %v:\n%s", id, k, want, formatLedger(lines))
		}
	}
}

// subset is m's counts of the keys of want.
func subset(m, want map[string]int) map[string]int {
	s := map[string]int{}
	for k := range want {
		s[k] = m[k]
	}
	return s
}

// TestCrashAfterAcknowledged (scenario C): a turn acknowledged with 200
// reads the same after a crash, and reposting it replays it.
func TestCrashAfterAcknowledged(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		c := newCrashRig(t, b)
		p := c.start("first")
		acked := p.must(http.StatusOK, http.MethodPost, "/v1/sessions/s/turns", threeCalls("c"))
		if tj := decode[turnJSON](t, acked); tj.Status != "completed" || len(tj.Results) != 3 {
			t.Fatalf("acknowledged: %s", acked)
		}
		ledgerBefore := p.ledger("s")
		p.kill()

		q := c.start("restarted")
		_, got := q.getTurn("s", "c")
		if !bytes.Equal(got, acked) {
			t.Errorf("the turn changed across the crash:\nacknowledged %s\nnow          %s", acked, got)
		}
		resp, again := q.do(http.MethodPost, "/v1/sessions/s/turns", threeCalls("c"))
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Turnd-Replayed") != "true" {
			t.Errorf("repost: status %d, Turnd-Replayed %q; want 200, true: %s", resp.StatusCode, resp.Header.Get("Turnd-Replayed"), again)
		}
		if !bytes.Equal(again, acked) {
			t.Errorf("the replay differs from the acknowledgement:\nacknowledged %s\nreplayed     %s", acked, again)
		}
		c.wantExecutions(map[string]int{"r1": 1, "w1": 1, "w2": 1})
		ledgerAfter := q.ledger("s")
		a, _ := json.Marshal(ledgerBefore)
		z, _ := json.Marshal(ledgerAfter)
		if !bytes.Equal(a, z) {
			t.Errorf("the ledger changed across the crash and the replay:\nbefore\n%s\nafter\n%s", formatLedger(ledgerBefore), formatLedger(ledgerAfter))
		}
	})
}

// TestReplicaTakesOverFromStalledReplica: two replicas on one Postgres
// database. Replica A stalls (SIGSTOP) in a write; once its lease expires
// replica B resumes the turn. When A wakes up and its write answers, A's
// stale wave must write nothing and run nothing more: the commit is fenced
// by the lease owner.
func TestReplicaTakesOverFromStalledReplica(t *testing.T) {
	t.Parallel()
	c := newCrashRig(t, backends[1])
	release := c.ts.holdFirst("w1")
	a := c.start("replica A")
	b := c.start("replica B")
	a.must(http.StatusAccepted, http.MethodPost, "/v1/sessions/s/turns", threeCalls("z"), "Prefer", "respond-async")
	c.ts.waitArrival(a, "w1")
	a.signal(syscall.SIGSTOP)

	tj, data := b.awaitSettled("s", "z")
	if tj.Status != "completed" || fmt.Sprint(tj.callIDs()) != "[r1 w1 w2]" {
		t.Fatalf("after B took over: %s", data)
	}
	if r := tj.result(t, "w1"); r.Error == nil || r.Error.Code != "interrupted" {
		t.Errorf("w1: want error interrupted: %s", data)
	}
	settled := b.ledger("s")

	a.signal(syscall.SIGCONT)
	release() // A's write answers now: A must notice it lost the turn.
	waitLog(t, a, "turn lease lost")
	c.wantExecutions(map[string]int{"r1": 1, "w1": 1, "w2": 1})
	_, after := b.getTurn("s", "z")
	if !bytes.Equal(after, data) {
		t.Errorf("the settled turn changed after A woke up:\nsettled %s\nnow     %s", data, after)
	}
	if lines := b.ledger("s"); len(lines) != len(settled) {
		t.Errorf("A wrote to the ledger after losing the turn:\n%s", formatLedger(lines))
	}
}

// waitLog waits (bounded) until the child logs a message containing msg.
func waitLog(t *testing.T, p *proc, msg string) {
	t.Helper()
	poll(t, settleTimeout, func() error {
		if !strings.Contains(p.stderr.String(), msg) {
			return fmt.Errorf("%s never logged %q", p.name, msg)
		}
		return nil
	})
}

// TestStallPastOwnLease: a single process (the embedded store's only
// deployment) that stalls longer than its lease must not resume its own
// turn beside the wave still running it: the stalled wave's write answers,
// and a second wave must not run the next write again.
func TestStallPastOwnLease(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		c := newCrashRig(t, b)
		p := c.start("only")
		// A stall only hurts when the recovery tick wins the race with
		// the renewal tick after the stall; try a few turns.
		for i := range 3 {
			tid := fmt.Sprintf("t%d", i)
			w1, w2 := "w1-"+tid, "w2-"+tid
			release1 := c.ts.holdFirst(w1)
			release2 := c.ts.holdFirst(w2)
			p.must(http.StatusAccepted, http.MethodPost, "/v1/sessions/s/turns",
				`{"id":"`+tid+`","calls":[{"id":"`+w1+`","name":"write","arguments":{}},{"id":"`+w2+`","name":"write","arguments":{}}]}`,
				"Prefer", "respond-async")
			c.ts.waitArrival(p, w1)
			p.signal(syscall.SIGSTOP)
			time.Sleep(1500 * time.Millisecond) // past the 1s lease: the stall itself
			p.signal(syscall.SIGCONT)
			resumed := strings.Count(p.stderr.String(), `"resuming turn"`)
			// Give the recovery tick (every 500ms) its chance to run.
			time.Sleep(time.Second)
			release1()
			if strings.Count(p.stderr.String(), `"resuming turn"`) > resumed {
				// A second wave holds w2 (its first execution); the
				// stalled wave, its write answered, goes on to w2.
				time.Sleep(time.Second)
			}
			release2()
			_, data := p.awaitSettled("s", tid)
			if n := len(c.ts.executions(w2)); n != 1 {
				t.Fatalf("turn %s: write %s executed %d times: %s\nledger:\n%s", tid, w2, n, data, formatLedger(p.ledger("s")))
			}
		}
	})
}
