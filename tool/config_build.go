package tool

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/turnd/turnd/budget"
	"github.com/turnd/turnd/completion"
	"github.com/turnd/turnd/dispatch"
)

// entry records the problems of one tools[i] entry, at their place in the
// file and under the entry's label.
type entry struct {
	l     *loader
	i     int
	label string // the tool's name, or "tools[i]" while it has no valid one
}

// at is the position of the node at path under the entry (or of its
// nearest ancestor that exists).
func (e entry) at(path ...any) pos {
	return e.l.pos(append([]any{"tools", e.i}, path...)...)
}

// fail records a problem at p (the entry's start when p is unknown).
func (e entry) fail(p pos, format string, args ...any) {
	if p.line == 0 {
		p = e.at()
	}
	e.l.fail(p, e.label, format, args...)
}

// fail records a problem at p, inside the tool named by label ("" outside
// any tool).
func (l *loader) fail(p pos, label, format string, args ...any) {
	l.errs = append(l.errs, &ConfigError{File: l.file, Line: p.line, Column: p.col, Tool: label,
		Msg: fmt.Sprintf(format, args...)})
}

// build validates the decoded config and makes the specs of its own tools
// and builtins; the mcp entries are checked and kept in l.mcp.
func (l *loader) build(raw rawFile) []*Spec {
	var specs []*Spec
	first := map[string]int{} // name → line first defined
	claim := func(name string, p pos, tool string) bool {
		if prev, dup := first[name]; dup {
			l.fail(p, tool, "duplicate tool name %q (first defined at line %d)", name, prev)
			return false
		}
		first[name] = p.line
		return true
	}
	for i, rt := range raw.Tools {
		if rt.MCP == nil && l.child(l.nodeAt("tools", i), "mcp") != nil {
			rt.MCP = &rawMCP{} // "mcp:" with nothing under it
		}
		if rt.MCP != nil {
			l.buildMCP(i, rt)
			continue
		}
		if s := l.buildTool(i, rt); s != nil && claim(s.Name, l.pos("tools", i, "name"), s.Name) {
			specs = append(specs, s)
		}
	}
	for i, name := range raw.Builtin {
		p := l.pos("builtin", i)
		mk, ok := builtins[name]
		if !ok {
			l.fail(p, "", "unknown builtin %q; the builtins are: %s", name, strings.Join(BuiltinNames(), ", "))
			continue
		}
		if claim(name, p, name) {
			specs = append(specs, mk(l.opts))
		}
	}
	if raw.Approval != nil {
		if def := l.defaultApproval(raw.Approval); def != nil {
			for _, s := range specs {
				if s.Approval == nil {
					s.Approval = def
				}
			}
			for _, src := range l.mcp {
				if src.approval == nil {
					src.approval = def
				}
			}
		}
	}
	return specs
}

// buildTool validates one tools[i] entry that is not an mcp entry; nil
// when it has problems (they are recorded).
func (l *loader) buildTool(i int, rt rawTool) *Spec {
	e := entry{l: l, i: i, label: rt.Name}
	if !namePattern.MatchString(e.label) {
		e.label = fmt.Sprintf("tools[%d]", i)
	}
	nerrs := len(l.errs)
	e.checkName(rt)
	s := e.baseSpec(rt)
	if rt.Builtin != nil {
		if s = e.builtinSpec(rt, s); s == nil {
			return nil
		}
	}
	if rt.Pending != nil {
		e.checkPending(rt, s)
	}
	if rt.InputSchema != nil && rt.Builtin == nil {
		js, err := json.Marshal(rt.InputSchema)
		if err != nil {
			e.fail(e.at("input_schema"), "input_schema cannot be written as JSON: %v", err)
		} else if err := s.CompileSchema(js); err != nil {
			e.fail(e.at("input_schema"), "input_schema: %v", err)
		}
	}
	if rt.Resource != nil {
		s.ResourceTemplates = e.checkTemplates(e.templates(rt.Resource, "resource"), s.InputSchema)
	}
	e.caps(rt).apply(s)
	s.Approval = e.approval(rt.Approval, "approval")
	if rt.HTTP != nil && rt.Builtin == nil {
		t := e.httpTool(*rt.HTTP, s)
		s.Impl = t
		s.CancelURL = t.cancelURL
	}
	if len(l.errs) > nerrs {
		return nil
	}
	return s
}

