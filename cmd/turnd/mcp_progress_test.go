package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// progressServerEnv makes the test binary a stdio MCP server (see
// TestMain and progressServer).
const progressServerEnv = "TURND_TEST_MCP_PROGRESS_SERVER"

// progressServer is a stdio MCP server with three tools: work reports
// progress 1 of 2, then waits to be cancelled and records it; cancelled
// {"call"} answers once work recorded that call (by its idempotency key)
// cancelled; meta answers the traceparent of its _meta.
func progressServer() int {
	server := mcp.NewServer(&mcp.Implementation{Name: "progress-test", Version: "1"}, nil)
	obj := json.RawMessage(`{"type":"object"}`)
	var mu sync.Mutex
	done := map[string]chan struct{}{}
	record := func(key string) chan struct{} {
		mu.Lock()
		defer mu.Unlock()
		if done[key] == nil {
			done[key] = make(chan struct{})
		}
		return done[key]
	}
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	server.AddTool(&mcp.Tool{Name: "work", InputSchema: obj}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		key, _ := req.Params.Meta["io.turnd/idempotency-key"].(string)
		if token := req.Params.GetProgressToken(); token != nil {
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: 1, Total: 2, Message: "half way"})
		}
		<-ctx.Done()
		close(record(key))
		return nil, ctx.Err()
	})
	server.AddTool(&mcp.Tool{Name: "cancelled", InputSchema: obj}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args struct{ Call string }
		_ = json.Unmarshal(req.Params.Arguments, &args)
		select {
		case <-record(args.Call):
			return text("cancelled " + args.Call), nil
		case <-time.After(20 * time.Second):
			return text("no notifications/cancelled for " + args.Call), nil
		}
	})
	server.AddTool(&mcp.Tool{Name: "meta", InputSchema: obj}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		tp, _ := req.Params.Meta["traceparent"].(string)
		return text(tp), nil
	})
	if err := server.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "progress test server:", err)
	}
	return 0
}

// TestMCPProgressCancelTrace runs turnd with a stdio MCP server, on both
// stores: the server's progress shows on the turn's event stream, the
// turn's cancellation reaches the server as notifications/cancelled, and a
// call's _meta carries the trace of the turn's post.
func TestMCPProgressCancelTrace(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	eachBackend(t, func(t *testing.T, b backend) {
		_, endpoint := newOTLPReceiver(t)
		dir := t.TempDir()
		cfg := writeFile(t, dir, "tools.yaml", fmt.Sprintf("tools:\n  - mcp:\n      command: [%q]\n      env: {%s: \"1\"}\n      prefix: p_\n", exe, progressServerEnv))
		p := startTurnd(t, procOptions{args: append([]string{"--config", cfg}, b.args(t)...),
			env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + endpoint, "OTEL_BSP_SCHEDULE_DELAY=20"}})
		p.awaitTools("p_cancelled", "p_meta", "p_work")

		p.must(http.StatusAccepted, "POST", "/v1/sessions/s/turns", `{"id":"t1","calls":[{"id":"w","name":"p_work"}]}`, "Prefer", "respond-async")
		req, err := http.NewRequest("GET", p.base+"/v1/sessions/s/turns/t1/events?progress=true", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := httpClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		var kinds []string
		event := ""
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				event = line[7:]
				kinds = append(kinds, event)
			case strings.HasPrefix(line, "data: ") && event == "call_progress":
				var pr struct {
					CallID   string  `json:"call_id"`
					Progress float64 `json:"progress"`
					Total    float64 `json:"total"`
					Message  string  `json:"message"`
				}
				if err := json.Unmarshal([]byte(line[6:]), &pr); err != nil || pr.CallID != "w" || pr.Progress != 1 || pr.Total != 2 || pr.Message != "half way" {
					t.Fatalf("call_progress %s (%v)", line, err)
				}
				p.must(http.StatusOK, "POST", "/v1/sessions/s/turns/t1/cancel", nil)
			}
		}
		if got := strings.Join(kinds, " "); !strings.Contains(got, "call_progress") || !strings.HasSuffix(got, "turn_settled") {
			t.Fatalf("events %s", got)
		}
		tj, _ := p.awaitSettled("s", "t1")
		if tj.Status != "cancelled" {
			t.Fatalf("turn t1 %s, want cancelled", tj.Status)
		}
		var out turnJSON
		data := p.must(http.StatusOK, "POST", "/v1/sessions/s/turns", `{"id":"t2","calls":[{"id":"q","name":"p_cancelled","arguments":{"call":"s/t1/w"}}]}`)
		if err := json.Unmarshal(data, &out); err != nil || string(out.result(t, "q").Output) != `"cancelled s/t1/w"` {
			t.Fatalf("the server did not record notifications/cancelled: %s", data)
		}
		const traceID = "0af7651916cd43dd8448eb211c80319c"
		data = p.must(http.StatusOK, "POST", "/v1/sessions/s/turns", `{"id":"t3","calls":[{"id":"m","name":"p_meta"}]}`,
			"Traceparent", "00-"+traceID+"-b7ad6b7169203331-01")
		if err := json.Unmarshal(data, &out); err != nil || !strings.HasPrefix(string(out.result(t, "m").Output), `"00-`+traceID+`-`) {
			t.Fatalf("the stdio call's _meta has no traceparent of the turn's trace: %s", data)
		}
	})
}
