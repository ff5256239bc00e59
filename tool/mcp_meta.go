package tool

import (
	"context"
	"crypto/rand"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// metaCarrier puts trace context into a tools/call's _meta, under the W3C
// names (traceparent, tracestate), as MCP's trace-context convention
// does; a stdio server has no headers to carry it.
type metaCarrier mcp.Meta

func (c metaCarrier) Get(key string) string {
	s, _ := c[key].(string)
	return s
}
func (c metaCarrier) Set(key, value string) { c[key] = value }
func (c metaCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// progressRoute is where the notifications/progress of one call go.
type progressRoute struct {
	to     ProgressReporter
	callID string
}

// callMeta returns meta (the call's _meta) with the trace context of ctx
// and, when ctx has a ProgressReporter, a progress token routing the
// server's notifications/progress for the call there; done forgets the
// token once the call has returned.
func (s *mcpServer) callMeta(ctx context.Context, meta mcp.Meta, callID string) (_ mcp.Meta, done func()) {
	done = func() {}
	sc := trace.SpanContextFromContext(ctx)
	rep := progressFrom(ctx)
	if !sc.IsValid() && rep == nil {
		return meta, done
	}
	if meta == nil {
		meta = mcp.Meta{}
	}
	if sc.IsValid() {
		propagation.TraceContext{}.Inject(ctx, metaCarrier(meta))
	}
	if rep != nil {
		token := "turnd-" + rand.Text() // unguessable: no other call's
		meta["progressToken"] = token
		s.progress.Store(token, progressRoute{to: rep, callID: callID})
		done = func() { s.progress.Delete(token) }
	}
	return meta, done
}

// onProgress routes a server's notifications/progress to the call whose
// token it names; a token of no call in flight (late, or made up) is
// dropped.
func (s *mcpServer) onProgress(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	token, ok := req.Params.ProgressToken.(string)
	if !ok {
		return
	}
	v, ok := s.progress.Load(token)
	if !ok {
		return
	}
	p := Progress{Progress: req.Params.Progress, Total: req.Params.Total, Message: truncateUTF8(req.Params.Message, maxProgressMessage)}
	if !validProgress(p) {
		return
	}
	route := v.(progressRoute)
	route.to.CallProgress(route.callID, p)
}

// maxProgressMessage caps the bytes of a progress message kept.
const maxProgressMessage = 512
