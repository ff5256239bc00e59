package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/turnd/turnd/dispatch"
	"github.com/turnd/turnd/internal/syncbuf"
	"github.com/turnd/turnd/internal/testnet"
)

// mcpRig is an MCP server built with the SDK, served over streamable HTTP
// on a loopback address that outlives the server (so a test can stop it
// and start it again at the same URL).
type mcpRig struct {
	tb     testing.TB
	addr   string
	server *mcp.Server
	token  string // required "Bearer <token>" when set

	mu      sync.Mutex
	http    *httptest.Server
	inits   int      // initialize requests seen
	deletes int      // DELETEs seen (sessions closed by turnd)
	metas   []string // the idempotency keys of tools/call requests
	auths   []string // Authorization headers seen
}

func newMCPRig(t *testing.T, token string) *mcpRig {
	t.Helper()
	r := &mcpRig{tb: t, token: token}
	r.server = mcp.NewServer(&mcp.Implementation{Name: "rig", Version: "1"}, &mcp.ServerOptions{
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}},
	})
	r.start("127.0.0.1:0")
	t.Cleanup(r.stop)
	return r
}

// start serves the rig at addr.
func (r *mcpRig) start(addr string) {
	r.tb.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		r.tb.Fatal(err)
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return r.server }, nil)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.auths = append(r.auths, req.Header.Get("Authorization"))
		if req.Method == http.MethodDelete {
			r.deletes++
		}
		r.mu.Unlock()
		if r.token != "" && req.Header.Get("Authorization") != "Bearer "+r.token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, req)
	}))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	r.mu.Lock()
	r.http, r.addr = srv, ln.Addr().String()
	r.mu.Unlock()
}

// stop ends the server and every connection to it.
func (r *mcpRig) stop() {
	r.mu.Lock()
	srv := r.http
	r.http = nil
	r.mu.Unlock()
	if srv == nil {
		// The sessions die with the process a real server would be.
		r.closeSessions()
		return
	}
	// Abruptly, as a server going away: no new connections, the open ones
	// cut. Then the sessions end, before Close waits for the handlers: a
	// client that reconnected between the two cuts holds a stream (the
	// session's hanging GET) that only the session's end releases.
	_ = srv.Listener.Close()
	srv.CloseClientConnections()
	r.closeSessions()
	srv.Close()
}

func (r *mcpRig) closeSessions() {
	for ss := range r.server.Sessions() {
		_ = ss.Close()
	}
}

func (r *mcpRig) url() string { return "http://" + r.addr + "/mcp" }

func (r *mcpRig) counts() (inits, deletes int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.inits, r.deletes
}

// addTool adds a tool answering with res (or with the result of fn).
func (r *mcpRig) addTool(t *mcp.Tool, fn func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error)) {
	if t.InputSchema == nil {
		t.InputSchema = json.RawMessage(`{"type":"object"}`)
	}
	r.server.AddTool(t, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		r.mu.Lock()
		r.metas = append(r.metas, fmt.Sprint(req.Params.Meta[metaIdempotencyKey]))
		r.mu.Unlock()
		return fn(ctx, req)
	})
}

func textResult(s ...string) func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res := &mcp.CallToolResult{}
		for _, p := range s {
			res.Content = append(res.Content, &mcp.TextContent{Text: p})
		}
		return res, nil
	}
}

// countInits wraps the server to count initialize requests.
func (r *mcpRig) countInits() {
	r.server.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "initialize" {
				r.mu.Lock()
				r.inits++
				r.mu.Unlock()
			}
			return next(ctx, method, req)
		}
	})
}

