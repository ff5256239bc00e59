package tool

import (
	"fmt"
	"os"
	"slices"
	"strings"
)

// mcpFieldReasons explains why a tools[] field cannot go with mcp.
var mcpFieldReasons = []struct {
	name, reason string
}{
	{"name", "the MCP server names its tools (mcp.prefix is prepended to each)"},
	{"description", "the MCP server describes its tools"},
	{"effect", "an imported tool is read only when the server's readOnlyHint says so and mcp.trust_annotations is true, otherwise write"},
	{"idempotent", "an imported tool is idempotent only when mcp.trust_annotations is true and the server's readOnlyHint or idempotentHint says so"},
	{"input_schema", "the MCP server gives each tool's input schema"},
	{"http", "an entry has exactly one implementation"},
	{"builtin", "an entry has exactly one implementation"},
	{"deferred", "MCP tools answer within the call"},
	{"pending", "MCP tools answer within the call"},
}

// buildMCP checks a tools[i] entry with an mcp block and records it.
func (l *loader) buildMCP(i int, rt rawTool) {
	label := fmt.Sprintf("tools[%d]", i)
	nerrs := len(l.errs)
	at := func(path ...any) int { return l.line(append([]any{"tools", i}, path...)...) }
	add := func(ln int, format string, args ...any) {
		if ln == 0 {
			ln = at()
		}
		l.errs = append(l.errs, &ConfigError{File: l.file, Line: ln, Tool: label, Msg: fmt.Sprintf(format, args...)})
	}
	set := map[string]bool{
		"name": rt.Name != "", "description": rt.Description != nil, "effect": rt.Effect != nil,
		"idempotent": rt.Idempotent != nil, "input_schema": rt.InputSchema != nil, "http": rt.HTTP != nil,
		"builtin": rt.Builtin != nil, "deferred": rt.Deferred != nil, "pending": rt.Pending != nil,
	}
	for _, f := range mcpFieldReasons {
		if set[f.name] {
			add(at(f.name), "%s cannot be set in an mcp entry: %s", f.name, f.reason)
		}
	}

	rm := *rt.MCP
	src := &mcpSource{label: label, line: at("mcp"), timeout: DefaultTimeout, retry: defaultRetry}
	mcpNode := l.nodeAt("tools", i, "mcp")
	hasCommand := rm.Command != nil || l.child(mcpNode, "command") != nil
	switch {
	case rm.URL != "" && hasCommand:
		add(at("mcp", "command"), "mcp.url and mcp.command cannot both be set: an entry either reaches a server over streamable HTTP (url) or runs one and speaks stdio with it (command)")
	case hasCommand:
		for _, f := range []string{"headers"} {
			if l.child(mcpNode, f) != nil {
				add(at("mcp", f), "mcp.%s goes with mcp.url; a stdio server (mcp.command) takes mcp.env", f)
			}
		}
		src.stdio = l.buildStdio(rm, at, add)
	case rm.URL == "":
		add(at("mcp"), "mcp.url is required (or mcp.command, to run a stdio server)")
	default:
		if u, msg := absoluteURL("mcp.url", rm.URL, l.opts.Env); msg != "" {
			add(at("mcp", "url"), "%s", msg)
		} else {
			src.url = u
		}
		src.header = l.headers("mcp", rm.Headers, mcpReservedHeaders, at, add)
	}
	if !hasCommand {
		for _, f := range []string{"env", "cwd"} {
			if l.child(mcpNode, f) != nil {
				add(at("mcp", f), "mcp.%s goes with mcp.command (a stdio server); an HTTP server (mcp.url) takes mcp.headers", f)
			}
		}
	}
	if rm.Prefix != nil {
		if !mcpPrefixPattern.MatchString(*rm.Prefix) {
			add(at("mcp", "prefix"), "mcp.prefix %q must match %s (a tool name is at most 64 characters of [a-zA-Z0-9_-], prefix included)", *rm.Prefix, mcpPrefixPattern)
		} else {
			src.prefix = *rm.Prefix
		}
	}
	if rm.TrustAnnotations != nil {
		src.trust = *rm.TrustAnnotations
	}
	if rm.Timeout != nil {
		if d, msg := positiveDuration("mcp.timeout", *rm.Timeout); msg != "" {
			add(at("mcp", "timeout"), "%s", msg)
		} else {
			src.timeout = d
		}
	}
	if rt.Retry != nil {
		p, field, err := retryPolicy(*rt.Retry)
		if err != nil {
			add(at("retry", field), "retry.%s: %v", field, err)
		}
		src.retry = p
	}
	if len(l.errs) == nerrs {
		l.mcp = append(l.mcp, src)
	}
}

// mcpInheritedEnv are the variables of turnd's environment that a stdio MCP
// server gets without listing them in mcp.env: enough to find programs and
// a home directory, nothing that may be a secret of turnd's.
var mcpInheritedEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TMPDIR", "LANG", "LC_ALL", "LC_CTYPE", "TZ"}

// stdioCommand is what a stdio mcp entry runs.
type stdioCommand struct {
	argv []string
	env  []string // KEY=VALUE, sorted; ${VAR} expanded: may hold secrets
	dir  string
}

// buildStdio checks the command, env and cwd of an mcp entry.
func (l *loader) buildStdio(rm rawMCP, at func(...any) int, add func(int, string, ...any)) *stdioCommand {
	c := &stdioCommand{}
	switch {
	case len(rm.Command) == 0:
		add(at("mcp", "command"), "mcp.command must be a non-empty list: the program, then its arguments")
	case rm.Command[0] == "":
		add(at("mcp", "command", 0), "mcp.command[0] must name the program to run")
	default:
		for i, a := range rm.Command {
			if strings.IndexByte(a, 0) >= 0 {
				add(at("mcp", "command", i), "mcp.command[%d] contains a NUL byte", i)
			}
		}
		c.argv = slices.Clone(rm.Command)
	}

	vars := map[string]string{}
	for _, k := range mcpInheritedEnv {
		if v, ok := l.opts.Env(k); ok {
			vars[k] = v
		}
	}
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range rm.Env {
			if !yield(k) {
				return
			}
		}
	}) {
		ln := at("mcp", "env", k)
		if !envName.MatchString(k) {
			add(ln, "mcp.env: %q is not a valid variable name", k)
			continue
		}
		v, err := expandEnv(rm.Env[k], l.opts.Env)
		if err != nil {
			add(ln, "mcp.env.%s: %v", k, err)
			continue
		}
		if strings.IndexByte(v, 0) >= 0 {
			add(ln, "mcp.env.%s: the value contains a NUL byte", k) // not the value: it may be a secret
			continue
		}
		vars[k] = v
	}
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range vars {
			if !yield(k) {
				return
			}
		}
	}) {
		c.env = append(c.env, k+"="+vars[k])
	}

	if rm.Cwd != nil {
		ln := at("mcp", "cwd")
		switch fi, err := os.Stat(*rm.Cwd); {
		case *rm.Cwd == "":
			add(ln, "mcp.cwd must not be empty (leave it out to run in turnd's working directory)")
		case err != nil:
			add(ln, "mcp.cwd %q: %v", *rm.Cwd, statReason(err))
		case !fi.IsDir():
			add(ln, "mcp.cwd %q is not a directory", *rm.Cwd)
		default:
			c.dir = *rm.Cwd
		}
	}
	return c
}
