//go:build unix

package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turnd/turnd/dispatch"
	"github.com/turnd/turnd/internal/testproc"
)

// stdioConfig is an mcp entry that runs the test binary as a stdio server
// (see stdioTestServer), with extra env lines and entry lines.
func stdioConfig(t *testing.T, env map[string]string, extra string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "tools:\n  - mcp:\n      command: [%q]\n      env:\n        %s: server\n", exe, stdioServerEnv)
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range env {
			if !yield(k) {
				return
			}
		}
	}) {
		fmt.Fprintf(&b, "        %s: %q\n", k, env[k])
	}
	b.WriteString(extra)
	return b.String()
}

// openStdio opens a config with fast restarts and a short stop grace.
func openStdio(t *testing.T, cfg string, env map[string]string, backoff time.Duration) (*Live, *logBuffer) {
	t.Helper()
	return openLogged(t, cfg, 30*time.Second, Options{Env: mapEnv(env), mcpBackoff: backoff, mcpStopGrace: time.Second})
}

// serverOf is the Live's first MCP server.
func serverOf(l *Live) *mcpServer {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.servers[0]
}

// waitRunning waits (bounded) until s has a session, watching its connection
// attempts rather than polling.
func waitRunning(t *testing.T, s *mcpServer) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		s.mu.Lock()
		up, attempt := s.sess != nil, s.attempt
		s.mu.Unlock()
		if up {
			return
		}
		select {
		case <-attempt:
		case <-timeout:
			t.Fatal("the stdio server did not run again")
		}
	}
}