// checkName checks the entry's name and that it has one implementation.
func (e entry) checkName(rt rawTool) {
	switch {
	case rt.Name == "":
		e.fail(pos{}, "name is required")
	case !namePattern.MatchString(rt.Name):
		e.fail(e.at("name"), "name %q must match %s", rt.Name, namePattern)
	case rt.Name == dispatch.MetaTool:
		e.fail(e.at("name"), "name %q is reserved: calls to it name the tool to run", rt.Name)
	}
	switch {
	case rt.HTTP != nil && rt.Builtin != nil:
		e.fail(pos{}, "has both http and builtin; a tool has exactly one implementation")
	case rt.HTTP == nil && rt.Builtin == nil:
		e.fail(pos{}, "needs an implementation: an http block (or builtin: <name>, or an mcp block)")
	}
}

// baseSpec is the spec the entry's own fields describe: a write tool, not
// idempotent, tried once, unless the entry says otherwise.
func (e entry) baseSpec(rt rawTool) *Spec {
	s := &Spec{Name: rt.Name, Effect: dispatch.EffectWrite, Retry: noRetry}
	if rt.Description != nil {
		s.Description = *rt.Description
	}
	if rt.Effect != nil {
		switch *rt.Effect {
		case "read":
			s.Effect = dispatch.EffectRead
		case "write":
			s.Effect = dispatch.EffectWrite
		default:
			e.fail(e.at("effect"), "effect %q must be read or write", *rt.Effect)
		}
	}
	if rt.Idempotent != nil {
		s.Idempotent = *rt.Idempotent
	}
	if rt.Deferred != nil {
		s.Deferred = *rt.Deferred
	}
	if rt.Pending != nil {
		s.Pending = *rt.Pending
	}
	if rt.Retry != nil {
		s.Retry = e.retry(*rt.Retry)
	}
	if rt.Projection != nil {
		s.Projection = e.projection(*rt.Projection)
	}
	return s
}

// projection checks the entry's projection block: a known window and
// valid patterns (budget.Projection.Validate).
func (e entry) projection(rp rawProjection) budget.Projection {
	p := budget.Projection{Window: budget.Window(rp.Window), Patterns: rp.Patterns}
	if err := p.Validate(); err != nil {
		var ce *budget.ConfigError
		if !errors.As(err, &ce) {
			e.fail(e.at("projection"), "projection: %v", err)
			return budget.Projection{}
		}
		e.fail(e.at("projection", ce.Field), "projection.%s %s: %s", ce.Field, ce.Value, ce.Reason)
		return budget.Projection{}
	}
	return p
}

// retry checks the entry's retry block; see retryPolicy.
func (e entry) retry(r rawRetry) dispatch.RetryPolicy {
	p, field, err := retryPolicy(r)
	if err != nil {
		e.fail(e.at("retry", field), "retry.%s: %v", field, err)
	}
	return p
}

// builtinSpec is the spec of a builtin under the entry's name, with the
// description, retry and pending the entry gives (base holds them); nil
// when the builtin does not exist.
func (e entry) builtinSpec(rt rawTool, base *Spec) *Spec {
	name := *rt.Builtin
	mk, ok := builtins[name]
	if !ok {
		e.fail(e.at("builtin"), "unknown builtin %q; the builtins are: %s", name, strings.Join(BuiltinNames(), ", "))
		return nil
	}
	// The builtin defines its own arguments and effect.
	for _, f := range []struct {
		set  bool
		name string
	}{{rt.Effect != nil, "effect"}, {rt.Idempotent != nil, "idempotent"}, {rt.InputSchema != nil, "input_schema"}, {rt.Deferred != nil, "deferred"}} {
		if f.set {
			e.fail(e.at(f.name), "%s cannot be set for builtin %q: the builtin defines it", f.name, name)
		}
	}
	b := mk(e.l.opts)
	b.Name = rt.Name
	if rt.Description != nil {
		b.Description = base.Description
	}
	if rt.Retry != nil {
		b.Retry = base.Retry
	}
	b.Projection = base.Projection
	switch {
	case rt.Pending == nil:
	case !b.Deferred && rt.Approval != nil:
		b.Pending = *rt.Pending // bounds the wait for a decision
	case !b.Deferred:
		e.fail(e.at("pending"), "pending cannot be set for builtin %q: it never defers a call (unless the entry has an approval policy)", name)
	default:
		// The config's pending: refines the builtin's own defaults.
		b.Pending = b.Pending.Merge(*rt.Pending)
		if ap, ok := b.Impl.(*approvalTool); ok {
			c := *ap
			c.defaults = b.Pending
			b.Impl = &c
		}
	}
	return b
}