// writeConfig writes a tool config file.
func writeConfig(t testing.TB, dir, content string) string {
	t.Helper()
	p := filepath.Join(dir, "tools.yaml")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// logBuffer collects log output written from several goroutines.
type logBuffer = syncbuf.Buffer

// openLive opens a config with fast MCP reconnects, closed at the end.
func openLive(t testing.TB, cfg string, env map[string]string) (*Live, *logBuffer) {
	t.Helper()
	return openLogged(t, cfg, 30*time.Second, Options{
		Env:              mapEnv(env),
		mcpStreamRetries: -1,
		mcpBackoff:       10 * time.Millisecond,
	})
}

// openLogged opens a config with opts and a debug log, which it returns,
// taking up to timeout; the Live is closed at the end.
func openLogged(t testing.TB, cfg string, timeout time.Duration, opts Options) (*Live, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	opts.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	l, err := Open(ctx, writeConfig(t, t.TempDir(), cfg), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l, logs
}

// mapEnv is an environment of env's variables only.
func mapEnv(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

// waitFor waits (bounded) until the live registry satisfies ok, watching
// Changed rather than polling.
func waitFor(t *testing.T, l *Live, what string, ok func(*Registry) bool) *Registry {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		ch := l.Changed()
		if r := l.Registry(); ok(r) {
			return r
		}
		select {
		case <-ch:
		case <-timeout:
			t.Fatalf("the registry never %s; it has %v", what, names(l.Registry()))
		}
	}
}

func names(r *Registry) []string {
	var out []string
	for _, s := range r.List() {
		out = append(out, s.Name)
	}
	return out
}

func has(name string) func(*Registry) bool {
	return func(r *Registry) bool { _, ok := r.Lookup(name); return ok }
}

// invoke runs one attempt of the named tool of the current registry.
func invokeMCP(t *testing.T, r *Registry, name, args string) dispatch.Outcome {
	t.Helper()
	s, ok := r.Lookup(name)
	if !ok {
		t.Fatalf("no tool %q; the registry has %v", name, names(r))
	}
	ctx := WithCallContext(context.Background(), CallContext{SessionID: "s", TurnID: "t"})
	return s.Impl.Invoke(ctx, dispatch.Call{ID: "c1", Name: name, Arguments: json.RawMessage(args)}, nil)
}

func mcpConfig(url, extra string) string {
	return fmt.Sprintf("tools:\n  - mcp:\n      url: %s\n%s", url, extra)
}

func TestMCPImportsTools(t *testing.T) {
	t.Parallel()
	rig := newMCPRig(t, "")
	yes := true
	rig.addTool(&mcp.Tool{Name: "search", Description: "Search the docs",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args struct{ Q string }
			_ = json.Unmarshal(req.Params.Arguments, &args)
			return &mcp.CallToolResult{StructuredContent: map[string]any{"hits": []string{args.Q + "-1", args.Q + "-2"}},
				Content: []mcp.Content{&mcp.TextContent{Text: "ignored when structured"}}}, nil
		})
	rig.addTool(&mcp.Tool{Name: "note", Annotations: &mcp.ToolAnnotations{IdempotentHint: true, DestructiveHint: &yes}}, textResult("first", "second"))
	rig.addTool(&mcp.Tool{Name: "fails"}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "disk full"}}}, nil
	})
	rig.addTool(&mcp.Tool{Name: "picture"}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "a dot"}, &mcp.ImageContent{Data: []byte("PNG"), MIMEType: "image/png"}}}, nil
	})
	rig.addTool(&mcp.Tool{Name: "broken"}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, errors.New("the backend is on fire")
	})
	rig.addTool(&mcp.Tool{Name: "dotted.name"}, textResult("never"))
	rig.addTool(&mcp.Tool{Name: strings.Repeat("x", 60)}, textResult("too long once prefixed"))
	rig.addTool(&mcp.Tool{Name: "bad_schema", InputSchema: json.RawMessage(`{"type":"object","properties":{"a":{"$ref":"https://schemas.example/a.json"}}}`)}, textResult("never"))

	for _, trust := range []bool{true, false} {
		t.Run(fmt.Sprintf("trust_annotations=%v", trust), func(t *testing.T) {
			t.Parallel()
			l, logs := openLive(t, mcpConfig(rig.url(), fmt.Sprintf("      prefix: docs_\n      trust_annotations: %v\nbuiltin: [echo]\n", trust)), nil)
			r := l.Registry()
			want := []string{"docs_broken", "docs_fails", "docs_note", "docs_picture", "docs_search", "echo"}
			if got := names(r); !slices.Equal(got, want) {
				t.Fatalf("tools %v, want %v", got, want)
			}
			for _, skipped := range []string{"dotted.name", strings.Repeat("x", 60), "bad_schema"} {
				if !strings.Contains(logs.String(), "mcp_tool="+skipped) {
					t.Errorf("no warning about the left-out tool %q:\n%s", skipped, logs.String())
				}
			}
			search, _ := r.Lookup("docs_search")
			note, _ := r.Lookup("docs_note")
			wantRead := dispatch.EffectWrite
			if trust {
				wantRead = dispatch.EffectRead
			}
			if search.Effect != wantRead || search.Idempotent != trust || search.Description != "Search the docs" {
				t.Errorf("docs_search: effect %v idempotent %v description %q", search.Effect, search.Idempotent, search.Description)
			}
			if note.Effect != dispatch.EffectWrite || note.Idempotent != trust {
				t.Errorf("docs_note: effect %v idempotent %v", note.Effect, note.Idempotent)
			}
			if search.Retry != defaultRetry {
				t.Errorf("docs_search retry %+v, want the defaults", search.Retry)
			}
			if err := search.Validate(json.RawMessage(`{"q":1}`)); !errors.Is(err, ErrInvalidArguments) {
				t.Errorf("the server's schema is not enforced: %v", err)
			}

			out := invokeMCP(t, r, "docs_search", `{"q":"go"}`)
			if out.Status != dispatch.StatusOK || !out.JSON || string(out.Output) != `{"hits":["go-1","go-2"]}` {
				t.Errorf("structured result: %+v %s", out, out.Output)
			}
			out = invokeMCP(t, r, "docs_note", `{}`)
			if out.Status != dispatch.StatusOK || out.JSON || string(out.Output) != "first\nsecond" {
				t.Errorf("text result: %+v %q", out, out.Output)
			}
			out = invokeMCP(t, r, "docs_fails", `{}`)
			if out.Status != dispatch.StatusError || out.Err.Code != CodeToolError || out.Err.Message != "disk full" || out.Err.Retryable {
				t.Errorf("isError result: %+v %+v", out, out.Err)
			}
			out = invokeMCP(t, r, "docs_picture", `{}`)
			if out.Status != dispatch.StatusOK || !out.JSON || !strings.Contains(string(out.Output), `"type":"image"`) || !strings.Contains(string(out.Output), `"text":"a dot"`) {
				t.Errorf("mixed content: %+v %s", out, out.Output)
			}
			out = invokeMCP(t, r, "docs_broken", `{}`)
			if out.Status != dispatch.StatusError || out.Err.Code != CodeToolUnavailable || !out.Err.Retryable || !strings.Contains(out.Err.Message, "on fire") {
				t.Errorf("a protocol error: %+v %+v", out, out.Err)
			}
		})
	}
	t.Cleanup(func() { // after the subtests
		rig.mu.Lock()
		defer rig.mu.Unlock()
		if !slices.Contains(rig.metas, "s/t/c1") {
			t.Errorf("the idempotency key did not reach the server: %q", rig.metas)
		}
	})
}

