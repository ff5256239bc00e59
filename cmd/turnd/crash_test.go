package main

// Crash safety of the real binary: turnd is SIGKILLed in the middle of a
// turn and started again on the same database; the restarted process
// resumes the turn once the dead process's lease expires. Both processes
// run with --lease-ttl 1s so that this takes about a second.

import (
	"bytes"
	"encoding/json"
	"fmt"
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

// checkResumed checks the ledger after a resume: gap-free (ledger checks
// that), one turn_resumed, one settlement at the end.
func checkResumed(t *testing.T, p *proc, sessionID string) []lineJSON {
	t.Helper()
	lines := p.ledger(sessionID)
	k := kinds(lines, "")
	if k["turn_resumed"] != 1 || k["turn_settled"] != 1 || lines[len(lines)-1].Kind != "turn_settled" {
		t.Errorf("ledger kinds %v, want one turn_resumed and one turn_settled at the end:\n%s", k, formatLedger(lines))
	}
	return lines
}

// TestCrashDuringWrite (scenario A): killed while the tool runs w1, the
// restarted process answers w1 "interrupted" without running it again,
// replays r1 from the record and runs w2.
func TestCrashDuringWrite(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			c := newCrashRig(t, b)
			c.ts.holdFirst("w1")
			p := c.start("first")
			p.must(http.StatusAccepted, http.MethodPost, "/v1/sessions/s/turns", threeCalls("a"), "Prefer", "respond-async")
			c.ts.waitArrival(p, "w1")
			p.kill()

			q := c.start("restarted")
			tj, data := q.awaitSettled("s", "a")
			if got := fmt.Sprint(tj.callIDs()); got != "[r1 w1 w2]" {
				t.Fatalf("results %s, want r1 w1 w2: %s", got, data)
			}
			if r := tj.result(t, "r1"); r.Status != "ok" {
				t.Errorf("r1: %+v", r)
			}
			if r := tj.result(t, "w1"); r.Status != "error" || r.Error == nil || r.Error.Code != "interrupted" {
				t.Errorf("w1: want error interrupted: %s", data)
			}
			if r := tj.result(t, "w2"); r.Status != "ok" {
				t.Errorf("w2: %+v", r)
			}
			// r1's outcome was committed with w1's write-ahead: replayed.
			c.wantExecutions(map[string]int{"r1": 1, "w1": 1, "w2": 1})
			lines := checkResumed(t, q, "s")
			if k := kinds(lines, "w1"); k["attempt_started"] != 1 || k["call_answered"] != 1 {
				t.Errorf("w1's lines %v:\n%s", k, formatLedger(lines))
			}
		})
	}
}

// TestCrashAfterWriteAnswered (scenario B): killed while w2 runs, after w1
// answered; w1's outcome is read from the record.
func TestCrashAfterWriteAnswered(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			c := newCrashRig(t, b)
			c.ts.holdFirst("w2")
			p := c.start("first")
			p.must(http.StatusAccepted, http.MethodPost, "/v1/sessions/s/turns", threeCalls("b"), "Prefer", "respond-async")
			c.ts.waitArrival(p, "w2")
			// What the first process recorded before it died.
			before, data := p.getTurn("s", "b")
			if before.Status != "running" || fmt.Sprint(before.callIDs()) != "[r1 w1]" {
				t.Fatalf("before the kill: %s", data)
			}
			p.kill()

			q := c.start("restarted")
			tj, data := q.awaitSettled("s", "b")
			if got := fmt.Sprint(tj.callIDs()); got != "[r1 w1 w2]" {
				t.Fatalf("results %s, want r1 w1 w2: %s", got, data)
			}
			for i, id := range []string{"r1", "w1"} {
				was, _ := json.Marshal(before.Results[i])
				now, _ := json.Marshal(tj.result(t, id))
				if !bytes.Equal(was, now) {
					t.Errorf("%s changed across the crash:\nbefore %s\nafter  %s", id, was, now)
				}
			}
			if r := tj.result(t, "w1"); r.Status != "ok" {
				t.Errorf("w1: %+v", r)
			}
			if r := tj.result(t, "w2"); r.Status != "error" || r.Error == nil || r.Error.Code != "interrupted" {
				t.Errorf("w2: want error interrupted: %s", data)
			}
			c.wantExecutions(map[string]int{"r1": 1, "w1": 1, "w2": 1})
			checkResumed(t, q, "s")
		})
	}
}

