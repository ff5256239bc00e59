package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// addProgressTools adds the stdio test server's tools of progress, trace
// context and cancellation (with TURND_TEST_MCP_PROGRESS=1):
//
//   - meta: answers the _meta it got (traceparent, progressToken).
//   - block: reports 1/3, 2/3 and 3/3 with its request's progress token,
//     then waits until its request is cancelled, which only a
//     notifications/cancelled does while the session lives, and records
//     its call (from the idempotency key).
//   - cancelled {"call": key}: answers once block recorded that call
//     cancelled (or after 20 s, an error).
func addProgressTools(server *mcp.Server) {
	obj := json.RawMessage(`{"type":"object"}`)
	var mu sync.Mutex
	cancelled := map[string]chan struct{}{}
	recorded := func(key string) chan struct{} {
		mu.Lock()
		defer mu.Unlock()
		ch, ok := cancelled[key]
		if !ok {
			ch = make(chan struct{})
			cancelled[key] = ch
		}
		return ch
	}
	server.AddTool(&mcp.Tool{Name: "meta", InputSchema: obj},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{StructuredContent: map[string]any{
				"traceparent": req.Params.Meta["traceparent"], "progress_token": req.Params.GetProgressToken(),
			}}, nil
		})
	server.AddTool(&mcp.Tool{Name: "block", InputSchema: obj},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			key, _ := req.Params.Meta[metaIdempotencyKey].(string)
			token := req.Params.GetProgressToken()
			for i := 1; i <= 3 && token != nil; i++ {
				if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
					ProgressToken: token, Progress: float64(i), Total: 3, Message: fmt.Sprintf("step %d", i),
				}); err != nil {
					return nil, err
				}
			}
			<-ctx.Done()
			close(recorded(key))
			return nil, ctx.Err()
		})
	server.AddTool(&mcp.Tool{Name: "cancelled", InputSchema: obj},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args struct{ Call string }
			_ = json.Unmarshal(req.Params.Arguments, &args)
			select {
			case <-recorded(args.Call):
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "cancelled " + args.Call}}}, nil
			case <-time.After(20 * time.Second):
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no notifications/cancelled for " + args.Call}}}, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		})
}
