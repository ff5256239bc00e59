package tool

import (
	"encoding/json"
	"maps"
	"slices"

	"github.com/turnd/turnd/dispatch"
)

// MaxConcurrencyCeiling bounds max_concurrency and
// max_concurrency_per_session.
const MaxConcurrencyCeiling = 10000

// located is a parsed resource template and where the config wrote it.
type located struct {
	r  Resource
	at pos
}

// templates checks a resource: value — a template or a list of them — at
// path under the entry; bad ones are recorded and left out.
func (e entry) templates(raw any, path ...any) []located {
	switch v := raw.(type) {
	case string:
		if t, ok := e.template(v, path); ok {
			return []located{t}
		}
		return nil
	case []any:
		if len(v) == 0 {
			e.fail(e.at(path...), "resource: the list is empty (leave resource out for a tool that declares none)")
			return nil
		}
		var out []located
		for j, s := range v {
			p := append(slices.Clone(path), j)
			str, ok := s.(string)
			if !ok {
				e.fail(e.at(p...), "resource[%d] must be a template string", j)
				continue
			}
			if t, ok := e.template(str, p); ok {
				out = append(out, t)
			}
		}
		return out
	}
	e.fail(e.at(path...), "resource must be a template string or a list of them, e.g. \"file:{/path}\"")
	return nil
}

// template parses the template src found at path under the entry.
func (e entry) template(src string, path []any) (located, bool) {
	r, err := ParseResource(src)
	if err != nil {
		e.fail(e.at(path...), "%v", err)
		return located{}, false
	}
	return located{r, e.at(path...)}, true
}

// checkTemplates checks the templates against the tool's input schema
// (every pointer must name a declared field) and returns them.
func (e entry) checkTemplates(ts []located, schema json.RawMessage) []Resource {
	var out []Resource
	for _, t := range ts {
		if err := t.r.CheckSchema(schema); err != nil {
			e.fail(t.at, "%v", err)
			continue
		}
		out = append(out, t.r)
	}
	return out
}

// caps are a tool's (or an MCP server's) max_concurrency limits.
type caps struct {
	process *dispatch.Limit
	session *dispatch.LimitSet
}

// caps checks max_concurrency and max_concurrency_per_session.
func (e entry) caps(rt rawTool) caps {
	var c caps
	check := func(v *int, field string) int {
		if v == nil {
			return 0
		}
		if *v < 1 || *v > MaxConcurrencyCeiling {
			e.fail(e.at(field), "%s must be between 1 and %d, got %d", field, MaxConcurrencyCeiling, *v)
			return 0
		}
		return *v
	}
	if n := check(rt.MaxConcurrency, "max_concurrency"); n > 0 {
		c.process = dispatch.NewLimit(n)
	}
	if n := check(rt.MaxConcurrencyPerSession, "max_concurrency_per_session"); n > 0 {
		c.session = dispatch.NewLimitSet(n)
	}
	return c
}

// apply gives spec s the caps.
func (c caps) apply(s *Spec) { s.Limit, s.SessionLimit = c.process, c.session }

// mcpTemplates checks an mcp entry's resource: map, from the server's tool
// names (before mcp.prefix) to templates.
func (e entry) mcpTemplates(raw any) map[string][]located {
	if raw == nil {
		return nil
	}
	m, ok := raw.(map[string]any)
	if !ok {
		e.fail(e.at("resource"), "resource in an mcp entry maps the server's tool names to templates, e.g. write_file: \"file:{/path}\"")
		return nil
	}
	out := make(map[string][]located, len(m))
	for _, name := range slices.Sorted(maps.Keys(m)) {
		if ts := e.templates(m[name], "resource", name); len(ts) > 0 {
			out[name] = ts
		}
	}
	return out
}

// Gates are the caps a call of s in session holds: its session's cap,
// then the process-wide one (always in that order, so that no run holds
// the wide cap while it waits for a narrow one).
func (s *Spec) Gates(session string) []dispatch.Gate {
	switch {
	case s.SessionLimit != nil && s.Limit != nil:
		return []dispatch.Gate{s.SessionLimit.For(session), s.Limit}
	case s.SessionLimit != nil:
		return []dispatch.Gate{s.SessionLimit.For(session)}
	case s.Limit != nil:
		return []dispatch.Gate{s.Limit}
	}
	return nil
}

// resourcesOf gives sp, the spec of the server's tool remote, the
// templates its entry declares for it, checked against the input schema
// the server lists. A template the schema cannot hold leaves the tool out
// (skip says so with the config line): calling it would refuse every call.
func (s *mcpServer) resourcesOf(sp *Spec, remote string, skip func(string, ...any)) bool {
	ts := s.src.resources[remote]
	for _, t := range ts {
		if err := t.r.CheckSchema(sp.InputSchema); err != nil {
			skip("line %d: %v", t.at.line, err)
			return false
		}
		sp.ResourceTemplates = append(sp.ResourceTemplates, t.r)
	}
	return true
}

// keep returns c where next asks for the same caps, so that a reload
// which leaves them alone does not let the calls in flight and the new
// ones run side by side; next otherwise.
func (c caps) keep(next caps) caps {
	if capOf(c.process) == capOf(next.process) && setCapOf(c.session) == setCapOf(next.session) {
		return c
	}
	return next
}

func capOf(l *dispatch.Limit) int {
	if l == nil {
		return 0
	}
	return l.Cap()
}

func setCapOf(s *dispatch.LimitSet) int {
	if s == nil {
		return 0
	}
	return s.Cap()
}
