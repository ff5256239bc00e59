package tool

import (
	"fmt"
	"maps"
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

// buildMCP checks a tools[i] entry with an mcp block and records it in
// l.mcp when it has no problems.
func (l *loader) buildMCP(i int, rt rawTool) {
	e := entry{l: l, i: i, label: fmt.Sprintf("tools[%d]", i)}
	nerrs := len(l.errs)
	set := map[string]bool{
		"name": rt.Name != "", "description": rt.Description != nil, "effect": rt.Effect != nil,
		"idempotent": rt.Idempotent != nil, "input_schema": rt.InputSchema != nil, "http": rt.HTTP != nil,
		"builtin": rt.Builtin != nil, "deferred": rt.Deferred != nil, "pending": rt.Pending != nil,
	}
	for _, f := range mcpFieldReasons {
		if set[f.name] {
			e.fail(e.at(f.name), "%s cannot be set in an mcp entry: %s", f.name, f.reason)
		}
	}
	rm := *rt.MCP
	src := &mcpSource{label: e.label, at: e.at("mcp"), timeout: DefaultTimeout, retry: defaultRetry}
	e.mcpServer(rm, src)
	if rm.Prefix != nil {
		if !mcpPrefixPattern.MatchString(*rm.Prefix) {
			e.fail(e.at("mcp", "prefix"), "mcp.prefix %q must match %s (a tool name is at most 64 characters of [a-zA-Z0-9_-], prefix included)", *rm.Prefix, mcpPrefixPattern)
		} else {
			src.prefix = *rm.Prefix
		}
	}
	if rm.TrustAnnotations != nil {
		src.trust = *rm.TrustAnnotations
	}
	if rm.Timeout != nil {
		src.timeout = e.duration(*rm.Timeout, "mcp", "timeout")
	}
	if rt.Projection != nil {
		src.projection = e.projection(*rt.Projection)
	}
	if rt.Retry != nil {
		src.retry = e.retry(*rt.Retry)
	}
	src.resources = e.mcpTemplates(rt.Resource)
	src.caps = e.caps(rt)
	src.approval = e.approval(rt.Approval, "approval")
	if len(l.errs) == nerrs {
		l.mcp = append(l.mcp, src)
	}
}

// mcpServer checks how the entry reaches its server: url and headers
// (streamable HTTP) or command, env and cwd (stdio), never both.
func (e entry) mcpServer(rm rawMCP, src *mcpSource) {
	node := e.l.nodeAt("tools", e.i, "mcp")
	hasCommand := rm.Command != nil || e.l.child(node, "command") != nil
	switch {
	case rm.URL != "" && hasCommand:
		e.fail(e.at("mcp", "command"), "mcp.url and mcp.command cannot both be set: an entry either reaches a server over streamable HTTP (url) or runs one and speaks stdio with it (command)")
	case hasCommand:
		if e.l.child(node, "headers") != nil {
			e.fail(e.at("mcp", "headers"), "mcp.headers goes with mcp.url; a stdio server (mcp.command) takes mcp.env")
		}
		src.stdio = e.stdio(rm)
	case rm.URL == "":
		e.fail(e.at("mcp"), "mcp.url is required (or mcp.command, to run a stdio server)")
	default:
		if u, msg := absoluteURL("mcp.url", rm.URL, e.l.opts.Env); msg != "" {
			e.fail(e.at("mcp", "url"), "%s", msg)
		} else {
			src.url = u
		}
		src.header = e.headers("mcp", rm.Headers, mcpReservedHeaders)
	}
	if !hasCommand {
		for _, f := range []string{"env", "cwd"} {
			if e.l.child(node, f) != nil {
				e.fail(e.at("mcp", f), "mcp.%s goes with mcp.command (a stdio server); an HTTP server (mcp.url) takes mcp.headers", f)
			}
		}
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

// stdio checks the command, env and cwd of a stdio mcp entry.
func (e entry) stdio(rm rawMCP) *stdioCommand {
	c := &stdioCommand{}
	switch {
	case len(rm.Command) == 0:
		e.fail(e.at("mcp", "command"), "mcp.command must be a non-empty list: the program, then its arguments")
	case rm.Command[0] == "":
		e.fail(e.at("mcp", "command", 0), "mcp.command[0] must name the program to run")
	default:
		for i, a := range rm.Command {
			if strings.IndexByte(a, 0) >= 0 {
				e.fail(e.at("mcp", "command", i), "mcp.command[%d] contains a NUL byte", i)
			}
		}
		c.argv = slices.Clone(rm.Command)
	}
	vars := e.stdioEnv(rm.Env)
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		c.env = append(c.env, k+"="+vars[k])
	}
	if rm.Cwd != nil {
		p := e.at("mcp", "cwd")
		switch fi, err := os.Stat(*rm.Cwd); {
		case *rm.Cwd == "":
			e.fail(p, "mcp.cwd must not be empty (leave it out to run in turnd's working directory)")
		case err != nil:
			e.fail(p, "mcp.cwd %q: %v", *rm.Cwd, statReason(err))
		case !fi.IsDir():
			e.fail(p, "mcp.cwd %q is not a directory", *rm.Cwd)
		default:
			c.dir = *rm.Cwd
		}
	}
	return c
}

// stdioEnv is a stdio server's environment: mcpInheritedEnv from turnd's,
// then the entry's env with ${VAR} expanded.
func (e entry) stdioEnv(env map[string]string) map[string]string {
	vars := map[string]string{}
	for _, k := range mcpInheritedEnv {
		if v, ok := e.l.opts.Env(k); ok {
			vars[k] = v
		}
	}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		p := e.at("mcp", "env", k)
		if !envName.MatchString(k) {
			e.fail(p, "mcp.env: %q is not a valid variable name", k)
			continue
		}
		v, err := expandEnv(env[k], e.l.opts.Env)
		if err != nil {
			e.fail(p, "mcp.env.%s: %v", k, err)
			continue
		}
		if strings.IndexByte(v, 0) >= 0 {
			e.fail(p, "mcp.env.%s: the value contains a NUL byte", k) // not the value: it may be a secret
			continue
		}
		vars[k] = v
	}
	return vars
}

// statReason says why os.Stat failed, without repeating the path.
func statReason(err error) string {
	switch {
	case os.IsNotExist(err):
		return "no such directory"
	case os.IsPermission(err):
		return "permission denied"
	}
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err.Error()
	}
	return err.Error()
}