func TestMCPHeaders(t *testing.T) {
	t.Parallel()
	rig := newMCPRig(t, "s3cret")
	rig.addTool(&mcp.Tool{Name: "ping"}, textResult("pong"))
	cfg := mcpConfig(rig.url(), "      headers: {Authorization: \"Bearer ${MCP_TOKEN}\"}\n")

	l, _ := openLive(t, cfg, map[string]string{"MCP_TOKEN": "s3cret"})
	if out := invokeMCP(t, l.Registry(), "ping", `{}`); string(out.Output) != "pong" {
		t.Fatalf("ping: %+v", out)
	}

	// A wrong token: turnd starts, without the server's tools, and says why
	// without the token.
	bad, logs := openLive(t, cfg, map[string]string{"MCP_TOKEN": "wrong"})
	if got := names(bad.Registry()); len(got) != 0 {
		t.Errorf("tools %v from a server that refused the token", got)
	}
	if s := logs.String(); !strings.Contains(s, "MCP server unreachable") || strings.Contains(s, "wrong") || strings.Contains(s, "s3cret") {
		t.Errorf("the log should report the refusal without the token:\n%s", s)
	}
	rig.mu.Lock()
	defer rig.mu.Unlock()
	if !slices.Contains(rig.auths, "Bearer s3cret") || !slices.Contains(rig.auths, "Bearer wrong") {
		t.Errorf("the expanded header did not reach the server: %q", rig.auths)
	}
}

func TestMCPListChanged(t *testing.T) {
	t.Parallel()
	rig := newMCPRig(t, "")
	rig.addTool(&mcp.Tool{Name: "one"}, textResult("1"))
	l, _ := openLive(t, mcpConfig(rig.url(), ""), nil)
	before := l.Registry()
	if got := names(before); !slices.Equal(got, []string{"one"}) {
		t.Fatalf("tools %v", got)
	}

	rig.addTool(&mcp.Tool{Name: "two"}, textResult("2"))
	r := waitFor(t, l, "gained the added tool", has("two"))
	if out := invokeMCP(t, r, "two", `{}`); string(out.Output) != "2" {
		t.Errorf("two: %+v", out)
	}

	rig.server.RemoveTools("one")
	waitFor(t, l, "lost the removed tool", func(r *Registry) bool { _, ok := r.Lookup("one"); return !ok })
	// A registry taken before the change keeps the tool; the server now
	// answers the call with a protocol error: tool_unavailable, retryable.
	out := invokeMCP(t, before, "one", `{}`)
	if out.Status != dispatch.StatusError || out.Err.Code != CodeToolUnavailable || !out.Err.Retryable || !strings.Contains(out.Err.Message, "protocol error") {
		t.Errorf("a call to a tool the server removed: %+v %+v", out, out.Err)
	}
}

