package main

// The harness of the end-to-end tests: it builds the turnd binary once,
// starts it as a child process on a free loopback port, talks to it over
// HTTP, and always kills it in t.Cleanup (printing its stderr when the test
// failed). Waiting for the child is bounded polling: it is an external
// process, so there is no channel to wait on.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/turnd/turnd/internal/pgtest"
	"github.com/turnd/turnd/internal/syncbuf"
	"github.com/turnd/turnd/internal/testnet"
	"github.com/turnd/turnd/internal/turndbin"
)

// testVersion is stamped into the test binary with -ldflags -X.
const testVersion = "v0.0.0-e2e"

// Bounds on waiting for the child process. Generous: the child may be
// built with the race detector on a loaded 2-core machine.
const (
	readyTimeout  = 30 * time.Second
	settleTimeout = 30 * time.Second
	exitTimeout   = 20 * time.Second
	pollInterval  = 20 * time.Millisecond
)

func TestMain(m *testing.M) {
	if os.Getenv(progressServerEnv) == "1" {
		os.Exit(progressServer()) // the test binary as a stdio MCP server
	}
	turndbin.Main(m)
}

// build is the binary under test, built on first use, so that the unit
// tests alone do not pay for it. Under -race the binary has the race
// detector too, and every child's stderr is checked for race reports.
var build = turndbin.Build{Flags: buildFlags()}

func buildFlags() []string {
	flags := []string{"-ldflags", "-X main.version=" + testVersion}
	if raceEnabled {
		flags = append(flags, "-race")
	}
	return flags
}

func turndBinary(t *testing.T) string { return build.Binary(t) }

// childEnv is this process's environment without turnd's own settings (a
// DATABASE_URL exported for the Postgres tests must not turn an SQLite
// child into a Postgres one), plus extra.
func childEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "TURND_") || strings.HasPrefix(k, "DATABASE_URL") || strings.HasPrefix(k, "OTEL_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// freeAddr returns a loopback address with a port that was free a moment ago.
func freeAddr(t *testing.T) string { return testnet.ClosedAddr(t) }

// syncBuffer collects a child's output, written by exec's copying goroutine
// and read by the test.
type syncBuffer = syncbuf.Buffer

// checkRaces fails the test when a child built with -race reported one.
func checkRaces(t *testing.T, name, stderr string) {
	t.Helper()
	if strings.Contains(stderr, "WARNING: DATA RACE") {
		t.Errorf("%s: the race detector reported a data race:\n%s", name, stderr)
	}
}

// runTurnd runs the binary to its end and returns its exit code and output.
func runTurnd(t *testing.T, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runTurndInput(t, env, nil, args...)
}

// runTurndInput is runTurnd with stdin (nil: none).
func runTurndInput(t *testing.T, env []string, stdin io.Reader, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(turndBinary(t), args...)
	cmd.Env = env
	cmd.Stdin = stdin
	var out, errb syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("turnd %v: %v", args, err)
		}
	case <-time.After(exitTimeout):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("turnd %v did not exit within %v; stderr:\n%s", args, exitTimeout, errb.String())
	}
	checkRaces(t, "turnd "+strings.Join(args, " "), errb.String())
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
}

// proc is a running `turnd serve`.
type proc struct {
	t      *testing.T
	name   string
	cmd    *exec.Cmd
	addr   string
	base   string // http://addr
	stderr *syncBuffer
	exited chan struct{} // closed once the process is reaped
}

type procOptions struct {
	name string   // for messages: "first", "restarted", ...
	args []string // after `serve --addr A --log-format json`
	env  []string // extra environment
	addr string   // default: a free loopback port
}

// startTurnd starts `turnd serve` and waits until /readyz answers 200.
// The process is killed (if still running) in t.Cleanup, and its stderr
// printed when the test failed.
func startTurnd(t *testing.T, o procOptions) *proc {
	t.Helper()
	if o.name == "" {
		o.name = "turnd"
	}
	if o.addr == "" {
		o.addr = freeAddr(t)
	}
	args := append([]string{"serve", "--addr", o.addr, "--log-format", "json"}, o.args...)
	p := &proc{
		t: t, name: o.name, addr: o.addr,
		base:   "http://" + strings.Replace(o.addr, "0.0.0.0", "127.0.0.1", 1),
		stderr: &syncBuffer{}, exited: make(chan struct{}),
	}
	p.cmd = exec.Command(turndBinary(t), args...)
	p.cmd.Env = childEnv(o.env...)
	p.cmd.Stdout, p.cmd.Stderr = p.stderr, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", o.name, err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		checkRaces(t, p.name, p.stderr.String())
		if t.Failed() {
			t.Logf("%s (turnd %s) stderr:\n%s", p.name, strings.Join(args, " "), p.stderr.String())
		}
	})
	p.waitReady()
	return p
}

