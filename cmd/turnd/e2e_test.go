package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// exampleConfig is the README's demo tool config (builtins only).
const exampleConfig = "../../examples/turnd.yaml"

func TestBinaryExitCodes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		args       []string
		code       int
		wantStdout string
		wantStderr []string
	}{
		{name: "no subcommand", code: 2, wantStderr: []string{"Usage:", "turnd: a subcommand is required"}},
		{name: "unknown subcommand", args: []string{"bogus"}, code: 2, wantStderr: []string{"Usage:", "turnd serve", `unknown subcommand "bogus"`}},
		{name: "help", args: []string{"help"}, code: 0, wantStdout: "Usage:"},
		{name: "serve -h", args: []string{"serve", "-h"}, code: 0, wantStderr: []string{"-shutdown-grace", "TURND_SHUTDOWN_GRACE", "TURND_ALLOWED_HOSTS", "TURND_CORS_ORIGINS", "TURND_CALLBACK_ALLOW_NETS", "TURND_CALLBACK_DENY_NETS"}},
		{name: "wildcard CORS origin", args: []string{"serve", "--cors-origins", "*"}, code: 2, wantStderr: []string{"cors-origins", "wildcard"}},
		{name: "bad duration", args: []string{"serve", "--shutdown-grace", "10"}, code: 2, wantStderr: []string{"shutdown-grace"}},
		{name: "lease too short", args: []string{"serve", "--lease-ttl", "100ms"}, code: 2, wantStderr: []string{"lease-ttl"}},
		{name: "bad log format", args: []string{"serve", "--log-format", "xml"}, code: 2, wantStderr: []string{"log-format"}},
		{name: "unknown flag", args: []string{"migrate", "--nope"}, code: 2, wantStderr: []string{"flag provided but not defined: -nope"}},
		{name: "unreadable secret file", args: []string{"serve"}, code: 1, wantStderr: []string{"TURND_API_TOKENS_FILE"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := childEnv()
			if tt.name == "unreadable secret file" {
				env = childEnv("TURND_API_TOKENS_FILE=" + filepath.Join(t.TempDir(), "missing"))
			}
			code, stdout, stderr := runTurnd(t, env, tt.args...)
			if code != tt.code {
				t.Errorf("exit code %d, want %d\nstdout: %s\nstderr: %s", code, tt.code, stdout, stderr)
			}
			if !strings.Contains(stdout, tt.wantStdout) {
				t.Errorf("stdout %q lacks %q", stdout, tt.wantStdout)
			}
			for _, w := range tt.wantStderr {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			if tt.code == 0 && strings.Contains(stderr, "turnd:") {
				t.Errorf("a successful run printed an error:\n%s", stderr)
			}
		})
	}
}

func TestBinaryVersion(t *testing.T) {
	t.Parallel()
	for _, arg := range []string{"version", "--version", "-v"} {
		code, stdout, stderr := runTurnd(t, childEnv(), arg)
		if code != 0 {
			t.Fatalf("turnd %s: exit code %d; stderr: %s", arg, code, stderr)
		}
		lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
		if len(lines) != 3 || lines[0] != "turnd "+testVersion || !strings.HasPrefix(lines[1], "commit ") || lines[2] != runtime.Version() {
			t.Errorf("turnd %s printed:\n%s\nwant turnd %s / commit ... / %s", arg, stdout, testVersion, runtime.Version())
		}
	}
}

// TestServeRefusesShortTokensOffLoopback: off loopback every API token must
// have at least 32 characters; a short one stops turnd before it listens.
func TestServeRefusesShortTokensOffLoopback(t *testing.T) {
	t.Parallel()
	port := strings.TrimPrefix(freeAddr(t), "127.0.0.1:")
	data := filepath.Join(t.TempDir(), "turnd.db")
	code, _, stderr := runTurnd(t, childEnv("TURND_API_TOKENS=x"), "serve", "--addr", "0.0.0.0:"+port, "--data", data)
	if code != 1 {
		t.Errorf("serve with a 1-character token off loopback: exit code %d, want 1", code)
	}
	if !strings.Contains(stderr, "at least 32") || strings.Contains(stderr, "TURND_API_TOKENS=x") {
		t.Errorf("stderr does not explain the refusal (or shows the token):\n%s", stderr)
	}
}