func TestMCPServerDownAtStart(t *testing.T) {
	t.Parallel()
	addr := testnet.ClosedAddr(t)

	l, logs := openLive(t, mcpConfig("http://"+addr+"/mcp", "")+"builtin: [echo]\n", nil)
	if got := names(l.Registry()); !slices.Equal(got, []string{"echo"}) {
		t.Fatalf("tools %v while the server is down, want only echo", got)
	}
	if !strings.Contains(logs.String(), "MCP server unreachable") {
		t.Errorf("no warning about the unreachable server:\n%s", logs.String())
	}

	rig := &mcpRig{tb: t}
	rig.server = mcp.NewServer(&mcp.Implementation{Name: "late", Version: "1"}, nil)
	rig.addTool(&mcp.Tool{Name: "late"}, textResult("here now"))
	rig.start(addr)
	t.Cleanup(rig.stop)
	r := waitFor(t, l, "gained the late server's tool", has("late"))
	if out := invokeMCP(t, r, "late", `{}`); string(out.Output) != "here now" {
		t.Errorf("late: %+v", out)
	}
}

func TestMCPServerGoesAway(t *testing.T) {
	t.Parallel()
	rig := newMCPRig(t, "")
	rig.addTool(&mcp.Tool{Name: "work"}, textResult("done"))
	// The URL carries a secret (and a password): neither may show.
	secretURL := strings.Replace(rig.url(), "://", "://user:pw-${PW}@", 1) + "?key=${KEY}"
	l, logs := openLive(t, mcpConfig(secretURL, "      timeout: 5s\n"), map[string]string{"KEY": "sekrit", "PW": "hush"})
	if out := invokeMCP(t, l.Registry(), "work", `{}`); string(out.Output) != "done" {
		t.Fatalf("work: %+v", out)
	}

	rig.stop()
	out := invokeMCP(t, l.Registry(), "work", `{}`)
	if out.Status != dispatch.StatusError || out.Err.Code != CodeToolUnavailable || !out.Err.Retryable {
		t.Fatalf("a call while the server is down: %+v %+v", out, out.Err)
	}
	for _, secret := range []string{"/mcp", "sekrit", "hush", "user"} {
		if strings.Contains(out.Err.Message, secret) {
			t.Errorf("the message shows %q of the server's URL: %s", secret, out.Err.Message)
		}
	}
	t.Cleanup(func() {
		for _, secret := range []string{"sekrit", "hush"} {
			if strings.Contains(logs.String(), secret) {
				t.Errorf("the log shows %q of the server's URL:\n%s", secret, logs.String())
			}
		}
	})
	if !has("work")(l.Registry()) {
		t.Errorf("the tool left the registry while its server is down")
	}

	// The server comes back (a new process: the old session is unknown).
	rig.start(rig.addr)
	deadline := time.Now().Add(30 * time.Second)
	for {
		out = invokeMCP(t, l.Registry(), "work", `{}`)
		if out.Status == dispatch.StatusOK {
			break
		}
		if !out.Err.Retryable || time.Now().After(deadline) {
			t.Fatalf("after the server came back: %+v %+v", out, out.Err)
		}
		// Each failed attempt waits for a reconnection attempt: no spin.
	}
	if string(out.Output) != "done" {
		t.Errorf("work: %+v", out)
	}
}

func TestMCPTimeout(t *testing.T) {
	t.Parallel()
	rig := newMCPRig(t, "")
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) }) // before the rig stops
	rig.addTool(&mcp.Tool{Name: "slow"}, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		entered <- struct{}{}
		select {
		case <-ctx.Done():
		case <-release:
		}
		return textResult("late")(ctx, nil)
	})
	l, _ := openLive(t, mcpConfig(rig.url(), "      timeout: 300ms\n"), nil)
	out := invokeMCP(t, l.Registry(), "slow", `{}`)
	<-entered
	if out.Status != dispatch.StatusError || out.Err.Code != CodeToolUnavailable || !out.Err.Retryable || !strings.Contains(out.Err.Message, "300ms") {
		t.Errorf("a call past the timeout: %+v %+v", out, out.Err)
	}
}