// TestCrashAfterAcknowledged (scenario C): a turn acknowledged with 200
// reads the same after a crash, and reposting it replays it.
func TestCrashAfterAcknowledged(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
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
}

// TestCrashDuringIdempotentWrite: a write tool declared idempotent is run
// again after a crash, under the same Idempotency-Key.
func TestCrashDuringIdempotentWrite(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			c := newCrashRig(t, b)
			c.ts.holdFirst("i1")
			p := c.start("first")
			p.must(http.StatusAccepted, http.MethodPost, "/v1/sessions/s/turns",
				`{"id":"d","calls":[{"id":"i1","name":"iwrite","arguments":{}},{"id":"w1","name":"write","arguments":{}}]}`,
				"Prefer", "respond-async")
			c.ts.waitArrival(p, "i1")
			p.kill()

			q := c.start("restarted")
			tj, data := q.awaitSettled("s", "d")
			if tj.Status != "completed" || fmt.Sprint(tj.callIDs()) != "[i1 w1]" {
				t.Fatalf("after the restart: %s", data)
			}
			r := tj.result(t, "i1")
			if r.Status != "ok" || !bytes.Contains(r.Output, []byte(`"execution":2`)) {
				t.Errorf("i1 is not the second execution's answer: %s", data)
			}
			c.wantExecutions(map[string]int{"i1": 2, "w1": 1})
			ex := c.ts.executions("i1")
			if len(ex) == 2 && (ex[0].idempotencyKey != "s/d/i1" || ex[1].idempotencyKey != ex[0].idempotencyKey) {
				t.Errorf("Idempotency-Key %q then %q, want s/d/i1 both times", ex[0].idempotencyKey, ex[1].idempotencyKey)
			}
			t.Logf("i1 attempts seen by the tool: %+v; result attempts %d", ex, r.Attempts)
			lines := checkResumed(t, q, "s")
			if k := kinds(lines, "i1"); k["attempt_started"] != 2 || k["call_answered"] != 1 {
				t.Errorf("i1's lines %v:\n%s", k, formatLedger(lines))
			}
		})
	}
}

// TestCrashDuringReads: read outcomes are committed with the next
// write-ahead, so reads in flight (or answered but not yet committed) at a
// crash run again; the write after them runs once.
func TestCrashDuringReads(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			c := newCrashRig(t, b)
			c.ts.holdFirst("r1")
			p := c.start("first")
			p.must(http.StatusAccepted, http.MethodPost, "/v1/sessions/s/turns",
				`{"id":"r","calls":[{"id":"r1","name":"read","arguments":{}},{"id":"r2","name":"read","arguments":{}},{"id":"w1","name":"write","arguments":{}}]}`,
				"Prefer", "respond-async")
			c.ts.waitArrival(p, "r1")
			c.ts.waitArrival(p, "r2")
			p.kill()

			q := c.start("restarted")
			tj, data := q.awaitSettled("s", "r")
			if tj.Status != "completed" || fmt.Sprint(tj.callIDs()) != "[r1 r2 w1]" {
				t.Fatalf("after the restart: %s", data)
			}
			for _, r := range tj.Results {
				if r.Status != "ok" {
					t.Errorf("%s: %+v", r.CallID, r)
				}
			}
			if !bytes.Contains(tj.result(t, "r1").Output, []byte(`"execution":2`)) {
				t.Errorf("r1's answer is not the second execution's: %s", data)
			}
			c.wantExecutions(map[string]int{"r1": 2, "r2": 2, "w1": 1})
			checkResumed(t, q, "s")
		})
	}
}

