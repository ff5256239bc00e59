package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// holdServer is an HTTP tool whose calls wait until the test releases
// them, so that they are in flight when the config is reloaded.
type holdServer struct {
	*httptest.Server
	arrived    chan string // the call id of each request, as it arrives
	release    chan struct{}
	releaseAll func() // lets every held call answer
}

func newHoldServer(t *testing.T) *holdServer {
	t.Helper()
	h := &holdServer{arrived: make(chan string, 8), release: make(chan struct{})}
	var once sync.Once
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			CallID string `json:"call_id"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		h.arrived <- req.CallID
		select {
		case <-h.release:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"output":"held"}`)
	}))
	t.Cleanup(func() {
		once.Do(func() { close(h.release) })
		h.Close()
	})
	h.releaseAll = func() { once.Do(func() { close(h.release) }) }
	return h
}

// newMCPServer serves an MCP server (the official SDK's) on loopback with
// one read-only tool, lookup, which answers structured content. stop ends
// it early (it also ends with the test).
func newMCPServer(t *testing.T) (url string, stop func()) {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "docs", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{
		Name: "lookup", Description: "Looks a word up",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args struct{ Q string }
		_ = json.Unmarshal(req.Params.Arguments, &args)
		return &mcp.CallToolResult{StructuredContent: map[string]string{"word": args.Q, "meaning": "found"}}, nil
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	var once sync.Once
	stop = func() {
		once.Do(func() {
			srv.CloseClientConnections()
			srv.Close()
			for ss := range s.Sessions() {
				_ = ss.Close()
			}
		})
	}
	t.Cleanup(stop)
	return srv.URL + "/mcp", stop
}

// toolSet lists /v1/tools: name → effect.
func (p *proc) toolSet() map[string]string {
	p.t.Helper()
	var out struct {
		Tools []struct {
			Name   string `json:"name"`
			Effect string `json:"effect"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(p.must(http.StatusOK, http.MethodGet, "/v1/tools", nil), &out); err != nil {
		p.t.Fatal(err)
	}
	m := map[string]string{}
	for _, t := range out.Tools {
		m[t.Name] = t.Effect
	}
	return m
}

// awaitTools polls /v1/tools until it lists exactly names (bounded: the
// reload happens in another process).
func (p *proc) awaitTools(names ...string) map[string]string {
	p.t.Helper()
	var set map[string]string
	poll(p.t, settleTimeout, func() error {
		set = p.toolSet()
		if got := slices.Sorted(maps.Keys(set)); !slices.Equal(got, names) {
			return fmt.Errorf("/v1/tools lists %v, want %v", got, names)
		}
		return nil
	})
	return set
}

// TestReloadOnSIGHUP: SIGHUP swaps the tool config under running turns.
// Turns in flight finish on the tools they started with; new turns see the
// new set, MCP tools included; a bad config is logged and changes nothing.
func TestReloadOnSIGHUP(t *testing.T) {
	t.Parallel()
	hold := newHoldServer(t)
	mcpURL, _ := newMCPServer(t)
	dir := t.TempDir()
	cfg := writeFile(t, dir, "tools.yaml", "builtin: [echo]\ntools:\n  - name: hold\n    http: {url: \""+hold.URL+"\"}\n")
	p := startTurnd(t, procOptions{args: []string{"--config", cfg, "--data", filepath.Join(dir, "turnd.db")}})
	p.awaitTools("echo", "hold")

	// Two turns in flight on hold: one asynchronous, one a synchronous POST.
	p.must(http.StatusAccepted, http.MethodPost, "/v1/sessions/s/turns",
		`{"id":"async","calls":[{"id":"a1","name":"hold"}]}`, "Prefer", "respond-async")
	answer := p.postAsync(t, `{"id":"sync","calls":[{"id":"b1","name":"hold"}]}`)
	arrived := []string{<-hold.arrived, <-hold.arrived}
	slices.Sort(arrived)
	if !slices.Equal(arrived, []string{"a1", "b1"}) {
		t.Fatalf("hold saw calls %v", arrived)
	}

	// The new config drops hold and echo, adds now and an MCP server.
	writeFile(t, dir, "tools.yaml", "builtin: [now]\ntools:\n  - mcp:\n      url: "+mcpURL+"\n      prefix: docs_\n      trust_annotations: true\n")
	p.signal(syscall.SIGHUP)
	set := p.awaitTools("docs_lookup", "now")
	if set["docs_lookup"] != "read" {
		t.Errorf("docs_lookup has effect %q; the server says readOnlyHint and the config trusts it", set["docs_lookup"])
	}
	waitLog(t, p, `"tool config reloaded"`)

	// The turns in flight finish on the tool they started with.
	hold.releaseAll()
	tj, data := p.awaitSettled("s", "async")
	if tj.Status != "completed" || tj.result(t, "a1").Status != "ok" || string(tj.result(t, "a1").Output) != `"held"` {
		t.Errorf("the asynchronous turn in flight at the reload: %s", data)
	}
	syncCode, syncBody, syncErr := answer()
	if syncErr != nil || syncCode != http.StatusOK {
		t.Fatalf("the synchronous POST in flight at the reload: status %d, err %v, body %s", syncCode, syncErr, syncBody)
	}
	if st := decode[turnJSON](t, syncBody); st.Status != "completed" || string(st.result(t, "b1").Output) != `"held"` {
		t.Errorf("the synchronous POST answered %s", syncBody)
	}

	// New turns: the removed tool is unknown, the MCP tool runs.
	data = p.must(http.StatusOK, http.MethodPost, "/v1/sessions/s/turns",
		`{"id":"after","calls":[{"id":"c1","name":"hold"},{"id":"c2","name":"docs_lookup","arguments":{"q":"turn"}}]}`)
	after := decode[turnJSON](t, data)
	if r := after.result(t, "c1"); r.Error == nil || r.Error.Code != "unknown_tool" {
		t.Errorf("a call to the removed tool: %+v", r)
	}
	if r := after.result(t, "c2"); r.Status != "ok" || string(r.Output) != `{"meaning":"found","word":"turn"}` {
		t.Errorf("a call to the MCP tool: %s", data)
	}

	// A config that does not load changes nothing.
	writeFile(t, dir, "tools.yaml", "tools:\n  - mcp: {url: ftp://nowhere}\n")
	p.signal(syscall.SIGHUP)
	waitLog(t, p, `"tool config reload failed; the current tools stay"`)
	if !strings.Contains(p.stderr.String(), "mcp.url must be an absolute http or https URL") {
		t.Errorf("the log does not say what is wrong with the config:\n%s", p.stderr.String())
	}
	p.awaitTools("docs_lookup", "now")

	p.signal(syscall.SIGTERM)
	if code := p.waitExit(); code != 0 {
		t.Errorf("exit code %d after SIGTERM", code)
	}
}

// TestStartsWithMCPServerDown: an unreachable MCP server does not keep
// turnd from serving; its tools are absent and the rest work.
func TestStartsWithMCPServerDown(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	down := "http://" + freeAddr(t) + "/mcp" // nothing listens there
	cfg := writeFile(t, dir, "tools.yaml", "builtin: [echo]\ntools:\n  - mcp: {url: \""+down+"\"}\n")
	p := startTurnd(t, procOptions{args: []string{"--config", cfg, "--data", filepath.Join(dir, "turnd.db")}})
	p.awaitTools("echo")
	waitLog(t, p, "MCP server unreachable")
}

// TestMCPUnavailableAfterRetries: a call to an MCP tool whose server went
// away is retried by the entry's retry policy, then answers
// tool_unavailable; the tool stays registered.
func TestMCPUnavailableAfterRetries(t *testing.T) {
	t.Parallel()
	mcpURL, stop := newMCPServer(t)
	dir := t.TempDir()
	cfg := writeFile(t, dir, "tools.yaml", "tools:\n  - mcp: {url: \""+mcpURL+"\"}\n    retry: {max_attempts: 3, initial_interval: 10ms, max_interval: 20ms}\n")
	p := startTurnd(t, procOptions{args: []string{"--config", cfg, "--data", filepath.Join(dir, "turnd.db")}})
	if set := p.awaitTools("lookup"); set["lookup"] != "write" {
		t.Errorf("lookup has effect %q without trust_annotations, want write", set["lookup"])
	}
	stop()
	data := p.must(http.StatusOK, http.MethodPost, "/v1/sessions/s/turns",
		`{"id":"t","calls":[{"id":"c","name":"lookup","arguments":{"q":"x"}}]}`)
	r := decode[turnJSON](t, data).result(t, "c")
	if r.Status != "error" || r.Error == nil || r.Error.Code != "tool_unavailable" || r.Attempts != 3 {
		t.Errorf("a call to the MCP tool of a server that went away: %s", data)
	}
	p.awaitTools("lookup")
}