func TestLiveReload(t *testing.T) {
	t.Parallel()
	rig := newMCPRig(t, "")
	rig.countInits()
	release := make(chan struct{})
	entered := make(chan struct{})
	rig.addTool(&mcp.Tool{Name: "hold"}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		close(entered)
		<-release
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "held"}}}, nil
	})
	dir := t.TempDir()
	path := writeConfig(t, dir, "builtin: [echo]\n")
	logs := &logBuffer{}
	l, err := Open(context.Background(), path, Options{Logger: slog.New(slog.NewTextHandler(logs, nil)), mcpStreamRetries: -1, mcpBackoff: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	ctx := context.Background()
	first := l.Registry()

	// Add an MCP server and change echo's name.
	writeConfig(t, dir, mcpConfig(rig.url(), "      prefix: a_\n")+"  - name: shout\n    builtin: echo\n")
	if err := l.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if got := names(l.Registry()); !slices.Equal(got, []string{"a_hold", "shout"}) {
		t.Fatalf("after the reload: %v", got)
	}
	if got := names(first); !slices.Equal(got, []string{"echo"}) {
		t.Errorf("the first registry changed: %v", got)
	}

	// A bad config keeps the registry.
	before := l.Registry()
	writeConfig(t, dir, "tools:\n  - mcp: {url: ftp://x}\n")
	err = l.Reload(ctx)
	if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "tools.yaml:2: tools[0]: mcp.url must be an absolute http or https URL") {
		t.Errorf("reload of a bad config: %v", err)
	}
	if l.Registry() != before {
		t.Errorf("a failed reload replaced the registry")
	}

	// Another prefix, same server: the session is kept.
	writeConfig(t, dir, mcpConfig(rig.url(), "      prefix: b_\n"))
	if err := l.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if got := names(l.Registry()); !slices.Equal(got, []string{"b_hold"}) {
		t.Fatalf("after the prefix changed: %v", got)
	}
	if inits, _ := rig.counts(); inits != 1 {
		t.Errorf("%d initialize requests; a reload that keeps url and headers should keep the session", inits)
	}

	// A call in flight when a reload removes its server finishes; then the
	// session is closed.
	done := make(chan dispatch.Outcome)
	go func() { done <- invokeMCP(t, l.Registry(), "b_hold", `{}`) }()
	<-entered
	writeConfig(t, dir, "builtin: [now]\n")
	if err := l.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if got := names(l.Registry()); !slices.Equal(got, []string{"now"}) {
		t.Fatalf("after removing the server: %v", got)
	}
	if _, deletes := rig.counts(); deletes != 0 {
		t.Errorf("the session was closed while a call was in flight")
	}
	close(release)
	if out := <-done; out.Status != dispatch.StatusOK || string(out.Output) != "held" {
		t.Errorf("the call in flight during the reload: %+v %+v", out, out.Err)
	}
	if _, deletes := rig.counts(); deletes != 1 {
		t.Errorf("%d DELETEs after the last call of the removed server; want its session closed", deletes)
	}
	l.Close()
	if err := l.Reload(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("reload after Close: %v", err)
	}
}

