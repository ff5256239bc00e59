package tool

// Kind says what runs a tool: "http", "mcp" or "builtin" (any other
// dispatch.Tool, such as one a test registers, counts as builtin). It is
// a bounded label for traces and metrics.
func Kind(s *Spec) string {
	switch s.Impl.(type) {
	case *httpTool:
		return "http"
	case *mcpTool:
		return "mcp"
	}
	return "builtin"
}