// TestServeRefusesPublicAddressWithoutTokens: without TURND_API_TOKENS turnd
// only serves on loopback.
func TestServeRefusesPublicAddressWithoutTokens(t *testing.T) {
	t.Parallel()
	port := strings.TrimPrefix(freeAddr(t), "127.0.0.1:")
	for _, addr := range []string{"0.0.0.0:" + port, ":" + port, "[::]:" + port} {
		data := filepath.Join(t.TempDir(), "turnd.db")
		code, _, stderr := runTurnd(t, childEnv(), "serve", "--addr", addr, "--data", data)
		if code == 0 {
			t.Errorf("serve --addr %s without tokens exited 0", addr)
		}
		if !strings.Contains(stderr, "TURND_API_TOKENS") || !strings.Contains(stderr, "refusing") {
			t.Errorf("serve --addr %s: stderr does not explain the refusal:\n%s", addr, stderr)
		}
	}
}

func TestServeLoopbackWithoutTokensWarns(t *testing.T) {
	t.Parallel()
	p := startTurnd(t, procOptions{args: []string{"--data", filepath.Join(t.TempDir(), "turnd.db")}})
	var warned bool
	for _, rec := range p.logLines() {
		if rec["level"] == "WARN" && strings.Contains(fmt.Sprint(rec["msg"]), "no API tokens") {
			warned = true
		}
	}
	if !warned {
		t.Errorf("no warning about serving without API tokens in the log:\n%s", p.stderr.String())
	}
	// And /v1 is open, to requests on loopback: not to web pages a browser
	// runs (a rebound DNS name, a foreign origin, a simple cross-site POST).
	p.must(http.StatusOK, http.MethodGet, "/v1/tools", nil)
	turn := `{"calls":[{"id":"a","name":"echo","arguments":{}}]}`
	p.must(http.StatusForbidden, http.MethodGet, "/v1/tools", nil, "Host", "attacker.example:8080")
	p.must(http.StatusForbidden, http.MethodPost, "/v1/sessions/s/turns", turn, "Origin", "https://evil.example")
	p.must(http.StatusUnsupportedMediaType, http.MethodPost, "/v1/sessions/s/turns", turn, "Content-Type", "text/plain")
	p.must(http.StatusNotFound, http.MethodGet, "/v1/sessions/s", nil)
	// Headers over the limit are refused by turnd as a problem, not by
	// net/http in plain text.
	big := p.must(http.StatusRequestHeaderFieldsTooLarge, http.MethodGet, "/v1/tools", nil, "X-Big", strings.Repeat("x", 100<<10))
	if !strings.Contains(string(big), `"code":"headers_too_large"`) {
		t.Errorf("431 body %s", big)
	}
}

// TestServeTokensFile: with TURND_API_TOKENS_FILE turnd may listen on every
// interface, and /v1 requires one of the tokens; the probes stay open.
func TestServeTokensFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// Off loopback tokens must have at least 32 characters.
	tokens := writeFile(t, dir, "tokens", "first-token-0123456789abcdef0123456789\nsecond-token-0123456789abcdef0123456789\n")
	port := strings.TrimPrefix(freeAddr(t), "127.0.0.1:")
	p := startTurnd(t, procOptions{
		addr: "0.0.0.0:" + port,
		args: []string{"--data", filepath.Join(dir, "turnd.db")},
		env:  []string{"TURND_API_TOKENS_FILE=" + tokens},
	})
	p.must(http.StatusOK, http.MethodGet, "/healthz", nil)
	p.must(http.StatusUnauthorized, http.MethodGet, "/v1/tools", nil)
	p.must(http.StatusUnauthorized, http.MethodGet, "/v1/tools", nil, "Authorization", "Bearer wrong")
	p.must(http.StatusOK, http.MethodGet, "/v1/tools", nil, "Authorization", "Bearer second-token-0123456789abcdef0123456789")
	for _, rec := range p.logLines() {
		if strings.Contains(fmt.Sprint(rec["msg"]), "no API tokens") {
			t.Errorf("warned about missing tokens although they are set: %v", rec)
		}
	}
	if strings.Contains(p.stderr.String(), "second-token-0123456789abcdef0123456789") {
		t.Errorf("a token appears in the log:\n%s", p.stderr.String())
	}
}