func TestMCPConfigErrors(t *testing.T) {
	t.Parallel()
	env := func(k string) (string, bool) { return "v", k == "SET" }
	tests := []struct {
		name, cfg string
		want      []string
	}{
		{"url missing", "tools:\n  - mcp: {prefix: x_}\n", []string{"line 2: tools[0]: mcp.url is required"}},
		{"empty mcp", "tools:\n  - mcp:\n", []string{"line 2: tools[0]: mcp.url is required"}},
		{"mcp not a mapping", "tools:\n  - mcp: [a]\n", []string{"line 2", "sequence was used where mapping is expected"}},
		{"url scheme", "tools:\n  - mcp:\n      url: ftp://host/mcp\n", []string{`line 3: tools[0]: mcp.url must be an absolute http or https URL (scheme is "ftp")`}},
		{"url env unset", "tools:\n  - mcp:\n      url: http://${NOPE}/mcp\n", []string{"line 3: tools[0]: mcp.url: environment variable NOPE is not set"}},
		{"name and effect", "tools:\n  - name: x\n    effect: read\n    mcp: {url: http://h/mcp}\n", []string{
			"line 2: tools[0]: name cannot be set in an mcp entry: the MCP server names its tools",
			"line 3: tools[0]: effect cannot be set in an mcp entry: an imported tool is read only when",
		}},
		{"http too", "tools:\n  - mcp: {url: http://h/mcp}\n    http: {url: http://h/x}\n", []string{"line 3: tools[0]: http cannot be set in an mcp entry: an entry has exactly one implementation"}},
		{"bad prefix", "tools:\n  - mcp:\n      url: http://h/mcp\n      prefix: a.b\n", []string{`line 4: tools[0]: mcp.prefix "a.b" must match`}},
		{"long prefix", "tools:\n  - mcp:\n      url: http://h/mcp\n      prefix: " + strings.Repeat("p", 64) + "\n", []string{"line 4: tools[0]: mcp.prefix"}},
		{"reserved header", "tools:\n  - mcp:\n      url: http://h/mcp\n      headers:\n        mcp-session-id: x\n", []string{"line 5: tools[0]: mcp.headers: Mcp-Session-Id is set by turnd"}},
		{"header env unset", "tools:\n  - mcp:\n      url: http://h/mcp\n      headers: {X-Key: \"${NOPE}\"}\n", []string{"line 4: tools[0]: mcp.headers.X-Key: environment variable NOPE is not set"}},
		{"timeout", "tools:\n  - mcp:\n      url: http://h/mcp\n      timeout: 10\n", []string{`line 4: tools[0]: mcp.timeout "10" is not a duration`}},
		{"trust not bool", "tools:\n  - mcp:\n      url: http://h/mcp\n      trust_annotations: maybe\n", []string{"line 4", "trust_annotations: expected a boolean"}},
		{"unknown key", "tools:\n  - mcp:\n      url: http://h/mcp\n      token: x\n", []string{"line 4", `unknown field "token"`}},
		{"retry", "tools:\n  - mcp: {url: http://h/mcp}\n    retry: {max_attempts: 0}\n", []string{"line 3: tools[0]: retry.max_attempts: must be between 1 and 20"}},
		{"Parse refuses mcp", "tools:\n  - mcp: {url: \"http://${SET}/mcp\"}\n", []string{"line 2: tools[0]: an mcp entry imports tools that change while turnd runs: open this config with tool.Open"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tt.cfg), Options{Env: env})
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Parse: %v, want a config error", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			// Open reports the same problems (but for Parse's refusal).
			if tt.name == "Parse refuses mcp" {
				return
			}
			_, oerr := Open(context.Background(), writeConfig(t, t.TempDir(), tt.cfg), Options{Env: env})
			w := linePrefix.ReplaceAllString(tt.want[len(tt.want)-1], ":$1: ")
			if !errors.Is(oerr, ErrInvalidConfig) || !strings.Contains(oerr.Error(), w) {
				t.Errorf("Open: %v, want it to contain %q", oerr, w)
			}
		})
	}
}

// linePrefix is how Parse's errors start; Open's name the file instead.
var linePrefix = regexp.MustCompile(`^line (\d+): `)

func TestMCPNameConflict(t *testing.T) {
	t.Parallel()
	rig := newMCPRig(t, "")
	rig.addTool(&mcp.Tool{Name: "echo"}, textResult("from mcp"))
	rig.addTool(&mcp.Tool{Name: "other"}, textResult("other"))
	var secondHits atomic.Int32
	rig2 := newMCPRig(t, "")
	rig2.addTool(&mcp.Tool{Name: "other"}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		secondHits.Add(1)
		return nil, nil
	})
	cfg := mcpConfig(rig.url(), "") + "  - mcp: {url: \"" + rig2.url() + "\"}\nbuiltin: [echo]\n"
	l, logs := openLive(t, cfg, nil)
	if got := names(l.Registry()); !slices.Equal(got, []string{"echo", "other"}) {
		t.Fatalf("tools %v", got)
	}
	// The builtin keeps its name; the first server wins over the second.
	if out := invokeMCP(t, l.Registry(), "echo", `{"a":1}`); string(out.Output) != `{"a":1}` {
		t.Errorf("echo is not the builtin: %+v", out)
	}
	if out := invokeMCP(t, l.Registry(), "other", `{}`); string(out.Output) != "other" || secondHits.Load() != 0 {
		t.Errorf("other is not the first server's: %+v", out)
	}
	if n := strings.Count(logs.String(), "another tool has its name"); n < 2 {
		t.Errorf("%d warnings about taken names, want one per conflict:\n%s", n, logs.String())
	}
}

// TestExampleMCPBlock: the commented mcp block of examples/turnd.yaml is a
// valid entry once uncommented as it says.
func TestExampleMCPBlock(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../examples/turnd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	inBlock := false
	for _, line := range strings.Split(string(data), "\n") {
		switch {
		case line == "tools: []":
			line = "tools:"
		case strings.HasPrefix(line, "#  - mcp:"):
			inBlock = true
		}
		if inBlock && strings.HasPrefix(line, "#") {
			line = line[1:]
		}
		b.WriteString(line + "\n")
	}
	env := func(k string) (string, bool) { return "token", k == "DOCS_MCP_TOKEN" }
	l, specs, err := parse("turnd.yaml", []byte(b.String()), Options{Env: env})
	if err != nil {
		t.Fatalf("the uncommented example does not load: %v\n%s", err, b.String())
	}
	if len(l.mcp) != 1 || len(specs) != 4 {
		t.Fatalf("the example has %d mcp entries and %d tools, want 1 and 4:\n%s", len(l.mcp), len(specs), b.String())
	}
	if src := l.mcp[0]; src.prefix != "docs_" || src.trust || src.header.Get("Authorization") != "Bearer token" {
		t.Errorf("the example's entry: %+v", src)
	}
}

