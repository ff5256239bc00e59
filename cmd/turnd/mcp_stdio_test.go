//go:build unix

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/turnd/turnd/internal/testproc"
)

// TestStdioMCPServerServesTurn: turnd runs @modelcontextprotocol/server-
// filesystem from npm (installed by .ci/run into tool/testdata/npm) as a
// stdio MCP server, a turn's calls reach it (reads first, then the write,
// then a read that sees it), and turnd's shutdown stops it.
func TestStdioMCPServerServesTurn(t *testing.T) {
	t.Parallel()
	bin := filesystemServer(t)
	dir := t.TempDir()
	root := filepath.Join(dir, "docs")
	if err := os.Mkdir(root, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{"a.txt": "alpha", "b.txt": "bravo"} {
		writeFile(t, root, name, content)
	}
	cfg := writeFile(t, dir, "tools.yaml", fmt.Sprintf("tools:\n  - mcp:\n      command: [%q, %q]\n      prefix: fs_\n      trust_annotations: true\n", bin, root))
	p := startTurnd(t, procOptions{args: []string{"--config", cfg, "--data", filepath.Join(dir, "turnd.db"), "--log-level", "debug"}})

	var set map[string]string
	want := func() error {
		if set["fs_read_text_file"] != "read" || set["fs_write_file"] != "write" {
			return fmt.Errorf("the server's tools: %v; want fs_read_text_file read and fs_write_file write", set)
		}
		return nil
	}
	poll(t, settleTimeout, func() error {
		if set = p.toolSet(); set["fs_read_text_file"] == "" {
			return want()
		}
		return nil
	})
	if err := want(); err != nil {
		t.Fatal(err)
	}

	path := func(name string) string { b, _ := json.Marshal(filepath.Join(root, name)); return string(b) }
	body := `{"id":"t","calls":[` +
		`{"id":"r1","name":"fs_read_text_file","arguments":{"path":` + path("a.txt") + `}},` +
		`{"id":"r2","name":"fs_read_text_file","arguments":{"path":` + path("b.txt") + `}},` +
		`{"id":"w","name":"fs_write_file","arguments":{"path":` + path("c.txt") + `,"content":"charlie"}},` +
		`{"id":"r3","name":"fs_read_text_file","arguments":{"path":` + path("c.txt") + `}}]}`
	start := time.Now()
	data := p.must(http.StatusOK, http.MethodPost, "/v1/sessions/s/turns", body)
	t.Logf("the turn took %v", time.Since(start).Round(time.Millisecond))
	tj := decode[turnJSON](t, data)
	for id, want := range map[string]string{"r1": "alpha", "r2": "bravo", "r3": "charlie"} {
		if r := tj.result(t, id); r.Status != "ok" || !strings.Contains(string(r.Output), want) {
			t.Errorf("call %s: %s", id, data)
		}
	}
	w := tj.result(t, "w")
	if w.Status != "ok" {
		t.Fatalf("the write: %s", data)
	}
	// The write waits for the reads before it; the read after it waits for it.
	for _, id := range []string{"r1", "r2"} {
		if r := tj.result(t, id); r.FinishedAt == nil || w.StartedAt == nil || w.StartedAt.Before(*r.FinishedAt) {
			t.Errorf("the write started before read %s finished: %s", id, data)
		}
	}
	if r3 := tj.result(t, "r3"); r3.StartedAt == nil || w.FinishedAt == nil || r3.StartedAt.Before(*w.FinishedAt) {
		t.Errorf("the read after the write started before it finished: %s", data)
	}

	var pid int
	for _, rec := range p.logLines() {
		if rec["msg"] == "MCP server process started" {
			pid = int(rec["pid"].(float64))
		}
	}
	if pid == 0 {
		t.Fatalf("turnd did not log the server's start")
	}
	if !strings.Contains(p.stderr.String(), `"msg":"MCP server stderr"`) {
		t.Errorf("the server's stderr is not in turnd's debug log")
	}
	p.signal(syscall.SIGTERM)
	if code := p.waitExit(); code != 0 {
		t.Errorf("exit code %d after SIGTERM", code)
	}
	waitGone(t, pid, "turnd")
}

// waitGone waits (bounded) until the MCP server's process pid is gone;
// stopped names the turnd it must not outlive, for the failure.
func waitGone(t *testing.T, pid int, stopped string) {
	t.Helper()
	poll(t, 10*time.Second, func() error {
		if !testproc.Gone(pid) {
			return fmt.Errorf("the MCP server (pid %d) outlived %s", pid, stopped)
		}
		return nil
	})
}

// filesystemServer is the program of @modelcontextprotocol/server-filesystem
// as .ci/run installs it; without it (or node) the test skips, or fails
// where CI is set.
func filesystemServer(t *testing.T) string {
	t.Helper()
	bin, err := filepath.Abs("../../tool/testdata/npm/node_modules/.bin/mcp-server-filesystem")
	if err != nil {
		t.Fatal(err)
	}
	_, nodeErr := exec.LookPath("node")
	_, binErr := os.Stat(bin)
	if nodeErr != nil || binErr != nil {
		msg := "node or the npm package @modelcontextprotocol/server-filesystem is missing; run `npm ci --no-audit --no-fund` in tool/testdata/npm (as .ci/run does)"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return bin
}

// TestStdioMCPServerDiesWithTurnd: on Linux a stdio MCP server does not
// outlive a turnd killed without a chance to stop it.
func TestStdioMCPServerDiesWithTurnd(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("only Linux ties a child's life to its parent's")
	}
	bin := filesystemServer(t)
	dir := t.TempDir()
	cfg := writeFile(t, dir, "tools.yaml", fmt.Sprintf("tools:\n  - mcp:\n      command: [%q, %q]\n", bin, dir))
	p := startTurnd(t, procOptions{args: []string{"--config", cfg, "--data", filepath.Join(dir, "turnd.db")}})
	var pid int
	poll(t, settleTimeout, func() error {
		for _, rec := range p.logLines() {
			if rec["msg"] == "MCP server process started" {
				pid = int(rec["pid"].(float64))
			}
		}
		if pid == 0 {
			return errors.New("turnd did not start the MCP server")
		}
		return nil
	})
	p.kill()
	waitGone(t, pid, "a killed turnd")
}