// checkPending checks the pending block of the entry, whose spec is s.
func (e entry) checkPending(rt rawTool, s *Spec) {
	switch {
	case !s.Deferred && rt.Builtin == nil && rt.Approval == nil:
		e.fail(e.at("pending"), "pending is only allowed with deferred: true or an approval policy (its deadline and on_timeout then bound the wait for a decision)")
	case !s.Deferred && rt.Approval == nil:
		// Reported by builtinSpec.
	default:
		if err := s.Pending.Validate(); err != nil {
			field, msg := optionsProblem(err)
			e.fail(e.at("pending", field), "%s", msg)
		}
		// Only an explicit choice: the default on_cancel without a
		// cancel_url simply has nothing to call.
		if rt.Pending.OnCancel == completion.OnCancelExternalWork && (rt.HTTP == nil || rt.HTTP.CancelURL == "") {
			e.fail(e.at("pending", "on_cancel"), "pending.on_cancel %s needs an http.cancel_url to call", completion.OnCancelExternalWork)
		}
	}
}

// reservedHeaders are set by the protocol itself (or, for Host, would be
// ignored by net/http), so the config may not set them.
var reservedHeaders = []string{"Content-Type", "Content-Length", "Idempotency-Key", "Transfer-Encoding", "Host", "Connection"}

// httpTool validates an http block and builds the tool of spec s (whose
// Deferred and Pending are set).
func (e entry) httpTool(rh rawHTTP, s *Spec) *httpTool {
	l := e.l
	t := &httpTool{timeout: DefaultTimeout, client: l.client(), now: l.opts.Now,
		deferred: s.Deferred, pending: s.Pending, projection: s.Projection}
	if rh.URL == "" {
		e.fail(e.at("http"), "http.url is required")
	} else if u, msg := absoluteURL("http.url", rh.URL, l.opts.Env); msg != "" {
		e.fail(e.at("http", "url"), "%s", msg)
	} else {
		t.url = u
	}
	switch {
	case rh.CancelURL == "":
	case !s.Deferred:
		e.fail(e.at("http", "cancel_url"), "http.cancel_url is only allowed with deferred: true")
	default:
		if u, msg := absoluteURL("http.cancel_url", rh.CancelURL, l.opts.Env); msg != "" {
			e.fail(e.at("http", "cancel_url"), "%s", msg)
		} else {
			t.cancelURL = u
		}
	}
	if rh.Timeout != nil {
		t.timeout = e.duration(*rh.Timeout, "http", "timeout")
	}
	t.header = e.headers("http", rh.Headers, reservedHeaders)
	return t
}

// duration checks the positive duration v of the field at path under the
// entry; DefaultTimeout when it has a problem (which is recorded).
func (e entry) duration(v string, path ...string) time.Duration {
	field := strings.Join(path, ".")
	d, msg := positiveDuration(field, v)
	if msg != "" {
		p := make([]any, len(path))
		for i, s := range path {
			p[i] = s
		}
		e.fail(e.at(p...), "%s", msg)
		return DefaultTimeout
	}
	return d
}

// headers checks the headers block of block (http or mcp) and expands
// ${VAR} in its values; reserved are the headers the protocol sets itself.
func (e entry) headers(block string, raw map[string]string, reserved []string) http.Header {
	h := http.Header{}
	for _, k := range slices.Sorted(maps.Keys(raw)) {
		p := e.at(block, "headers", k)
		ck := http.CanonicalHeaderKey(k)
		switch {
		case !validHeaderName(k):
			e.fail(p, "%s.headers: %q is not a valid header name", block, k)
			continue
		case slices.Contains(reserved, ck):
			e.fail(p, "%s.headers: %s is set by turnd", block, ck)
			continue
		case len(h[ck]) > 0:
			e.fail(p, "%s.headers: %s is given twice", block, ck)
			continue
		}
		v, err := expandEnv(raw[k], e.l.opts.Env)
		if err != nil {
			e.fail(p, "%s.headers.%s: %v", block, k, err)
			continue
		}
		if !validHeaderValue(v) {
			// Not the value: it is likely a secret.
			e.fail(p, "%s.headers.%s: the value contains control characters", block, k)
			continue
		}
		h[ck] = []string{v}
	}
	return h
}