func TestOpenWithoutFile(t *testing.T) {
	t.Parallel()
	l, err := Open(context.Background(), "", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.Reload(context.Background()); err != nil || len(l.Registry().List()) != 0 {
		t.Errorf("an empty config: reload %v, tools %v", err, names(l.Registry()))
	}
	if _, err := Open(context.Background(), filepath.Join(t.TempDir(), "missing.yaml"), Options{}); err == nil || !strings.Contains(err.Error(), "reading config") {
		t.Errorf("Open of a missing file: %v", err)
	}
}

// TestLiveCloseWithCallInFlight: Close does not wait for a call that the
// server holds; the call ends with a retryable error.
func TestLiveCloseWithCallInFlight(t *testing.T) {
	t.Parallel()
	rig := newMCPRig(t, "")
	entered := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	releaseAll := func() { once.Do(func() { close(release) }) }
	t.Cleanup(releaseAll)
	rig.addTool(&mcp.Tool{Name: "stuck"}, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		close(entered)
		select {
		case <-ctx.Done():
		case <-release:
		}
		return textResult("late")(ctx, nil)
	})
	l, _ := openLive(t, mcpConfig(rig.url(), ""), nil)
	done := make(chan dispatch.Outcome)
	go func() { done <- invokeMCP(t, l.Registry(), "stuck", `{}`) }()
	<-entered
	closed := make(chan struct{})
	go func() { l.Close(); close(closed) }()
	select {
	case out := <-done:
		if out.Status != dispatch.StatusError || out.Err.Code != CodeToolUnavailable || !out.Err.Retryable {
			t.Errorf("a call cut by Close: %+v %+v", out, out.Err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the call in flight did not end when the Live closed")
	}
	// The server may now answer (turnd's DELETE of the session waits on
	// the server, up to the SDK's bound, until its handler returns).
	releaseAll()
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("Close waited for the server to answer a call")
	}
	if out := invokeMCP(t, l.Registry(), "stuck", `{}`); out.Status != dispatch.StatusError || out.Err.Code != CodeToolUnavailable {
		t.Errorf("a call after Close: %+v %+v", out, out.Err)
	}
}

func TestMCPOutcome(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		res     *mcp.CallToolResult
		status  dispatch.Status
		code    string
		output  string
		jsonOut bool
	}{
		{"empty content", &mcp.CallToolResult{}, dispatch.StatusOK, "", "", false},
		{"structured wins", &mcp.CallToolResult{StructuredContent: []int{1, 2}, Content: []mcp.Content{&mcp.TextContent{Text: "x"}}}, dispatch.StatusOK, "", "[1,2]", true},
		{"structured primitive", &mcp.CallToolResult{StructuredContent: 7}, dispatch.StatusOK, "", "7", true},
		{"error without text", &mcp.CallToolResult{IsError: true}, dispatch.StatusError, CodeToolError, "", false},
		{"error with structured only", &mcp.CallToolResult{IsError: true, StructuredContent: map[string]int{"code": 3}}, dispatch.StatusError, CodeToolError, "", false},
		{"too large", &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("y", 65)}}}, dispatch.StatusError, CodeOutputTooLarge, "", false},
		{"at the cap", &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("y", 64)}}}, dispatch.StatusOK, "", strings.Repeat("y", 64), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out := mcpOutcome(tt.res, 64)
			if out.Status != tt.status {
				t.Fatalf("status %v, want %v (%+v)", out.Status, tt.status, out.Err)
			}
			if tt.code != "" {
				if out.Err.Code != tt.code || out.Err.Message == "" || out.Err.Retryable {
					t.Errorf("error %+v, want code %s with a message, not retryable", out.Err, tt.code)
				}
				return
			}
			if string(out.Output) != tt.output || out.JSON != tt.jsonOut {
				t.Errorf("output %q (json %v), want %q (json %v)", out.Output, out.JSON, tt.output, tt.jsonOut)
			}
		})
	}
}

