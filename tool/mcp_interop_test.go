//go:build unix

package tool

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turnd/turnd/dispatch"
	"github.com/turnd/turnd/internal/testnet"
	"github.com/turnd/turnd/internal/testproc"
)

// The interop tests run turnd's MCP client against servers written by
// others: the reference servers from npm, which .ci/run installs into
// testdata/npm (npm ci, versions pinned by its package-lock.json). Outside
// CI they skip when node or that folder is missing; with CI set they fail.

// npmServer returns the path of an installed npm MCP server's program
// (node_modules/.bin/<bin>), or skips (fails under CI) when it is missing.
func npmServer(t *testing.T, bin string) string {
	t.Helper()
	missing := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...) + "; run `npm ci --no-audit --no-fund` in tool/testdata/npm (as .ci/run does)"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	if _, err := exec.LookPath("node"); err != nil {
		missing("node is not installed")
	}
	p, err := filepath.Abs(filepath.Join("testdata", "npm", "node_modules", ".bin", bin))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		missing("the npm package providing %s is not installed", bin)
	}
	return p
}

// openInterop opens a config with turnd's own environment and a debug log.
func openInterop(t *testing.T, cfg string) (*Live, *logBuffer) {
	t.Helper()
	l, logs := openLogged(t, cfg, 60*time.Second, Options{})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("turnd's log:\n%s", logs.String())
		}
	})
	return l, logs
}

// pick returns the first of candidates the registry has: the reference
// servers renamed their tools across versions.
func pick(t *testing.T, r *Registry, prefix string, candidates ...string) string {
	t.Helper()
	for _, c := range candidates {
		if _, ok := r.Lookup(prefix + c); ok {
			return prefix + c
		}
	}
	t.Errorf("the server lists none of %v; it lists %v", candidates, names(r))
	return ""
}