// TestMigrateThenNoMigrate: `serve --no-migrate` refuses a schema that is
// behind; `turnd migrate` brings it up to date.
func TestMigrateThenNoMigrate(t *testing.T) {
	t.Parallel()
	data := filepath.Join(t.TempDir(), "turnd.db")
	code, _, stderr := runTurnd(t, childEnv(), "serve", "--no-migrate", "--data", data, "--addr", freeAddr(t))
	if code != 1 || !strings.Contains(stderr, "turnd migrate") {
		t.Fatalf("serve --no-migrate on an empty database: exit code %d, want 1 with advice to run turnd migrate; stderr:\n%s", code, stderr)
	}
	if code, _, stderr := runTurnd(t, childEnv(), "migrate", "--data", data); code != 0 {
		t.Fatalf("turnd migrate: exit code %d; stderr:\n%s", code, stderr)
	}
	p := startTurnd(t, procOptions{args: []string{"--data", data, "--no-migrate"}})
	p.must(http.StatusOK, http.MethodGet, "/readyz", nil)
}

// TestQuickStart runs the README's quick start against the binary.
func TestQuickStart(t *testing.T) {
	t.Parallel()
	p := startTurnd(t, procOptions{args: []string{"--config", exampleConfig, "--demo", "--data", filepath.Join(t.TempDir(), "turnd.db")}})

	// Plain curl -d sends application/x-www-form-urlencoded, as an HTML form
	// does: turnd refuses it, so that no web page can post to it; the
	// README's commands say application/json.
	form := []string{"Content-Type", "application/x-www-form-urlencoded"}
	p.must(http.StatusUnsupportedMediaType, http.MethodPost, "/v1/sessions", `{"id":"demo","budget":{"limit":200}}`, form...)
	readme := []string{"Content-Type", "application/json"}
	p.must(http.StatusCreated, http.MethodPost, "/v1/sessions", `{"id":"demo","budget":{"limit":200}}`, readme...)
	text := strings.Repeat("x", 300)
	body := `{
  "id": "turn-1",
  "calls": [
    {"id": "c1", "name": "sleep", "arguments": {"ms": 300}},
    {"id": "c2", "name": "sleep", "arguments": {"ms": 300}},
    {"id": "c3", "name": "echo", "arguments": {"text": "` + text + `"}}
  ]}`
	data := p.must(http.StatusOK, http.MethodPost, "/v1/sessions/demo/turns", body, readme...)
	tj := decode[turnJSON](t, data)
	if tj.Status != "completed" {
		t.Fatalf("turn status %q, want completed: %s", tj.Status, data)
	}
	if got := strings.Join(tj.callIDs(), ","); got != "c1,c2,c3" {
		t.Fatalf("results in order %s, want c1,c2,c3: %s", got, data)
	}
	for _, r := range tj.Results {
		if r.Status != "ok" {
			t.Errorf("call %s: status %s, want ok: %s", r.CallID, r.Status, data)
		}
	}
	// "c1 and c2 run at once": each starts before the other ends.
	c1, c2 := tj.result(t, "c1"), tj.result(t, "c2")
	if got := string(c2.Output); got != `{"slept_ms":300}` {
		t.Errorf("c2 output %s", got)
	}
	if c1.StartedAt == nil || c2.StartedAt == nil || !c1.StartedAt.Before(*c2.FinishedAt) || !c2.StartedAt.Before(*c1.FinishedAt) {
		t.Errorf("c1 and c2 did not overlap: %s", data)
	}
	c3 := tj.result(t, "c3")
	full := `{"text":"` + text + `"}`
	if !c3.Truncated || c3.OutputID == nil || c3.OriginalBytes != int64(len(full)) {
		t.Fatalf("c3 not truncated with an output id and original_bytes %d: %+v", len(full), c3)
	}
	if len(c3.Output) > 200+2+64 || !strings.Contains(string(c3.Output), "bytes truncated") {
		t.Errorf("c3 output is not projected to the 200-byte budget with a marker: %s", c3.Output)
	}
	got := p.must(http.StatusOK, http.MethodGet, "/v1/outputs/"+*c3.OutputID, nil)
	if string(got) != full {
		t.Errorf("GET /v1/outputs/%s = %s, want the full output %s", *c3.OutputID, got, full)
	}

	// "Post the same turn again and it is replayed from the record."
	resp, again := p.do(http.MethodPost, "/v1/sessions/demo/turns", body, readme...)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Turnd-Replayed") != "true" {
		t.Errorf("repost: status %d, Turnd-Replayed %q; want 200, true", resp.StatusCode, resp.Header.Get("Turnd-Replayed"))
	}
	if !bytes.Equal(again, data) {
		t.Errorf("the replayed turn differs from the first answer:\n%s\n%s", again, data)
	}
	lines := p.ledger("demo")
	if k := kinds(lines, ""); k["turn_received"] != 1 || k["call_answered"] != 3 || k["turn_settled"] != 1 {
		t.Errorf("ledger kinds %v:\n%s", k, formatLedger(lines))
	}

	// The approval example: the POST answers (202) once the call is parked,
	// the turn waiting and the call pending.
	data = p.must(http.StatusAccepted, http.MethodPost, "/v1/sessions/demo/turns", `{
  "id": "turn-2",
  "calls": [{"id": "a1", "name": "approval", "arguments": {"prompt": "Ship it?", "deadline": "1h"}}]}`, readme...)
	if tj := decode[turnJSON](t, data); tj.Status != "waiting" || tj.result(t, "a1").Status != "pending" {
		t.Errorf("the approval turn answered %s, want waiting with a1 pending", data)
	}
	// COMPLETE_URL from the turn (--demo): the parked call's output, whole
	// within the session's budget; a delivery to it completes the turn.
	parked := decode[struct {
		Results []struct {
			Output struct {
				CompleteURL string `json:"complete_url"`
			} `json:"output"`
			Truncated bool `json:"truncated"`
		} `json:"results"`
	}](t, p.must(http.StatusOK, http.MethodGet, "/v1/sessions/demo/turns/turn-2", nil))
	u := parked.Results[0].Output.CompleteURL
	if !strings.HasPrefix(u, p.base+"/v1/complete/ck_") || parked.Results[0].Truncated {
		t.Fatalf("the parked call's complete_url is %q (truncated %v), want %s/v1/complete/ck_…", u, parked.Results[0].Truncated, p.base)
	}
	// The README's curl -d sends no JSON content type to the complete URL.
	p.must(http.StatusOK, http.MethodPost, strings.TrimPrefix(u, p.base), `{"output": {"approved": true}}`, form...)
	done := decode[turnJSON](t, p.must(http.StatusOK, http.MethodGet, "/v1/sessions/demo/turns/turn-2", nil, "Prefer", "wait=60"))
	if done.Status != "completed" || string(done.result(t, "a1").Output) != `{"approved":true}` {
		t.Errorf("after the delivery the turn is %s with output %s", done.Status, done.result(t, "a1").Output)
	}
}