func (p *proc) waitReady() {
	p.t.Helper()
	poll(p.t, readyTimeout, func() error {
		select {
		case <-p.exited:
			p.t.Fatalf("%s exited with %v before it was ready", p.name, p.cmd.ProcessState)
		default:
		}
		if err := p.answers("/readyz", http.StatusOK); err != nil {
			return fmt.Errorf("%s not ready within %v (last: %v)", p.name, readyTimeout, err)
		}
		return nil
	})
}

// answers is nil when GET path answers want, else what it answered.
func (p *proc) answers(path string, want int) error {
	resp, err := httpClient.Get(p.base + path)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != want {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

// poll calls try every pollInterval until it returns nil. The child is an
// external process, so there is no channel to wait on: past within, the
// test fails with try's last error.
func poll(t testing.TB, within time.Duration, try func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := try()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(pollInterval)
	}
}

// kill sends SIGKILL and reaps the process: a crash, with no shutdown.
func (p *proc) kill() {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		p.t.Fatalf("killing %s: %v", p.name, err)
	}
	p.waitExit()
}

func (p *proc) signal(sig os.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("signalling %s: %v", p.name, err)
	}
}

// waitExit waits (bounded) for the process to end and returns its exit code
// (-1 when killed by a signal).
func (p *proc) waitExit() int {
	p.t.Helper()
	select {
	case <-p.exited:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(exitTimeout):
		p.t.Fatalf("%s did not exit within %v", p.name, exitTimeout)
		return 0
	}
}

// logLines returns the child's JSON log records so far.
func (p *proc) logLines() []map[string]any {
	var out []map[string]any
	for _, l := range strings.Split(p.stderr.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// httpClient keeps no idle connections: children are killed mid-test, and
// goleak checks for leftover connection goroutines at the end.
var httpClient = &http.Client{
	Transport: &http.Transport{DisableKeepAlives: true},
	Timeout:   time.Minute,
}

// do sends a request with a JSON body (nil: none; string or []byte: as is)
// and returns the response with its body read.
// postAsync posts body as a turn of session s from a goroutine of its own,
// for a POST in flight while the test acts on the process, and returns a
// function that waits for the answer. A cleanup waits for it too (the
// child is killed first: cleanups run last-in first-out).
func (p *proc) postAsync(t *testing.T, body string) (answer func() (code int, data []byte, err error)) {
	t.Helper()
	done := make(chan struct{})
	var (
		code int
		data []byte
		err  error
	)
	go func() {
		defer close(done)
		resp, perr := httpClient.Post(p.base+"/v1/sessions/s/turns", "application/json", strings.NewReader(body))
		if perr != nil {
			err = perr
			return
		}
		defer resp.Body.Close()
		code = resp.StatusCode
		data, err = io.ReadAll(resp.Body)
	}()
	t.Cleanup(func() { <-done })
	return func() (int, []byte, error) {
		<-done
		return code, data, err
	}
}

func (p *proc) do(method, path string, body any, header ...string) (*http.Response, []byte) {
	p.t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	case []byte:
		r = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			p.t.Fatal(err)
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, p.base+path, r)
	if err != nil {
		p.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
			continue
		}
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		p.t.Fatalf("%s %s to %s: %v", method, path, p.name, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		p.t.Fatalf("%s %s to %s: reading the body: %v", method, path, p.name, err)
	}
	return resp, data
}

// must does a request that must answer want; it returns the body.
func (p *proc) must(want int, method, path string, body any, header ...string) []byte {
	p.t.Helper()
	resp, data := p.do(method, path, body, header...)
	if resp.StatusCode != want {
		p.t.Fatalf("%s %s: status %d, want %d; body: %s", method, path, resp.StatusCode, want, data)
	}
	return data
}

// The wire shapes the tests read (see openapi.yaml).
type (
	turnJSON struct {
		ID        string       `json:"id"`
		SessionID string       `json:"session_id"`
		Status    string       `json:"status"`
		SettledAt *time.Time   `json:"settled_at"`
		Results   []resultJSON `json:"results"`
	}
	resultJSON struct {
		CallID        string          `json:"call_id"`
		Name          string          `json:"name"`
		Status        string          `json:"status"`
		Output        json.RawMessage `json:"output"`
		Error         *errorJSON      `json:"error"`
		Truncated     bool            `json:"truncated"`
		OriginalBytes int64           `json:"original_bytes"`
		OutputID      *string         `json:"output_id"`
		Attempts      int             `json:"attempts"`
		StartedAt     *time.Time      `json:"started_at"`
		FinishedAt    *time.Time      `json:"finished_at"`
		ReplayedFrom  *string         `json:"replayed_from"`
	}
	errorJSON struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	lineJSON struct {
		Seq    int64           `json:"seq"`
		TurnID string          `json:"turn_id"`
		CallID *string         `json:"call_id"`
		Kind   string          `json:"kind"`
		Data   json.RawMessage `json:"data"`
	}
)

func decode[T any](t *testing.T, data []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("decoding %T: %v\n%s", v, err, data)
	}
	return v
}