// TestMCPConcurrentCalls: read tools run concurrently on one session.
func TestMCPConcurrentCalls(t *testing.T) {
	t.Parallel()
	rig := newMCPRig(t, "")
	const n = 16
	var arrived sync.WaitGroup
	arrived.Add(n)
	all := make(chan struct{})
	go func() { arrived.Wait(); close(all) }()
	rig.addTool(&mcp.Tool{Name: "barrier", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			arrived.Done()
			<-all // every call is in flight at once
			return &mcp.CallToolResult{StructuredContent: json.RawMessage(req.Params.Arguments)}, nil
		})
	l, _ := openLive(t, mcpConfig(rig.url(), "      trust_annotations: true\n"), nil)
	r := l.Registry()
	outs := make([]dispatch.Outcome, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { outs[i] = invokeMCP(t, r, "barrier", fmt.Sprintf(`{"i":%d}`, i)) })
	}
	wg.Wait()
	for i, out := range outs {
		if want := fmt.Sprintf(`{"i":%d}`, i); string(out.Output) != want {
			t.Errorf("call %d: %+v %s, want %s", i, out, out.Output, want)
		}
	}
}

// TestMCPRedact: errors that quote the server's URL (net/http's do, with
// the password masked) lose it before they reach the model or the log.
func TestMCPRedact(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		"http://" + testnet.ClosedAddr(t) + "/mcp/tenant-7?key=sekrit",
		"http://user:hush@" + testnet.ClosedAddr(t) + "/mcp?key=sekrit",
	} {
		s := &mcpServer{url: raw, safeURL: "http://host"}
		_, err := http.Get(raw)
		if err == nil {
			t.Fatalf("GET %s succeeded", raw)
		}
		got := s.redact(fmt.Errorf("connecting: %w", err))
		if !strings.Contains(got, "http://host") || strings.Contains(got, "sekrit") || strings.Contains(got, "hush") || strings.Contains(got, "tenant-7") {
			t.Errorf("redact(%v) = %q", err, got)
		}
	}
}

// TestMCPContentJSON: content other than text reaches the model as MCP
// writes it, binary data left out.
func TestMCPContentJSON(t *testing.T) {
	t.Parallel()
	res := &mcp.CallToolResult{Content: []mcp.Content{
		&mcp.TextContent{Text: "see"},
		&mcp.ImageContent{Data: []byte("PNGDATA"), MIMEType: "image/png"},
		&mcp.AudioContent{Data: []byte("WAV"), MIMEType: "audio/wav"},
		&mcp.ResourceLink{URI: "file:///a.txt", Name: "a", MIMEType: "text/plain"},
		&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "mem://t", MIMEType: "text/plain", Text: "inline text"}},
		&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "mem://b", MIMEType: "application/zip", Blob: []byte("ZIPZIPZIP")}},
	}}
	out := mcpOutcome(res, 1<<20)
	if out.Status != dispatch.StatusOK || !out.JSON {
		t.Fatalf("%+v %+v", out, out.Err)
	}
	want := `[{"type":"text","text":"see"},` +
		`{"type":"image","mimeType":"image/png","omitted":"7 bytes of image data, left out: turnd passes tool results to the model as text"},` +
		`{"type":"audio","mimeType":"audio/wav","omitted":"3 bytes of audio data, left out: turnd passes tool results to the model as text"},` +
		`{"type":"resource_link","mimeType":"text/plain","uri":"file:///a.txt","name":"a"},` +
		`{"type":"resource","resource":{"uri":"mem://t","mimeType":"text/plain","text":"inline text"}},` +
		`{"type":"resource","resource":{"uri":"mem://b","mimeType":"application/zip","omitted":"9 bytes of blob data, left out: turnd passes tool results to the model as text"}}]`
	if string(out.Output) != want {
		t.Errorf("output\n%s\nwant\n%s", out.Output, want)
	}
	for _, secret := range []string{"PNGDATA", "UE5HREFUQQ", "WklQWklQWklQ"} {
		if strings.Contains(string(out.Output), secret) {
			t.Errorf("binary data %q reached the output", secret)
		}
	}

	// structuredContent that mirrors binary content loses to the content.
	res = &mcp.CallToolResult{StructuredContent: map[string]string{"data": "UE5HREFUQQ=="},
		Content: []mcp.Content{&mcp.ImageContent{Data: []byte("PNGDATA"), MIMEType: "image/png"}}}
	out = mcpOutcome(res, 1<<20)
	if out.Status != dispatch.StatusOK || !out.JSON || strings.Contains(string(out.Output), "UE5H") || !strings.Contains(string(out.Output), `"omitted":"7 bytes of image data`) {
		t.Errorf("structured content beside an image: %+v %s", out, out.Output)
	}
}