// waitDown waits (bounded) until s has seen its process exit. Nothing
// signals that to a test, so it polls.
func waitDown(t *testing.T, s *mcpServer) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.mu.Lock()
		down := s.sess == nil
		s.mu.Unlock()
		if down {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the server did not see its process exit")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// pidsOf asks the server for its pid and its sleeper's.
func pidsOf(t *testing.T, r *Registry, name string) (pid, child int) {
	t.Helper()
	out := invokeMCP(t, r, name, `{}`)
	var p struct{ Pid, Child int }
	if out.Status != dispatch.StatusOK || json.Unmarshal(out.Output, &p) != nil || p.Pid == 0 {
		t.Fatalf("%s: %+v %+v %s", name, out, out.Err, out.Output)
	}
	return p.Pid, p.Child
}

// waitGone waits (bounded) until every pid is gone: SIGKILL is delivered
// after kill(2) returns, so a short poll is the one way to watch for it.
func waitGone(t *testing.T, what string, pids ...int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for !testproc.Gone(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: process %d still runs", what, pid)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

func TestMCPStdio(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := map[string]string{"G": "hi there", "PATH": "/usr/bin:/bin", "SECRET": "not for children"}
	cfg := stdioConfig(t, map[string]string{"GREETING": "${G}"}, fmt.Sprintf("      cwd: %q\n      prefix: s_\n      trust_annotations: true\n", dir))
	l, logs := openStdio(t, cfg, env, 10*time.Millisecond)
	r := l.Registry()
	if got, want := names(r), []string{"s_crash", "s_env", "s_grow", "s_pids", "s_together"}; !slices.Equal(got, want) {
		t.Fatalf("tools %v, want %v", got, want)
	}
	if sp, _ := r.Lookup("s_env"); sp.Effect != dispatch.EffectRead {
		t.Errorf("s_env effect %v: the server's readOnlyHint is trusted", sp.Effect)
	}

	out := invokeMCP(t, r, "s_env", `{}`)
	var got struct {
		Greeting, Path, Cwd string
		Secret              bool
	}
	if out.Status != dispatch.StatusOK || json.Unmarshal(out.Output, &got) != nil {
		t.Fatalf("s_env: %+v %+v", out, out.Err)
	}
	wantDir, _ := filepath.EvalSymlinks(dir)
	gotDir, _ := filepath.EvalSymlinks(got.Cwd)
	if got.Greeting != "hi there" || got.Path != "/usr/bin:/bin" || gotDir != wantDir || got.Secret {
		t.Errorf("the process's environment: %+v (want greeting from ${G}, turnd's PATH, cwd %s, no SECRET)", got, wantDir)
	}

	// Read-only calls share the one process, all at once.
	const n = 8
	outs := make([]dispatch.Outcome, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { outs[i] = invokeMCP(t, r, "s_together", fmt.Sprintf(`{"n":%d,"i":%d}`, n, i)) })
	}
	wg.Wait()
	for i, out := range outs {
		if want := fmt.Sprintf("call %d of %d, together", i, n); out.Status != dispatch.StatusOK || string(out.Output) != want {
			t.Errorf("call %d: %+v %+v %q", i, out, out.Err, out.Output)
		}
	}

	// notifications/tools/list_changed arrives over stdio too.
	if out := invokeMCP(t, r, "s_grow", `{}`); out.Status != dispatch.StatusOK {
		t.Fatalf("s_grow: %+v %+v", out, out.Err)
	}
	if out := invokeMCP(t, waitFor(t, l, "gained the grown tool", has("s_grown")), "s_grown", `{}`); string(out.Output) != "new" {
		t.Errorf("s_grown: %+v %+v", out, out.Err)
	}

	l.Close()
	for _, want := range []string{"level=DEBUG msg=\"MCP server stderr\" mcp_server=stdio:", `line="stdio test server up"`, `line="a last line without a newline"`, "MCP server process started"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log lacks %q:\n%s", want, logs.String())
		}
	}
	if strings.Contains(logs.String(), "hi there") {
		t.Errorf("the log shows an env value:\n%s", logs.String())
	}
}

// TestMCPStdioRestart: a process that exits is started again, after the
// backoff; calls meanwhile fail at once with a retryable tool_unavailable.
func TestMCPStdioRestart(t *testing.T) {
	t.Parallel()
	starts := filepath.Join(t.TempDir(), "starts")
	for _, tt := range []struct {
		name    string
		backoff time.Duration
	}{{"fast", 10 * time.Millisecond}, {"slow", time.Minute}} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			starts := starts + "-" + tt.name
			l, logs := openStdio(t, stdioConfig(t, map[string]string{"TURND_TEST_MCP_STARTS": starts},
				"    retry: {max_attempts: 3, initial_interval: 1ms, max_interval: 1ms, jitter: 0}\n"), nil, tt.backoff)
			r := l.Registry()
			first, _ := pidsOf(t, r, "pids")

			out := invokeMCP(t, r, "crash", `{}`)
			if out.Status != dispatch.StatusError || out.Err.Code != CodeToolUnavailable || !out.Err.Retryable {
				t.Fatalf("a call whose server exits under it: %+v %+v", out, out.Err)
			}
			waitGone(t, "the crashed server", first)
			waitDown(t, serverOf(l))
			if tt.backoff == time.Minute {
				// Down for a minute: a call in a wave answers after the
				// entry's retries, each failing at once, saying why.
				sp, _ := r.Lookup("pids")
				h := &waveHost{spec: sp}
				wave := dispatch.Wave{Calls: []dispatch.Call{{ID: "c", Name: "pids", Arguments: json.RawMessage(`{}`)}}}
				if _, err := wave.Run(WithCallContext(t.Context(), testCall), h); err != nil {
					t.Fatal(err)
				}
				if len(h.got) != 1 {
					t.Fatalf("accounted %d calls", len(h.got))
				}
				out := h.got[0].Outcome
				if out.Status != dispatch.StatusError || out.Err.Code != CodeToolUnavailable || !out.Err.Retryable || h.got[0].Attempts != 3 ||
					!strings.Contains(out.Err.Message, "exit status 3") || !strings.Contains(out.Err.Message, "turnd starts it again") {
					t.Errorf("a call while the server waits to restart: %+v %+v after %d attempts", out, out.Err, h.got[0].Attempts)
				}
				if !has("pids")(l.Registry()) {
					t.Errorf("the tools left the registry while the server is down")
				}
				return
			}
			waitRunning(t, serverOf(l))
			second, _ := pidsOf(t, l.Registry(), "pids")
			if second == first {
				t.Errorf("the same pid %d after a restart", first)
			}
			data, _ := os.ReadFile(starts)
			if got := strings.Fields(string(data)); !slices.Equal(got, []string{strconv.Itoa(first), strconv.Itoa(second)}) {
				t.Errorf("starts %v, want %d then %d", got, first, second)
			}
			l.Close()
			if s := logs.String(); !strings.Contains(s, "MCP server process exited") || !strings.Contains(s, "status=\"exit status 3\"") || !strings.Contains(s, "crashing on purpose") {
				t.Errorf("the log does not tell the exit:\n%s", s)
			}
		})
	}
}

