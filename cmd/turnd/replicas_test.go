package main

// Many replicas on one Postgres schema: two turnd processes share a
// database, and what one records the other must act on — a waiter on one
// wakes when a completion lands on the other (LISTEN/NOTIFY), every key
// resolves exactly once however deliveries, both sweepers and duplicates
// race, a dead replica's parked calls are timed out or completed by the
// survivor, and a cancel reaches the replica running the turn.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/turnd/turnd/internal/pgtest"
)

// parkedCall is a call the deferred tool received, with the completion key
// and URL turnd handed it.
type parkedCall struct {
	SessionID, TurnID, CallID string
	Key, URL                  string
}

// deferTool is a loopback deferred HTTP tool: it answers every call 202
// {"pending": ARGS.pending} and reports the call's key.
type deferTool struct {
	srv     *httptest.Server
	arrived chan parkedCall
}

func newDeferTool(t *testing.T) *deferTool {
	d := &deferTool{arrived: make(chan parkedCall, 1024)}
	d.srv = httptest.NewServer(http.HandlerFunc(d.serve))
	t.Cleanup(d.srv.Close)
	return d
}

func (d *deferTool) serve(w http.ResponseWriter, r *http.Request) {
	var req struct {
		SessionID string `json:"session_id"`
		TurnID    string `json:"turn_id"`
		CallID    string `json:"call_id"`
		Arguments struct {
			Pending json.RawMessage `json:"pending"`
		} `json:"arguments"`
		Completion *struct {
			Key string `json:"key"`
			URL string `json:"url"`
		} `json:"completion"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Completion == nil {
		http.Error(w, "want a call with a completion", http.StatusBadRequest)
		return
	}
	pending := req.Arguments.Pending
	if len(pending) == 0 {
		pending = json.RawMessage(`{}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	fmt.Fprintf(w, `{"pending": %s}`, pending)
	// Reported before turnd reads the answer: a delivery may beat the park.
	d.arrived <- parkedCall{req.SessionID, req.TurnID, req.CallID, req.Completion.Key, req.Completion.URL}
}

// waitParked returns the next n calls the tool receives (bounded).
func (d *deferTool) waitParked(t *testing.T, n int) []parkedCall {
	t.Helper()
	var out []parkedCall
	timeout := time.After(settleTimeout)
	for len(out) < n {
		select {
		case pc := <-d.arrived:
			out = append(out, pc)
		case <-timeout:
			t.Fatalf("%d of %d calls reached the deferred tool", len(out), n)
		}
	}
	return out
}

// replicaRig is two or more turnd processes on one Postgres schema with the
// deferred tool and the sleep builtin.
type replicaRig struct {
	t    *testing.T
	tool *deferTool
	url  string // the schema's connection string
	args []string
}

func newReplicaRig(t *testing.T, leaseTTL string) *replicaRig {
	t.Helper()
	d := newDeferTool(t)
	cfg := fmt.Sprintf("builtin: [sleep]\ntools:\n  - name: defer\n    effect: read\n    deferred: true\n    http: {url: %s/defer, timeout: 30s}\n", d.srv.URL)
	path := filepath.Join(t.TempDir(), "tools.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	u := pgtest.URL(t)
	return &replicaRig{t: t, tool: d, url: u, args: []string{"--config", path, "--lease-ttl", leaseTTL, "--database-url", u}}
}

func (r *replicaRig) start(name string) *proc {
	return startTurnd(r.t, procOptions{name: name, args: r.args})
}

// deferCalls is a turn body with one defer call per pending-options object,
// with call ids TURN-c0, TURN-c1, ... (a call id answered earlier in the
// session would be replayed, not run).
func deferCalls(turnID string, pending ...string) string {
	calls := make([]string, len(pending))
	for i, p := range pending {
		calls[i] = fmt.Sprintf(`{"id":"%s-c%d","name":"defer","arguments":{"pending":%s}}`, turnID, i, p)
	}
	return fmt.Sprintf(`{"id":%q,"mode":"concurrent","calls":[%s]}`, turnID, strings.Join(calls, ","))
}

// send does a request from any goroutine (no t.Fatal) and reads the answer.
func send(method, u, body string, header ...string) (int, []byte, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, u, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, data, err
}

// awaitStatus polls the turn until it has status want (bounded).
func (p *proc) awaitStatus(sessionID, turnID, want string) {
	p.t.Helper()
	poll(p.t, settleTimeout, func() error {
		if tj, data := p.getTurn(sessionID, turnID); tj.Status != want {
			return fmt.Errorf("turn %s/%s not %s within %v: %s", sessionID, turnID, want, settleTimeout, data)
		}
		return nil
	})
}

// TestReplicasWakeAcrossReplicas (1): a `Prefer: wait` GET held on replica
// A returns as soon as replica B accepts the turn's completion. The wake
// latency is logged, not asserted: without LISTEN/NOTIFY the waiter would
// still wake, at its one-second poll.
func TestReplicasWakeAcrossReplicas(t *testing.T) {
	t.Parallel()
	rig := newReplicaRig(t, "10s")
	a, b := rig.start("replica A"), rig.start("replica B")
	const samples = 5
	var sinceAccepted, sinceSent []time.Duration
	for i := range samples {
		tid := fmt.Sprintf("w%d", i)
		a.must(http.StatusAccepted, http.MethodPost, "/v1/sessions/wake/turns", deferCalls(tid, `{"deadline":"60s"}`), "Prefer", "respond-async")
		pc := rig.tool.waitParked(t, 1)[0]
		if u, err := url.Parse(pc.URL); err != nil || u.Host != a.addr || u.Path != "/v1/complete/"+pc.Key {
			t.Errorf("completion URL %q: want http://%s/v1/complete/KEY", pc.URL, a.addr)
		}
		a.awaitStatus("wake", tid, "waiting")

		type answer struct {
			status int
			body   []byte
			err    error
			at     time.Time
		}
		got := make(chan answer, 1)
		go func() {
			st, body, err := send(http.MethodGet, a.base+"/v1/sessions/wake/turns/"+tid, "", "Prefer", "wait=30")
			got <- answer{st, body, err, time.Now()}
		}()
		// For the measurement only: let the GET reach its wait, so that it
		// is woken rather than answered at once. Correctness holds either way.
		time.Sleep(100 * time.Millisecond)
		sent := time.Now()
		st, body, err := send(http.MethodPost, b.base+"/v1/complete/"+pc.Key, fmt.Sprintf(`{"output":{"sample":%d}}`, i))
		accepted := time.Now()
		if err != nil || st != http.StatusOK || !bytes.Contains(body, []byte(`"accepted"`)) {
			t.Fatalf("delivery to B: %d %s %v", st, body, err)
		}
		var ans answer
		select {
		case ans = <-got:
		case <-time.After(40 * time.Second):
			t.Fatal("the GET held on A never returned")
		}
		if ans.err != nil || ans.status != http.StatusOK {
			t.Fatalf("GET with Prefer: wait on A: %d %s %v", ans.status, ans.body, ans.err)
		}
		tj := decode[turnJSON](t, ans.body)
		if r := tj.result(t, tid+"-c0"); tj.Status != "completed" || r.Status != "ok" || string(r.Output) != fmt.Sprintf(`{"sample":%d}`, i) {
			t.Fatalf("A answered %s", ans.body)
		}
		sinceAccepted = append(sinceAccepted, ans.at.Sub(accepted))
		sinceSent = append(sinceSent, ans.at.Sub(sent))
	}
	t.Logf("cross-replica wake: A's GET returned %v after B's 200 (p50 %v); %v after the delivery was sent (p50 %v)",
		sinceAccepted, median(sinceAccepted), sinceSent, median(sinceSent))
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// deliveryResult is one POST /v1/complete/{key} of the race.
type deliveryResult struct {
	call    parkedCall
	replica string
	payload string // the output delivered
	status  int
	body    []byte
	err     error
}

// TestReplicasResolveOnce (2): fifty keys with 300ms deadlines; while both
// sweepers time them out, each gets the same payload on A and on B and a
// different one on one of them. Every key resolves exactly once, and every
// delivery is told the truth.
func TestReplicasResolveOnce(t *testing.T) {
	t.Parallel()
	rig := newReplicaRig(t, "10s")
	a, b := rig.start("replica A"), rig.start("replica B")
	replicas := map[string]*proc{"A": a, "B": b}
	const turns, perTurn = 10, 5
	pending := slices.Repeat([]string{`{"deadline":"300ms"}`}, perTurn)
	for i := range turns {
		p := a
		if i%2 == 1 {
			p = b
		}
		p.must(http.StatusAccepted, http.MethodPost, "/v1/sessions/race/turns", deferCalls(fmt.Sprintf("r%d", i), pending...), "Prefer", "respond-async")
	}
	parked := rig.tool.waitParked(t, turns*perTurn)

	// Deliveries start from at once to 2.5s after the calls parked, across
	// at least two sweeps of each replica (every second), so that some win,
	// some lose to a sweeper, and some race one; the sweepers race each
	// other for the keys both find due.
	results := make(chan deliveryResult, 3*len(parked))
	var wg sync.WaitGroup
	for j, pc := range parked {
		same := fmt.Sprintf(`{"call":%q,"turn":%q,"v":"p"}`, pc.CallID, pc.TurnID)
		other := fmt.Sprintf(`{"call":%q,"turn":%q,"v":"q"}`, pc.CallID, pc.TurnID)
		otherTo := []string{"A", "B"}[j%2]
		delay := time.Duration(j) * 50 * time.Millisecond
		for _, d := range []struct{ to, payload string }{{"A", same}, {"B", same}, {otherTo, other}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(delay)
				st, body, err := send(http.MethodPost, replicas[d.to].base+"/v1/complete/"+pc.Key, `{"output":`+d.payload+`}`)
				results <- deliveryResult{pc, d.to, d.payload, st, body, err}
			}()
		}
	}
	wg.Wait()
	close(results)

	for i := range turns {
		a.awaitSettled("race", fmt.Sprintf("r%d", i))
	}

	// Every delivery got an answer that keeps the protocol.
	type callKey struct{ turn, call string }
	byCall := map[callKey][]deliveryResult{}
	for d := range results {
		if d.err != nil {
			t.Fatalf("delivery to %s: %v", d.replica, d.err)
		}
		var body struct {
			Status string `json:"status"`
			Code   string `json:"code"`
		}
		_ = json.Unmarshal(d.body, &body)
		ok := (d.status == http.StatusOK && (body.Status == "accepted" || body.Status == "already_completed")) ||
			(d.status == http.StatusConflict && body.Code == "completion_conflict") ||
			(d.status == http.StatusGone && body.Code == "completion_gone")
		if !ok {
			t.Errorf("delivery of %s/%s to %s: %d %s", d.call.TurnID, d.call.CallID, d.replica, d.status, d.body)
		}
		k := callKey{d.call.TurnID, d.call.CallID}
		byCall[k] = append(byCall[k], d)
	}

	// Every key has its one resolution in the store...
	recorded := map[callKey]struct{ status, payload string }{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, rig.url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT turn_id, call_id, status, COALESCE(payload::text, '') FROM completions WHERE session_id = 'race'`)
	if err != nil {
		t.Fatal(err)
	}
	var k callKey
	var status, payload string
	_, err = pgx.ForEachRow(rows, []any{&k.turn, &k.call, &status, &payload}, func() error {
		recorded[k] = struct{ status, payload string }{status, payload}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(recorded) != len(parked) {
		t.Errorf("%d completions recorded, want %d", len(recorded), len(parked))
	}

	// ...agreeing with what the deliveries were told and with the ledger:
	// after its call_pending, each call has exactly one call_answered, and
	// one completion_late line per distinct payload answered 410 (the same
	// payload posted to both replicas is recorded once).
	lines := a.ledger("race")
	outcomes := map[string]int{}
	for k, ds := range byCall {
		rec := recorded[k]
		outcomes[rec.status]++
		var accepted []deliveryResult
		gone := 0
		gonePayloads := map[string]bool{} // a late payload is recorded once, whichever replica got it
		for _, d := range ds {
			switch {
			case d.status == http.StatusOK && bytes.Contains(d.body, []byte(`"accepted"`)):
				accepted = append(accepted, d)
			case d.status == http.StatusGone:
				gone++
				gonePayloads[d.payload] = true
			}
		}
		switch rec.status {
		case "completed":
			if len(accepted) != 1 {
				t.Errorf("%v completed, but %d deliveries were accepted: %+v", k, len(accepted), ds)
			} else if want := `{"output":` + accepted[0].payload + `}`; compactJSON(rec.payload) != compactJSON(want) {
				t.Errorf("%v recorded payload %s, but the accepted delivery was %s", k, rec.payload, want)
			}
			if gone != 0 {
				t.Errorf("%v completed, but %d deliveries were told it is gone", k, gone)
			}
		case "timed_out":
			if len(accepted) != 0 || gone != len(ds) {
				t.Errorf("%v timed out, but %d deliveries were accepted and %d of %d told it is gone", k, len(accepted), gone, len(ds))
			}
		default:
			t.Errorf("%v: completion status %q, want completed or timed_out", k, rec.status)
		}

		var pendingSeq, answered, late int64
		var answeredStatus string
		for _, l := range lines {
			if l.TurnID != k.turn || l.CallID == nil || *l.CallID != k.call {
				continue
			}
			switch l.Kind {
			case "call_pending":
				pendingSeq = l.Seq
			case "call_answered":
				answered++
				if l.Seq < pendingSeq || pendingSeq == 0 {
					t.Errorf("%v: call_answered (seq %d) before its call_pending", k, l.Seq)
				}
				var data struct {
					Status string `json:"status"`
				}
				_ = json.Unmarshal(l.Data, &data)
				answeredStatus = data.Status
			case "completion_late":
				late++
			}
		}
		wantAnswer := map[string]string{"completed": "ok", "timed_out": "timed_out"}[rec.status]
		if answered != 1 || answeredStatus != wantAnswer || late != int64(len(gonePayloads)) {
			t.Errorf("%v (%s): %d call_answered (last %q, want one %q), %d completion_late for %d deliveries gone of %d payloads",
				k, rec.status, answered, answeredStatus, wantAnswer, late, gone, len(gonePayloads))
		}
	}
	settled := kinds(lines, "")["turn_settled"]
	if settled != turns {
		t.Errorf("%d turn_settled lines for %d turns", settled, turns)
	}
	noErrorLogs(t, a, b)
	if t.Failed() {
		t.Logf("ledger:\n%s", formatLedger(lines))
	}
	t.Logf("%d keys: %v", len(byCall), outcomes)
}

// noErrorLogs fails the test when a replica logged an error: a lost race
// must end quietly (ErrCompletionState), not as a failed resolution.
func noErrorLogs(t *testing.T, ps ...*proc) {
	t.Helper()
	for _, p := range ps {
		for _, l := range p.logLines() {
			if l["level"] == "ERROR" {
				t.Errorf("%s logged an error: %v", p.name, l)
			}
		}
	}
}

func compactJSON(s string) string {
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		return s
	}
	return b.String()
}

// TestReplicaDiesWithCallsPending (3): replica A parks calls and is
// SIGKILLed; replica B accepts their completions and heartbeats, enforces
// their deadlines and heartbeat clocks, and cancels a turn A was running
// (after resuming it once A's lease expired).
func TestReplicaDiesWithCallsPending(t *testing.T) {
	t.Parallel()
	rig := newReplicaRig(t, "1s")
	a, b := rig.start("replica A"), rig.start("replica B")
	a.must(http.StatusAccepted, http.MethodPost, "/v1/sessions/dies/turns", deferCalls("k",
		`{"deadline":"60s"}`,                              // c0: delivered to B
		`{"deadline":"2s"}`,                               // c1: times out on B
		`{"deadline":"60s","heartbeat_timeout":"3s"}`,     // c2: heartbeats to A then B, then delivered to B
		`{"deadline":"60s","heartbeat_timeout":"1500ms"}`, // c3: no heartbeat: times out on B
	), "Prefer", "respond-async")
	keys := map[string]string{}
	for _, pc := range rig.tool.waitParked(t, 4) {
		keys[pc.CallID] = pc.Key
	}
	a.must(http.StatusAccepted, http.MethodPost, "/v1/sessions/dies/turns",
		`{"id":"slow","calls":[{"id":"s","name":"sleep","arguments":{"ms":60000}}]}`, "Prefer", "respond-async")
	a.awaitStatus("dies", "k", "waiting")
	a.must(http.StatusOK, http.MethodPost, "/v1/complete/"+keys["k-c2"]+"/heartbeat", "{}")
	a.kill()

	for range 5 {
		b.must(http.StatusOK, http.MethodPost, "/v1/complete/"+keys["k-c2"]+"/heartbeat", "{}")
		time.Sleep(300 * time.Millisecond) // heartbeats are spaced in time by nature
	}
	b.must(http.StatusOK, http.MethodPost, "/v1/complete/"+keys["k-c0"], `{"output":"zero"}`)
	b.must(http.StatusOK, http.MethodPost, "/v1/complete/"+keys["k-c2"], `{"output":"two"}`)

	tj, data := b.awaitSettled("dies", "k")
	want := []struct{ status, output, code, message string }{
		{"ok", `"zero"`, "", ""},
		{"timed_out", "", "completion_timeout", "deadline"},
		{"ok", `"two"`, "", ""},
		{"timed_out", "", "completion_timeout", "heartbeat"},
	}
	if tj.Status != "completed" || len(tj.Results) != len(want) {
		t.Fatalf("after A died: %s", data)
	}
	for i, w := range want {
		r := tj.Results[i]
		if r.Status != w.status || (w.output != "" && string(r.Output) != w.output) ||
			(w.code != "" && (r.Error == nil || r.Error.Code != w.code || !strings.Contains(r.Error.Message, w.message))) {
			t.Errorf("c%d: want %s %s %s (%s): %s", i, w.status, w.output, w.code, w.message, data)
		}
	}
	lines := b.ledger("dies")
	for i := range want {
		if n := kinds(lines, fmt.Sprintf("k-c%d", i))["call_answered"]; n != 1 {
			t.Errorf("c%d answered %d times:\n%s", i, n, formatLedger(lines))
		}
	}

	// The sleeping turn's owner is dead: B resumes it once the lease
	// expires and applies the cancel it recorded.
	body := b.must(http.StatusOK, http.MethodPost, "/v1/sessions/dies/turns/slow/cancel", nil)
	if tj := decode[turnJSON](t, body); tj.Status != "cancelled" || tj.result(t, "s").Status != "cancelled" {
		t.Errorf("cancel of the dead replica's turn: %s", body)
	}
	noErrorLogs(t, b)
}

// TestCancelOnAnotherReplica (4): a cancel posted to B of a turn whose wave
// runs on A is applied by A, and B answers with the cancelled turn. The
// lease TTL is 10s, so A's renewal would take up to 3.3s to see the
// request; the notification makes it immediate (logged, not asserted).
func TestCancelOnAnotherReplica(t *testing.T) {
	t.Parallel()
	rig := newReplicaRig(t, "10s")
	a, b := rig.start("replica A"), rig.start("replica B")
	var took []time.Duration
	for i := range 3 {
		tid := fmt.Sprintf("c%d", i)
		a.must(http.StatusAccepted, http.MethodPost, "/v1/sessions/cancel/turns",
			`{"id":"`+tid+`","calls":[{"id":"`+tid+`-s","name":"sleep","arguments":{"ms":60000}}]}`, "Prefer", "respond-async")
		a.awaitStatus("cancel", tid, "running")
		start := time.Now()
		body := b.must(http.StatusOK, http.MethodPost, "/v1/sessions/cancel/turns/"+tid+"/cancel", nil)
		took = append(took, time.Since(start))
		tj := decode[turnJSON](t, body)
		if tj.Status != "cancelled" || tj.result(t, tid+"-s").Status != "cancelled" {
			t.Fatalf("cancel on B: %s", body)
		}
		lines := a.ledger("cancel")
		if k := kinds(lines, ""); k["turn_settled"] != i+1 || k["turn_resumed"] != 0 {
			t.Errorf("ledger kinds %v:\n%s", k, formatLedger(lines))
		}
	}
	// A cancelled the wave itself: the cancel did not wait for a takeover.
	if got := strings.Count(a.stderr.String(), "cancelling turn at a request made on another replica"); got != 3 {
		t.Errorf("A logged %d cancels at another replica's request, want 3", got)
	}
	t.Logf("cancel on B of a turn running on A took %v (p50 %v)", took, median(took))
}