// startEverything runs server-everything in streamable HTTP mode on a free
// loopback port and returns its MCP URL; it stops with the test.
func startEverything(t *testing.T) string {
	t.Helper()
	bin := npmServer(t, "mcp-server-everything")
	port := strings.TrimPrefix(testnet.ClosedAddr(t), "127.0.0.1:")
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "streamableHttp")
	cmd.Env = append(os.Environ(), "PORT="+port)
	cmd.Stdout = io.Discard
	cmd.WaitDelay = 5 * time.Second
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	ready := make(chan bool, 1)
	var read sync.WaitGroup
	read.Go(func() {
		sc := bufio.NewScanner(stderr)
		up := false
		for sc.Scan() {
			out.WriteString(sc.Text() + "\n")
			if !up && strings.Contains(sc.Text(), "listening on port "+port) {
				up = true
				ready <- true
			}
		}
		if !up {
			ready <- false
		}
	})
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		read.Wait()
	})
	select {
	case ok := <-ready:
		if !ok {
			read.Wait()
			t.Fatalf("server-everything exited before it listened:\n%s", out.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("server-everything did not listen within 60s")
	}
	return "http://127.0.0.1:" + port + "/mcp"
}

// TestInteropEverything: @modelcontextprotocol/server-everything over
// streamable HTTP.
func TestInteropEverything(t *testing.T) {
	t.Parallel()
	url := startEverything(t)
	cfg := fmt.Sprintf("tools:\n  - mcp:\n      url: %s\n      prefix: ev_\n      trust_annotations: true\n"+
		"  - mcp:\n      url: %s\n      prefix: short_\n      timeout: 500ms\n    retry: {max_attempts: 1}\n", url, url)
	l, _ := openInterop(t, cfg)
	// The short entry's 500ms also bounds its connecting, which a loaded
	// machine may miss once: it is retried in the background.
	r := waitFor(t, l, "listed the tools of both entries", func(r *Registry) bool {
		return has("ev_echo")(r) && has("short_echo")(r)
	})
	t.Logf("server-everything lists: %v", names(r))

	echo := pick(t, r, "ev_", "echo")
	sum := pick(t, r, "ev_", "get-sum", "add")
	structured := pick(t, r, "ev_", "get-structured-content", "structuredContent")
	image := pick(t, r, "ev_", "get-tiny-image", "getTinyImage")
	links := pick(t, r, "ev_", "get-resource-links", "getResourceLinks")
	embedded := pick(t, r, "ev_", "get-resource-reference", "getResourceReference")
	long := pick(t, r, "ev_", "trigger-long-running-operation", "longRunningOperation")
	if t.Failed() {
		return
	}
	if sp, _ := r.Lookup(sum); sp.Effect != dispatch.EffectRead || !sp.Idempotent {
		t.Errorf("%s: effect %v idempotent %v; the server annotates it read-only and trust_annotations is on", sum, sp.Effect, sp.Idempotent)
	}
	if sp, _ := r.Lookup("short_" + strings.TrimPrefix(sum, "ev_")); sp == nil || sp.Effect != dispatch.EffectWrite {
		t.Errorf("without trust_annotations %s should be write: %+v", sum, sp)
	}

	call := func(name, args string) dispatch.Outcome {
		t.Helper()
		start := time.Now()
		out := invokeMCP(t, r, name, args)
		t.Logf("%s %s: %v in %v", name, args, out.Status, time.Since(start).Round(time.Millisecond))
		return out
	}
	okText := func(out dispatch.Outcome, want string) {
		t.Helper()
		if out.Status != dispatch.StatusOK || !strings.Contains(string(out.Output), want) {
			t.Errorf("want output with %q: %+v %+v %s", want, out, out.Err, out.Output)
		}
	}

	out := call(echo, `{"message":"hello from turnd"}`)
	okText(out, "hello from turnd")
	if out.JSON {
		t.Errorf("echo: text content should be text output")
	}
	okText(call(sum, `{"a":2,"b":40}`), "42")

	out = call(structured, `{"location":"Chicago"}`)
	var weather map[string]any
	if out.Status != dispatch.StatusOK || !out.JSON || json.Unmarshal(out.Output, &weather) != nil || weather["temperature"] == nil {
		t.Errorf("structured content: %+v %+v %s", out, out.Err, out.Output)
	}

	out = call(image, `{}`)
	okText(out, `"type":"image"`)
	okText(out, `"mimeType":"image/png"`)
	okText(out, "bytes of image data, left out")
	if strings.Contains(string(out.Output), "iVBORw0KGgo") {
		t.Errorf("the image's base64 reached the output: %.200s", out.Output)
	}

	out = call(links, `{"count":2}`)
	okText(out, `"type":"resource_link"`)
	okText(out, `"uri":"`)

	out = call(embedded, `{"resourceType":"Text","resourceId":1}`)
	okText(out, `"type":"resource"`)
	okText(out, `"text":`)

	// A long-running operation: answered when it ends; past the entry's
	// timeout, tool_unavailable (retryable).
	okText(call(long, `{"duration":1,"steps":2}`), "completed")
	out = call("short_"+strings.TrimPrefix(long, "ev_"), `{"duration":5,"steps":1}`)
	if out.Status != dispatch.StatusError || out.Err.Code != CodeToolUnavailable || !out.Err.Retryable || !strings.Contains(out.Err.Message, "500ms") {
		t.Errorf("a call past the timeout: %+v %+v", out, out.Err)
	}

	// Schema refusals: turnd checks arguments against the server's schema
	// before calling (the dispatcher refuses invalid_arguments); a call
	// that reaches the server anyway is answered as an error.
	sp, _ := r.Lookup(sum)
	for _, bad := range []string{`{"a":"two","b":1}`, `{"a":1}`} {
		if err := sp.Validate(json.RawMessage(bad)); !errors.Is(err, ErrInvalidArguments) {
			t.Errorf("%s %s: the server's schema is not enforced: %v", sum, bad, err)
		}
	}
	if sp, _ := r.Lookup(structured); sp.Validate(json.RawMessage(`{"location":"Paris"}`)) == nil {
		t.Errorf("%s accepts a location outside its enum", structured)
	}
	out = call(sum, `{"a":"two","b":1}`)
	if out.Status != dispatch.StatusError || (out.Err.Code != CodeToolError && out.Err.Code != CodeToolUnavailable) {
		t.Errorf("the server accepted arguments its schema refuses: %+v %+v", out, out.Err)
	} else {
		t.Logf("server-everything answers bad arguments with %s: %s", out.Err.Code, out.Err.Message)
	}
}

// TestInteropFilesystem: @modelcontextprotocol/server-filesystem over
// stdio, run by turnd.
func TestInteropFilesystem(t *testing.T) {
	t.Parallel()
	bin := npmServer(t, "mcp-server-filesystem")
	root := t.TempDir()
	for name, content := range map[string]string{"a.txt": "alpha\n", "b.txt": "bravo\n"} {
		if err := os.WriteFile(filepath.Join(root, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	png, _ := base64.StdEncoding.DecodeString("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")
	if err := os.WriteFile(filepath.Join(root, "dot.png"), png, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf("tools:\n  - mcp:\n      command: [%q, %q]\n      cwd: %q\n      prefix: fs_\n      trust_annotations: true\n", bin, root, root)
	start := time.Now()
	l, logs := openInterop(t, cfg)
	r := l.Registry()
	t.Logf("server-filesystem started and listed in %v: %v", time.Since(start).Round(time.Millisecond), names(r))

	read := pick(t, r, "fs_", "read_text_file", "read_file")
	media := pick(t, r, "fs_", "read_media_file", "read_image_file")
	write := pick(t, r, "fs_", "write_file")
	list := pick(t, r, "fs_", "list_directory")
	if t.Failed() {
		return
	}
	for name, want := range map[string]dispatch.Effect{read: dispatch.EffectRead, list: dispatch.EffectRead, media: dispatch.EffectRead, write: dispatch.EffectWrite} {
		if sp, _ := r.Lookup(name); sp.Effect != want {
			t.Errorf("%s: effect %v, want %v (from its readOnlyHint, trusted)", name, sp.Effect, want)
		}
	}
	path := func(name string) string { b, _ := json.Marshal(filepath.Join(root, name)); return string(b) }

	// Read-only calls run at once on the one process.
	const n = 12
	outs := make([]dispatch.Outcome, n)
	var wg sync.WaitGroup
	began := time.Now()
	for i := range n {
		file := []string{"a.txt", "b.txt"}[i%2]
		wg.Go(func() { outs[i] = invokeMCP(t, r, read, `{"path":`+path(file)+`}`) })
	}
	wg.Wait()
	t.Logf("%d concurrent %s calls in %v", n, read, time.Since(began).Round(time.Millisecond))
	for i, out := range outs {
		if want := []string{"alpha", "bravo"}[i%2]; out.Status != dispatch.StatusOK || !strings.Contains(string(out.Output), want) {
			t.Errorf("read %d: %+v %+v %s", i, out, out.Err, out.Output)
		}
	}

	out := invokeMCP(t, r, write, `{"path":`+path("c.txt")+`,"content":"charlie"}`)
	if out.Status != dispatch.StatusOK {
		t.Fatalf("%s: %+v %+v", write, out, out.Err)
	}
	if data, err := os.ReadFile(filepath.Join(root, "c.txt")); err != nil || string(data) != "charlie" {
		t.Errorf("c.txt after the write: %q %v", data, err)
	}
	if out := invokeMCP(t, r, list, `{"path":`+path("")+`}`); out.Status != dispatch.StatusOK || !strings.Contains(string(out.Output), "c.txt") {
		t.Errorf("%s: %+v %+v %s", list, out, out.Err, out.Output)
	}
	out = invokeMCP(t, r, media, `{"path":`+path("dot.png")+`}`)
	if out.Status != dispatch.StatusOK || !strings.Contains(string(out.Output), `"mimeType":"image/png"`) || !strings.Contains(string(out.Output), "left out") || strings.Contains(string(out.Output), "iVBORw0KGgo") {
		t.Errorf("%s: %+v %+v %s", media, out, out.Err, out.Output)
	}
	// Outside the allowed directory: the server's own refusal.
	out = invokeMCP(t, r, read, `{"path":"/etc/hostname"}`)
	if out.Status != dispatch.StatusError || out.Err.Code != CodeToolError {
		t.Errorf("a read outside the root: %+v %+v", out, out.Err)
	}

	l.Close()
	if !strings.Contains(logs.String(), `msg="MCP server stderr" mcp_server=stdio:mcp-server-filesystem`) {
		t.Errorf("the server's stderr did not reach the debug log:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "MCP server process stopped") {
		t.Errorf("no record of the process stopping:\n%s", logs.String())
	}
	waitGroupGone(t, startedPid(t, logs))
}

// startedPid is the pid of the first "MCP server process started" in logs.
func startedPid(t *testing.T, logs *logBuffer) int {
	t.Helper()
	m := regexp.MustCompile(`msg="MCP server process started" .*pid=(\d+)`).FindStringSubmatch(logs.String())
	if m == nil {
		t.Fatalf("no process started:\n%s", logs.String())
	}
	pid, _ := strconv.Atoi(m[1])
	return pid
}

// waitGroupGone waits (bounded) until no live process is left in the
// process group pgid (Linux: read from /proc; elsewhere the leader only).
func waitGroupGone(t *testing.T, pgid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		alive := groupMembers(pgid)
		if len(alive) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes %v of the server's group %d still run", alive, pgid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// groupMembers lists the live (not zombie) processes of group pgid.
func groupMembers(pgid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		if testproc.Gone(pgid) {
			return nil
		}
		return []int{pgid}
	}
	var alive []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces.
		s := string(stat)
		i := strings.LastIndexByte(s, ')')
		f := strings.Fields(s[i+1:])
		if len(f) >= 3 && f[2] == strconv.Itoa(pgid) && f[0] != "Z" {
			alive = append(alive, pid)
		}
	}
	return alive
}

// TestInteropFilesystemNpx: the same server started the way its README
// says, through npx (which starts node as a child of its own): it serves,
// and Close leaves no process of its group behind.
func TestInteropFilesystemNpx(t *testing.T) {
	t.Parallel()
	npmServer(t, "mcp-server-filesystem")
	npx, err := exec.LookPath("npx")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("npx is not installed")
		}
		t.Skip("npx is not installed")
	}
	folder, _ := filepath.Abs(filepath.Join("testdata", "npm"))
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "a.txt"), []byte("alpha"), 0o600); err != nil {
		t.Fatal(err)
	}
	// --no: the package must be the one installed in cwd, never fetched.
	cfg := fmt.Sprintf("tools:\n  - mcp:\n      command: [%q, --no, mcp-server-filesystem, %q]\n      cwd: %q\n      env: {npm_config_update_notifier: \"false\"}\n", npx, root, folder)
	start := time.Now()
	l, logs := openInterop(t, cfg)
	t.Logf("npx server-filesystem started and listed in %v", time.Since(start).Round(time.Millisecond))
	r := l.Registry()
	b, _ := json.Marshal(filepath.Join(root, "a.txt"))
	if out := invokeMCP(t, r, pick(t, r, "", "read_text_file", "read_file"), `{"path":`+string(b)+`}`); out.Status != dispatch.StatusOK || !strings.Contains(string(out.Output), "alpha") {
		t.Fatalf("read through npx: %+v %+v %s", out, out.Err, out.Output)
	}
	pgid := startedPid(t, logs)
	if members := groupMembers(pgid); len(members) < 2 {
		t.Logf("the server's group holds %v (npx may exec node itself)", members)
	}
	l.Close()
	waitGroupGone(t, pgid)
}