// TestMCPStdioStops: shutdown and a reload that removes the entry stop the
// process and what it started; a reload that keeps the command keeps it.
func TestMCPStdioStops(t *testing.T) {
	t.Parallel()
	grand := map[string]string{"TURND_TEST_MCP_GRANDCHILD": "1"}

	t.Run("close", func(t *testing.T) {
		t.Parallel()
		l, _ := openStdio(t, stdioConfig(t, grand, ""), nil, 10*time.Millisecond)
		pid, child := pidsOf(t, l.Registry(), "pids")
		if child == 0 || testproc.Gone(child) {
			t.Fatalf("no sleeper: %d", child)
		}
		l.Close()
		waitGone(t, "after Close", pid, child)
		if out := invokeMCP(t, l.Registry(), "pids", `{}`); out.Status != dispatch.StatusError || out.Err.Code != CodeToolUnavailable {
			t.Errorf("a call after Close: %+v %+v", out, out.Err)
		}
	})

	t.Run("reload", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		path := writeConfig(t, dir, stdioConfig(t, grand, "      prefix: a_\n"))
		l, err := Open(context.Background(), path, Options{mcpBackoff: 10 * time.Millisecond, mcpStopGrace: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(l.Close)
		ctx := context.Background()
		pid, child := pidsOf(t, l.Registry(), "a_pids")

		// Another prefix: the same process.
		writeConfig(t, dir, stdioConfig(t, grand, "      prefix: b_\n"))
		if err := l.Reload(ctx); err != nil {
			t.Fatal(err)
		}
		if again, _ := pidsOf(t, l.Registry(), "b_pids"); again != pid {
			t.Errorf("a reload that keeps the command started another process: %d, was %d", again, pid)
		}
		old := l.Registry()

		// Another env: a new process; the old one stops.
		writeConfig(t, dir, stdioConfig(t, map[string]string{"TURND_TEST_MCP_GRANDCHILD": "1", "X": "1"}, "      prefix: b_\n"))
		if err := l.Reload(ctx); err != nil {
			t.Fatal(err)
		}
		waitGone(t, "after a reload that changed the env", pid, child)
		pid2, child2 := pidsOf(t, l.Registry(), "b_pids")
		if pid2 == pid {
			t.Errorf("the env changed and the process did not")
		}
		// A turn that took the registry before the reload: the removed
		// command does not run again.
		if out := invokeMCP(t, old, "b_pids", `{}`); out.Status != dispatch.StatusError || out.Err.Code != CodeToolUnavailable || !strings.Contains(out.Err.Message, "no longer runs its command") {
			t.Errorf("a call to the removed entry: %+v %+v", out, out.Err)
		}

		// Removed: stopped.
		writeConfig(t, dir, "builtin: [echo]\n")
		if err := l.Reload(ctx); err != nil {
			t.Fatal(err)
		}
		waitGone(t, "after a reload that removed the entry", pid2, child2)
	})
}

// TestMCPStdioDoesNotStart: a command that cannot start does not stop
// Open; calls fail at once, saying why.
func TestMCPStdioDoesNotStart(t *testing.T) {
	t.Parallel()
	cfg := "tools:\n  - mcp:\n      command: [turnd-no-such-program, --flag]\nbuiltin: [echo]\n"
	l, logs := openStdio(t, cfg, map[string]string{"PATH": t.TempDir()}, time.Minute)
	if got := names(l.Registry()); !slices.Equal(got, []string{"echo"}) {
		t.Fatalf("tools %v", got)
	}
	if s := logs.String(); !strings.Contains(s, "MCP server unreachable") || !strings.Contains(s, "turnd-no-such-program") || !strings.Contains(s, "mcp_server=stdio:turnd-no-such-program") {
		t.Errorf("the log does not say the command did not start:\n%s", s)
	}
}

func TestMCPStdioConfigErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(k string) (string, bool) { return "v", k == "SET" }
	tests := []struct {
		name, cfg string
		want      string
	}{
		{"url and command", "tools:\n  - mcp:\n      url: http://h/mcp\n      command: [srv]\n", "line 4: tools[0]: mcp.url and mcp.command cannot both be set"},
		{"empty command", "tools:\n  - mcp:\n      command: []\n", "line 3: tools[0]: mcp.command must be a non-empty list"},
		{"null command", "tools:\n  - mcp:\n      command:\n", "line 3: tools[0]: mcp.command must be a non-empty list"},
		{"command a string", "tools:\n  - mcp:\n      command: npx server\n", "line 3: tools[0]: string was used where sequence is expected"},
		{"empty program", "tools:\n  - mcp:\n      command: [\"\", x]\n", "tools[0]: mcp.command[0] must name the program to run"},
		{"headers with command", "tools:\n  - mcp:\n      command: [srv]\n      headers: {X-A: b}\n", "line 4: tools[0]: mcp.headers goes with mcp.url"},
		{"env with url", "tools:\n  - mcp:\n      url: http://h/mcp\n      env: {A: b}\n", "line 4: tools[0]: mcp.env goes with mcp.command"},
		{"cwd with url", "tools:\n  - mcp:\n      url: http://h/mcp\n      cwd: /\n", "line 4: tools[0]: mcp.cwd goes with mcp.command"},
		{"env unset", "tools:\n  - mcp:\n      command: [srv]\n      env:\n        A: \"${NOPE}\"\n", "line 5: tools[0]: mcp.env.A: environment variable NOPE is not set"},
		{"env name", "tools:\n  - mcp:\n      command: [srv]\n      env: {\"A-B\": x}\n", `line 4: tools[0]: mcp.env: "A-B" is not a valid variable name`},
		{"cwd missing", "tools:\n  - mcp:\n      command: [srv]\n      cwd: " + filepath.Join(dir, "nope") + "\n", "line 4: tools[0]: mcp.cwd \"" + filepath.Join(dir, "nope") + "\": no such directory"},
		{"cwd a file", "tools:\n  - mcp:\n      command: [srv]\n      cwd: " + file + "\n", "line 4: tools[0]: mcp.cwd \"" + file + "\" is not a directory"},
		{"neither", "tools:\n  - mcp:\n      prefix: x_\n", "line 3: tools[0]: mcp.url is required (or mcp.command, to run a stdio server)"},
		{"Parse refuses stdio", "tools:\n  - mcp:\n      command: [srv]\n      env: {A: \"${SET}\"}\n", "tools[0]: an mcp entry imports tools that change while turnd runs: open this config with tool.Open"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tt.cfg), Options{Env: env})
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse: %v\nwant it to contain %q", err, tt.want)
			}
		})
	}
}

