package tool

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
)

// Summary counts what a tool config defines.
type Summary struct {
	Tools    int // the config's own tools: http and builtin entries and the builtin list
	HTTP     int // of which HTTP tools
	Builtins int // of which builtins (under their own names or others)
	Deferred int // of Tools, those that may park their calls
	MCP      int // mcp entries; their tools are known once turnd connects
	MCPStdio int // of which stdio servers (mcp.command)
}

// String is a one-line summary: "3 tools (1 http, 2 builtin, 1 deferred),
// 1 mcp server (stdio)".
func (s Summary) String() string {
	plural := func(n int, one string) string {
		if n == 1 {
			return "1 " + one
		}
		return fmt.Sprintf("%d %ss", n, one)
	}
	var kinds []string
	for _, k := range []struct {
		n    int
		name string
	}{{s.HTTP, "http"}, {s.Builtins, "builtin"}, {s.Deferred, "deferred"}} {
		if k.n > 0 {
			kinds = append(kinds, fmt.Sprintf("%d %s", k.n, k.name))
		}
	}
	out := plural(s.Tools, "tool")
	if len(kinds) > 0 {
		out += " (" + strings.Join(kinds, ", ") + ")"
	}
	out += ", " + plural(s.MCP, "mcp server")
	if s.MCP > 0 {
		out += fmt.Sprintf(" (%d http, %d stdio)", s.MCP-s.MCPStdio, s.MCPStdio)
	}
	return out
}

// Check checks the tool config file at path without starting or reaching
// anything: against the config's JSON Schema (ConfigSchema) and with the
// loader of Open and Parse, ${VAR} read from opts.Env. Every problem is
// returned (joined), each a *ConfigError with its line and column, in file
// order; a schema problem on a line where the loader found one is left
// out, the loader's message being the more precise. A file that cannot be
// read is an error that is not a ConfigError.
func Check(path string, opts Options) (Summary, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Summary{}, fmt.Errorf("tool: reading config: %w", err)
	}
	l := &loader{file: path, opts: opts.withDefaults()}
	if err := l.readBody(data); err != nil {
		return Summary{}, err
	}
	schemaErrs, err := l.schemaProblems()
	if err != nil {
		return Summary{}, err
	}
	specs, loadErr := l.load()
	if l.ownedClient != nil {
		l.ownedClient.CloseIdleConnections()
	}
	problems := mergeProblems(loadErr, schemaErrs)
	if len(problems) > 0 {
		return Summary{}, errors.Join(problems...)
	}
	return summarize(specs, l.mcp), nil
}

// mergeProblems joins the loader's problems (loadErr) and the schema's,
// leaving out a schema problem on a line the loader has one on, in file
// order.
func mergeProblems(loadErr error, schemaErrs []*ConfigError) []error {
	var all []*ConfigError
	lines := map[int]bool{}
	if loadErr != nil {
		for _, e := range flatten(loadErr) {
			ce, ok := e.(*ConfigError)
			if !ok {
				ce = &ConfigError{Msg: e.Error(), Err: e}
			}
			all = append(all, ce)
			lines[ce.Line] = true
		}
	}
	for _, se := range schemaErrs {
		if !lines[se.Line] {
			all = append(all, se)
		}
	}
	slices.SortStableFunc(all, comparePlace)
	out := make([]error, len(all))
	for i, ce := range all {
		out[i] = ce
	}
	return out
}

// flatten lists the errors an errors.Join holds (err alone otherwise).
func flatten(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// ConfigErrors lists the config problems an error of Parse, Open,
// Reload or Check holds, in order; none when it holds none (the file could
// not be read, for one).
func ConfigErrors(err error) []*ConfigError {
	var out []*ConfigError
	if err == nil {
		return nil
	}
	for _, e := range flatten(err) {
		var ce *ConfigError
		if errors.As(e, &ce) {
			out = append(out, ce)
		}
	}
	return out
}

// summarize counts the config's tools and mcp entries.
func summarize(specs []*Spec, mcp []*mcpSource) Summary {
	s := Summary{Tools: len(specs), MCP: len(mcp)}
	for _, sp := range specs {
		switch sp.Impl.(type) {
		case *httpTool:
			s.HTTP++
		default:
			s.Builtins++
		}
		if sp.Deferred {
			s.Deferred++
		}
	}
	for _, m := range mcp {
		if m.stdio != nil {
			s.MCPStdio++
		}
	}
	return s
}