// result returns the turn's result for callID.
func (tj turnJSON) result(t *testing.T, callID string) resultJSON {
	t.Helper()
	for _, r := range tj.Results {
		if r.CallID == callID {
			return r
		}
	}
	t.Fatalf("turn %s has no result for call %s: %+v", tj.ID, callID, tj.Results)
	return resultJSON{}
}

// callIDs lists the turn's results' call ids, in order.
func (tj turnJSON) callIDs() []string {
	ids := make([]string, len(tj.Results))
	for i, r := range tj.Results {
		ids[i] = r.CallID
	}
	return ids
}

// getTurn reads a turn.
func (p *proc) getTurn(sessionID, turnID string) (turnJSON, []byte) {
	p.t.Helper()
	data := p.must(http.StatusOK, http.MethodGet, "/v1/sessions/"+sessionID+"/turns/"+turnID, nil)
	return decode[turnJSON](p.t, data), data
}

// awaitSettled polls the turn until it is settled (bounded).
func (p *proc) awaitSettled(sessionID, turnID string) (turnJSON, []byte) {
	p.t.Helper()
	deadline := time.Now().Add(settleTimeout)
	for {
		tj, data := p.getTurn(sessionID, turnID)
		switch tj.Status {
		case "completed", "failed", "cancelled":
			return tj, data
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("turn %s/%s not settled within %v: %s", sessionID, turnID, settleTimeout, data)
		}
		select {
		case <-p.exited:
			p.t.Fatalf("%s exited while turn %s/%s was %s", p.name, sessionID, turnID, tj.Status)
		case <-time.After(pollInterval):
		}
	}
}

// ledger reads a session's whole ledger and checks that it is gap-free:
// seq 1..N.
func (p *proc) ledger(sessionID string) []lineJSON {
	p.t.Helper()
	var lines []lineJSON
	after := int64(0)
	for {
		data := p.must(http.StatusOK, http.MethodGet, fmt.Sprintf("/v1/sessions/%s/ledger?after=%d&limit=1000", sessionID, after), nil)
		page := decode[struct {
			Lines     []lineJSON `json:"lines"`
			NextAfter int64      `json:"next_after"`
		}](p.t, data)
		if len(page.Lines) == 0 {
			break // a page may be short by its byte bound: only an empty one ends the ledger
		}
		lines = append(lines, page.Lines...)
		after = page.NextAfter
	}
	for i, l := range lines {
		if l.Seq != int64(i+1) {
			p.t.Fatalf("ledger of %s is not gap-free: line %d has seq %d\n%s", sessionID, i, l.Seq, formatLedger(lines))
		}
	}
	return lines
}

func formatLedger(lines []lineJSON) string {
	var b strings.Builder
	for _, l := range lines {
		call := ""
		if l.CallID != nil {
			call = *l.CallID
		}
		fmt.Fprintf(&b, "%3d %-8s %-4s %-16s %s\n", l.Seq, l.TurnID, call, l.Kind, l.Data)
	}
	return b.String()
}

// kinds counts the ledger lines of each kind, for one call ("" any call).
func kinds(lines []lineJSON, callID string) map[string]int {
	m := map[string]int{}
	for _, l := range lines {
		if callID == "" || (l.CallID != nil && *l.CallID == callID) {
			m[l.Kind]++
		}
	}
	return m
}

// backend is a store the end-to-end tests run turnd on; args returns the
// flags selecting it, the same for every process of one test (a restart
// opens the same database).
type backend struct {
	name string
	args func(t *testing.T) []string
}

// eachBackend runs test as a parallel subtest on each backend.
func eachBackend(t *testing.T, test func(t *testing.T, b backend)) {
	t.Helper()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			test(t, b)
		})
	}
}

var backends = []backend{
	{"sqlite", func(t *testing.T) []string {
		return []string{"--data", filepath.Join(t.TempDir(), "turnd.db")}
	}},
	{"postgres", func(t *testing.T) []string {
		// pgtest skips without DATABASE_URL (fails in CI); the URL selects
		// a fresh schema of the test's own through search_path.
		return []string{"--database-url", pgtest.URL(t)}
	}},
}