// TestStderrLog: lines are logged whole, long ones cut, the last one
// flushed.
func TestStderrLog(t *testing.T) {
	t.Parallel()
	logs := &logBuffer{}
	w := &stderrLog{log: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	for _, p := range []string{"one\ntw", "o\r\n", strings.Repeat("x", mcpStderrLine+10) + "\n", "tail"} {
		if n, err := w.Write([]byte(p)); n != len(p) || err != nil {
			t.Fatalf("Write: %d %v", n, err)
		}
	}
	w.flush()
	got := logs.String()
	for _, want := range []string{`line=one`, `line=two`, `line=` + strings.Repeat("x", mcpStderrLine) + "…", `line=tail`} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("the log lacks %q:\n%s", want, got)
		}
	}
	if n := strings.Count(got, "MCP server stderr"); n != 4 {
		t.Errorf("%d lines logged, want 4", n)
	}
}

// TestRestartWait: the backoff of a crashing server grows from the first
// wait to the cap; a process that ran for the cap starts it over.
func TestRestartWait(t *testing.T) {
	t.Parallel()
	var got []time.Duration
	wait := mcpMinBackoff
	for range 9 {
		wait = restartWait(wait, mcpMinBackoff, mcpMaxBackoff, 10*time.Millisecond)
		got = append(got, wait)
		wait = min(2*wait, mcpMaxBackoff)
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second, time.Minute, time.Minute, time.Minute}
	if !slices.Equal(got, want) {
		t.Errorf("waits %v, want %v", got, want)
	}
	if w := restartWait(time.Minute, mcpMinBackoff, mcpMaxBackoff, time.Minute); w != time.Second {
		t.Errorf("after a process that ran for a minute: %v, want 1s", w)
	}
}