// TestShutdownGrace: on SIGTERM the running turn finishes within the grace
// and the process exits 0; the turn is recorded completed. A synchronous
// POST in flight is answered before the server stops.
func TestShutdownGrace(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		store := b.args(t)
		args := append([]string{"--config", exampleConfig, "--shutdown-grace", "10s"}, store...)
		p := startTurnd(t, procOptions{name: "first", args: args})

		p.must(http.StatusAccepted, http.MethodPost, "/v1/sessions/s/turns",
			`{"id":"async","calls":[{"id":"z","name":"sleep","arguments":{"ms":2000}}]}`, "Prefer", "respond-async")

		// A synchronous POST, in flight when the signal arrives.
		answer := p.postAsync(t, `{"id":"sync","calls":[{"id":"y","name":"sleep","arguments":{"ms":1500}}]}`)
		// The sync turn is recorded once its POST is received.
		poll(t, settleTimeout, func() error {
			if resp, _ := p.do(http.MethodGet, "/v1/sessions/s/turns/sync", nil); resp.StatusCode != http.StatusOK {
				return errors.New("the synchronous turn was never recorded")
			}
			return nil
		})

		p.signal(syscall.SIGTERM)
		if code := p.waitExit(); code != 0 {
			t.Fatalf("exit code %d after SIGTERM, want 0", code)
		}
		exitedAt := time.Now()
		syncCode, syncBody, syncErr := answer()
		if syncErr != nil || syncCode != http.StatusOK {
			t.Fatalf("the synchronous POST in flight at SIGTERM: status %d, err %v, body %s", syncCode, syncErr, syncBody)
		}
		if st := decode[turnJSON](t, syncBody); st.Status != "completed" {
			t.Errorf("the synchronous POST answered a %s turn: %s", st.Status, syncBody)
		}
		logs := p.stderr.String()
		if !strings.Contains(logs, `"shutting down"`) || !strings.Contains(logs, `"stopped"`) {
			t.Errorf("no orderly shutdown in the log:\n%s", logs)
		}

		q := startTurnd(t, procOptions{name: "restarted", args: args})
		tj, data := q.getTurn("s", "async")
		if tj.Status != "completed" || len(tj.Results) != 1 || tj.Results[0].Status != "ok" || string(tj.Results[0].Output) != `{"slept_ms":2000}` {
			t.Fatalf("after the restart the turn is %s", data)
		}
		if fin := tj.Results[0].FinishedAt; fin == nil || fin.After(exitedAt) {
			t.Errorf("the call finished at %v, after the process exited at %v", fin, exitedAt)
		}
		lines := q.ledger("s")
		if k := kinds(lines, ""); k["turn_settled"] != 2 || k["turn_resumed"] != 0 {
			t.Errorf("ledger kinds %v:\n%s", k, formatLedger(lines))
		}
	})
}