// TestCrashTwice: the process that resumed a turn crashes too; the third
// resumes what is left, and the ledger stays gap-free.
func TestCrashTwice(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			c := newCrashRig(t, b)
			c.ts.holdFirst("w1")
			c.ts.holdFirst("w2")
			p := c.start("first")
			p.must(http.StatusAccepted, http.MethodPost, "/v1/sessions/s/turns", threeCalls("x"), "Prefer", "respond-async")
			c.ts.waitArrival(p, "w1")
			p.kill()
			q := c.start("second")
			c.ts.waitArrival(q, "w2")
			q.kill()

			r := c.start("third")
			tj, data := r.awaitSettled("s", "x")
			if tj.Status != "completed" || fmt.Sprint(tj.callIDs()) != "[r1 w1 w2]" {
				t.Fatalf("after the second restart: %s", data)
			}
			if tj.result(t, "r1").Status != "ok" {
				t.Errorf("r1: %s", data)
			}
			for _, id := range []string{"w1", "w2"} {
				if r := tj.result(t, id); r.Error == nil || r.Error.Code != "interrupted" {
					t.Errorf("%s: want error interrupted: %s", id, data)
				}
			}
			c.wantExecutions(map[string]int{"r1": 1, "w1": 1, "w2": 1})
			lines := r.ledger("s")
			if k := kinds(lines, ""); k["turn_resumed"] != 2 || k["turn_settled"] != 1 || k["call_answered"] != 3 {
				t.Errorf("ledger kinds %v:\n%s", k, formatLedger(lines))
			}
		})
	}
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
	deadline := time.Now().Add(settleTimeout)
	for !strings.Contains(p.stderr.String(), msg) {
		if time.Now().After(deadline) {
			t.Fatalf("%s never logged %q", p.name, msg)
		}
		time.Sleep(pollInterval)
	}
}

// TestCrashThenToolRemoved: the write journaled as started before the crash
// is answered "interrupted" even when the restarted process's config no
// longer has its tool: it may have taken effect, so it must not read as
// refused (never run).
func TestCrashThenToolRemoved(t *testing.T) {
	t.Parallel()
	c := newCrashRig(t, backends[0])
	c.ts.holdFirst("w1")
	p := c.start("first")
	p.must(http.StatusAccepted, http.MethodPost, "/v1/sessions/s/turns", threeCalls("g"), "Prefer", "respond-async")
	c.ts.waitArrival(p, "w1")
	p.kill()

	// The new config has no write tool.
	cfg := filepath.Join(t.TempDir(), "tools.yaml")
	if err := os.WriteFile(cfg, []byte("tools:\n  - name: read\n    effect: read\n    http: {url: "+c.ts.srv.URL+"/read}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := append([]string(nil), c.args...)
	args[1] = cfg // --config
	q := startTurnd(t, procOptions{name: "restarted", args: args})
	tj, data := q.awaitSettled("s", "g")
	if r := tj.result(t, "w1"); r.Status != "error" || r.Error == nil || r.Error.Code != "interrupted" {
		t.Errorf("w1, journaled as started: want error interrupted, got %s %+v", r.Status, r.Error)
	}
	if r := tj.result(t, "w2"); r.Status != "refused" || r.Error == nil || r.Error.Code != "unknown_tool" {
		t.Errorf("w2, never started: want refused unknown_tool: %s", data)
	}
	c.wantExecutions(map[string]int{"w1": 1, "w2": 0})
}

// TestStallPastOwnLease: a single process (the embedded store's only
// deployment) that stalls longer than its lease must not resume its own
// turn beside the wave still running it: the stalled wave's write answers,
// and a second wave must not run the next write again.
func TestStallPastOwnLease(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
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
}
