package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// stdioServerEnv names the environment variable that makes the test binary
// a stdio MCP server (see TestMain): "server" serves the tools below;
// "sleeper" only sleeps, as a process a server started and forgot.
const stdioServerEnv = "TURND_TEST_MCP_SERVER"

// stdioTestServer is the stdio MCP server of the tests: the test binary run
// again with stdioServerEnv set. With TURND_TEST_MCP_GRANDCHILD=1 it starts
// a sleeper of its own (as npx starts node), which shares its stderr and
// ignores its stdin. With TURND_TEST_MCP_STARTS set, it appends its pid to
// that file when it starts.
func stdioTestServer(mode string) int {
	if mode == "sleeper" {
		time.Sleep(time.Hour)
		return 0
	}
	fmt.Fprintln(os.Stderr, "stdio test server up")
	fmt.Fprint(os.Stderr, "a last line without a newline")
	if p := os.Getenv("TURND_TEST_MCP_STARTS"); p != "" {
		f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err == nil {
			fmt.Fprintln(f, os.Getpid())
			f.Close()
		}
	}
	child := 0
	if os.Getenv("TURND_TEST_MCP_GRANDCHILD") == "1" {
		cmd := exec.Command(os.Args[0])
		cmd.Env = []string{stdioServerEnv + "=sleeper"}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "starting the sleeper:", err)
			return 1
		}
		child = cmd.Process.Pid
	}

	server := mcp.NewServer(&mcp.Implementation{Name: "stdio-test", Version: "1"}, nil)
	obj := json.RawMessage(`{"type":"object"}`)
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	server.AddTool(&mcp.Tool{Name: "env", InputSchema: obj, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			wd, _ := os.Getwd()
			_, secret := os.LookupEnv("SECRET")
			return &mcp.CallToolResult{StructuredContent: map[string]any{
				"greeting": os.Getenv("GREETING"), "path": os.Getenv("PATH"), "cwd": wd, "secret": secret,
			}}, nil
		})
	server.AddTool(&mcp.Tool{Name: "pids", InputSchema: obj, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{StructuredContent: map[string]int{"pid": os.Getpid(), "child": child}}, nil
		})
	server.AddTool(&mcp.Tool{Name: "crash", InputSchema: obj},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			fmt.Fprintln(os.Stderr, "crashing on purpose")
			os.Exit(3)
			return nil, nil
		})
	server.AddTool(&mcp.Tool{Name: "grow", InputSchema: obj},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			server.AddTool(&mcp.Tool{Name: "grown", InputSchema: obj},
				func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return text("new"), nil })
			return text("grown"), nil
		})
	// together answers once n calls are in it at the same time: calls that
	// the client serialised would never all arrive (it gives up after 20s).
	var mu sync.Mutex
	arrived := map[int]chan struct{}{}
	count := map[int]int{}
	server.AddTool(&mcp.Tool{Name: "together", InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"},"i":{"type":"integer"}},"required":["n","i"]}`),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args struct{ N, I int }
			if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
				return nil, err
			}
			mu.Lock()
			ch, ok := arrived[args.N]
			if !ok {
				ch = make(chan struct{})
				arrived[args.N] = ch
			}
			count[args.N]++
			if count[args.N] == args.N {
				close(ch)
			}
			mu.Unlock()
			select {
			case <-ch:
				return text(fmt.Sprintf("call %d of %d, together", args.I, args.N)), nil
			case <-time.After(20 * time.Second):
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "the calls did not run at the same time"}}}, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		})
	if os.Getenv("TURND_TEST_MCP_PROGRESS") == "1" {
		addProgressTools(server)
	}
	if err := server.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "stdio test server:", err)
	}
	return 0
}