// TestShutdownGraceOver: when the grace runs out the running turn is
// cancelled, recorded as such, and the process exits 0 promptly.
func TestShutdownGraceOver(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		args := append([]string{"--config", exampleConfig, "--shutdown-grace", "100ms"}, b.args(t)...)
		p := startTurnd(t, procOptions{name: "first", args: args})
		p.must(http.StatusAccepted, http.MethodPost, "/v1/sessions/s/turns",
			`{"id":"long","calls":[{"id":"n","name":"now","arguments":{}},{"id":"z","name":"sleep","arguments":{"ms":30000}}]}`,
			"Prefer", "respond-async")
		start := time.Now()
		p.signal(syscall.SIGTERM)
		if code := p.waitExit(); code != 0 {
			t.Fatalf("exit code %d after SIGTERM, want 0", code)
		}
		// Prompt: far from the 30 s sleep (the bound is loose for a
		// loaded machine; the point is that the sleep did not run out).
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("exited %v after SIGTERM with a 100ms grace", d)
		}
		if !strings.Contains(p.stderr.String(), "waves cancelled at the end of the grace period") {
			t.Errorf("no log of the cancelled waves:\n%s", p.stderr.String())
		}

		q := startTurnd(t, procOptions{name: "restarted", args: args})
		tj, data := q.getTurn("s", "long")
		if tj.Status != "cancelled" || len(tj.Results) != 2 {
			t.Fatalf("after the restart the turn is %s", data)
		}
		if r := tj.result(t, "n"); r.Status != "ok" {
			t.Errorf("call n: %+v", r)
		}
		if r := tj.result(t, "z"); r.Status != "cancelled" {
			t.Errorf("call z: status %s, want cancelled: %s", r.Status, data)
		}
		lines := q.ledger("s")
		var settled map[string]string
		if last := lines[len(lines)-1]; last.Kind == "turn_settled" {
			_ = json.Unmarshal(last.Data, &settled)
		}
		if settled["status"] != "cancelled" {
			t.Errorf("the ledger does not end with the cancelled settlement:\n%s", formatLedger(lines))
		}
	})
}

// TestSecondSignalForcesExit: a second SIGTERM during the shutdown grace
// ends the process at once; its running turn is resumed after a restart,
// as after a crash.
func TestSecondSignalForcesExit(t *testing.T) {
	t.Parallel()
	args := []string{"--config", exampleConfig, "--shutdown-grace", "1m", "--lease-ttl", "1s", "--data", filepath.Join(t.TempDir(), "turnd.db")}
	p := startTurnd(t, procOptions{name: "first", args: args})
	p.must(http.StatusAccepted, http.MethodPost, "/v1/sessions/s/turns",
		`{"id":"t","calls":[{"id":"z","name":"sleep","arguments":{"ms":1500}}]}`, "Prefer", "respond-async")
	p.signal(syscall.SIGTERM)
	waitLog(t, p, `"shutting down"`)
	// The signal handler is reset just after the first signal is handled:
	// repeat the second until it lands (bounded).
	deadline := time.Now().Add(exitTimeout)
	for done := false; !done; {
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Fatal(err)
		}
		select {
		case <-p.exited:
			done = true
		case <-time.After(100 * time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatal("a second SIGTERM did not end the process")
			}
		}
	}
	// Without the reset the process would exit 0 once the turn completed.
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Fatalf("process state %v, want killed by SIGTERM", p.cmd.ProcessState)
	}

	q := startTurnd(t, procOptions{name: "restarted", args: args})
	tj, data := q.awaitSettled("s", "t")
	if tj.Status != "completed" || tj.Results[0].Status != "ok" {
		t.Errorf("after the restart: %s", data)
	}
	checkResumed(t, q, "s", 1)
}
