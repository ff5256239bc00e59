package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/turnd/turnd/dispatch"
)

// mcpTool calls one tool of an MCP server.
type mcpTool struct {
	srv     *mcpServer
	remote  string // the server's name for it, without the prefix
	timeout time.Duration
}

// Invoke runs one attempt: a tools/call bounded by the entry's timeout.
func (t *mcpTool) Invoke(ctx context.Context, call dispatch.Call, _ *dispatch.Attempt) dispatch.Outcome {
	actx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	defer context.AfterFunc(t.srv.calls, cancel)()
	sess, err := t.srv.acquire(actx)
	if err != nil {
		return t.failure(ctx, err, "the MCP server is unreachable")
	}
	defer t.srv.release()
	params := &mcp.CallToolParams{Name: t.remote, Arguments: normalizeArguments(call.Arguments)}
	if cc, ok := CallContextFrom(ctx); ok {
		params.Meta = mcp.Meta{metaIdempotencyKey: cc.SessionID + "/" + cc.TurnID + "/" + call.ID}
	}
	meta, done := t.srv.callMeta(ctx, params.Meta, call.ID)
	defer done()
	params.Meta = meta
	res, err := sess.CallTool(actx, params)
	if err != nil {
		return t.failure(ctx, err, "the MCP call failed")
	}
	return mcpOutcome(res, keepCap(ctx))
}

// failure classifies an error of a tools/call (or of reaching the server):
// cancellation is cancelled; anything else is a retryable tool_unavailable.
func (t *mcpTool) failure(ctx context.Context, err error, doing string) dispatch.Outcome {
	if ctx.Err() != nil {
		return dispatch.Cancelled("the call was cancelled while waiting for the MCP server: " + context.Cause(ctx).Error())
	}
	if t.srv.calls.Err() != nil {
		return dispatch.FailRetryable(CodeToolUnavailable, "turnd closed its connection to the MCP server (it is shutting down)", 0)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return timedOut(fmt.Sprintf("the MCP server did not answer within %s", t.timeout))
	}
	var we *jsonrpc.Error
	if errors.As(err, &we) {
		// Every protocol error is tool_unavailable after the entry's
		// retries, also one saying the request was wrong (an unknown tool,
		// invalid params): the server's tool list may be changing under
		// the call (a list_changed refresh then runs), and a server that
		// keeps refusing costs only the retries.
		return dispatch.FailRetryable(CodeToolUnavailable, fmt.Sprintf("the MCP server answered with protocol error %d: %s", we.Code, snippet([]byte(we.Message), 500)), 0)
	}
	// The connection may be gone: have the server's goroutine check now.
	t.srv.kick()
	return dispatch.FailRetryable(CodeToolUnavailable, doing+": "+t.srv.redact(err), 0)
}

// mcpOutcome maps a tools/call result: isError → an error the model reads
// (tool_error); content with binary data (images, audio, embedded blobs) →
// the content array as JSON, binary data left out (see mcpContentJSON),
// even with structuredContent, which may mirror it, base64 and all (as
// server-filesystem's read_media_file does); structuredContent → JSON
// output; text-only content → text output (the blocks joined by newlines);
// other content (resource links, embedded text) → the content array as
// JSON.
func mcpOutcome(res *mcp.CallToolResult, limit int64) dispatch.Outcome {
	text, allText := mcpText(res.Content)
	if res.IsError {
		msg := text
		if msg == "" && res.StructuredContent != nil {
			if js, err := json.Marshal(res.StructuredContent); err == nil {
				msg = string(js)
			}
		}
		if msg == "" {
			msg = "the MCP tool reported an error without a message"
		}
		if len(msg) > errorBodyLimit {
			msg = strings.ToValidUTF8(msg[:errorBodyLimit], "") + "…"
		}
		return dispatch.Fail(CodeToolError, msg)
	}
	var out []byte
	isJSON := true
	switch {
	case res.StructuredContent != nil && !mcpBinary(res.Content):
		js, err := json.Marshal(res.StructuredContent)
		if err != nil {
			return dispatch.Fail(CodeInvalidToolResponse, "the MCP server's structuredContent is not JSON: "+err.Error())
		}
		out = js
	case allText:
		out, isJSON = []byte(text), false
	default:
		js, err := mcpContentJSON(res.Content)
		if err != nil {
			return dispatch.Fail(CodeInvalidToolResponse, "the MCP server's content cannot be written as JSON: "+err.Error())
		}
		out = js
	}
	if int64(len(out)) > limit {
		return dispatch.Fail(CodeOutputTooLarge, fmt.Sprintf("the MCP tool's output exceeds %d bytes", limit))
	}
	return dispatch.OK(out, isJSON)
}

// mcpOmitted is a content block whose binary data turnd left out.
type mcpOmitted struct {
	Type        string           `json:"type"`
	MIMEType    string           `json:"mimeType,omitempty"`
	Omitted     string           `json:"omitted"`
	Annotations *mcp.Annotations `json:"annotations,omitempty"`
}

// mcpOmittedResource is an embedded resource whose blob turnd left out.
type mcpOmittedResource struct {
	Type     string `json:"type"`
	Resource struct {
		URI      string `json:"uri"`
		MIMEType string `json:"mimeType,omitempty"`
		Omitted  string `json:"omitted"`
	} `json:"resource"`
	Annotations *mcp.Annotations `json:"annotations,omitempty"`
}

// mcpContentJSON writes content as MCP does, except binary data: an
// image's, audio's or embedded blob's bytes become a note of their size.
// turnd hands every result to the model as text, where base64 would spend
// tokens (and the output budget) on something the model cannot see.
func mcpContentJSON(content []mcp.Content) ([]byte, error) {
	omitted := func(kind string, n int) string {
		return fmt.Sprintf("%d bytes of %s data, left out: turnd passes tool results to the model as text", n, kind)
	}
	blocks := make([]any, 0, len(content))
	for _, c := range content {
		switch c := c.(type) {
		case *mcp.ImageContent:
			blocks = append(blocks, mcpOmitted{Type: "image", MIMEType: c.MIMEType, Omitted: omitted("image", len(c.Data)), Annotations: c.Annotations})
		case *mcp.AudioContent:
			blocks = append(blocks, mcpOmitted{Type: "audio", MIMEType: c.MIMEType, Omitted: omitted("audio", len(c.Data)), Annotations: c.Annotations})
		case *mcp.EmbeddedResource:
			if c.Resource == nil || c.Resource.Blob == nil {
				blocks = append(blocks, c)
				continue
			}
			r := mcpOmittedResource{Type: "resource", Annotations: c.Annotations}
			r.Resource.URI, r.Resource.MIMEType = c.Resource.URI, c.Resource.MIMEType
			r.Resource.Omitted = omitted("blob", len(c.Resource.Blob))
			blocks = append(blocks, r)
		default:
			blocks = append(blocks, c)
		}
	}
	return json.Marshal(blocks)
}

// mcpBinary reports whether content holds binary data.
func mcpBinary(content []mcp.Content) bool {
	for _, c := range content {
		switch c := c.(type) {
		case *mcp.ImageContent, *mcp.AudioContent:
			return true
		case *mcp.EmbeddedResource:
			if c.Resource != nil && c.Resource.Blob != nil {
				return true
			}
		}
	}
	return false
}

// mcpText joins the text blocks of content; allText reports whether there
// were no others.
func mcpText(content []mcp.Content) (text string, allText bool) {
	var parts []string
	allText = true
	for _, c := range content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		} else {
			allText = false
		}
	}
	return strings.Join(parts, "\n"), allText
}
