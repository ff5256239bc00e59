package tool

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/turnd/turnd/completion"
	"github.com/turnd/turnd/dispatch"
)

func (l *loader) build(raw rawFile) []*Spec {
	var specs []*Spec
	first := map[string]int{} // name → line first defined
	claim := func(name string, ln int, tool string) bool {
		if prev, dup := first[name]; dup {
			l.errs = append(l.errs, &ConfigError{File: l.file, Line: ln, Tool: tool,
				Msg: fmt.Sprintf("duplicate tool name %q (first defined at line %d)", name, prev)})
			return false
		}
		first[name] = ln
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
		s := l.buildTool(i, rt)
		if s == nil {
			continue
		}
		if claim(s.Name, l.line("tools", i, "name"), s.Name) {
			specs = append(specs, s)
		}
	}
	for i, name := range raw.Builtin {
		ln := l.line("builtin", i)
		mk, ok := builtins[name]
		if !ok {
			l.errs = append(l.errs, &ConfigError{File: l.file, Line: ln,
				Msg: fmt.Sprintf("unknown builtin %q; the builtins are: %s", name, strings.Join(BuiltinNames(), ", "))})
			continue
		}
		if claim(name, ln, name) {
			specs = append(specs, mk(l.opts))
		}
	}
	return specs
}

// buildTool validates one tools[i] entry; nil when it has problems (they
// are recorded).
func (l *loader) buildTool(i int, rt rawTool) *Spec {
	label := rt.Name
	if !namePattern.MatchString(label) {
		label = fmt.Sprintf("tools[%d]", i)
	}
	nerrs := len(l.errs)
	fail := func(ln int, format string, args ...any) {
		if ln == 0 {
			ln = l.line("tools", i)
		}
		l.errs = append(l.errs, &ConfigError{File: l.file, Line: ln, Tool: label, Msg: fmt.Sprintf(format, args...)})
	}
	at := func(path ...any) int { return l.line(append([]any{"tools", i}, path...)...) }

	switch {
	case rt.Name == "":
		fail(0, "name is required")
	case !namePattern.MatchString(rt.Name):
		fail(at("name"), "name %q must match %s", rt.Name, namePattern)
	case rt.Name == dispatch.MetaTool:
		fail(at("name"), "name %q is reserved: calls to it name the tool to run", rt.Name)
	}
	switch {
	case rt.HTTP != nil && rt.Builtin != nil:
		fail(0, "has both http and builtin; a tool has exactly one implementation")
	case rt.HTTP == nil && rt.Builtin == nil:
		fail(0, "needs an implementation: an http block (or builtin: <name>, or an mcp block)")
	}

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
			fail(at("effect"), "effect %q must be read or write", *rt.Effect)
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
		p, field, err := retryPolicy(*rt.Retry)
		if err != nil {
			fail(at("retry", field), "retry.%s: %v", field, err)
		}
		s.Retry = p
	}

	if rt.Builtin != nil {
		mk, ok := builtins[*rt.Builtin]
		if !ok {
			fail(at("builtin"), "unknown builtin %q; the builtins are: %s", *rt.Builtin, strings.Join(BuiltinNames(), ", "))
			return nil
		}
		// The builtin defines its own arguments and effect.
		for _, f := range []struct {
			set  bool
			name string
		}{{rt.Effect != nil, "effect"}, {rt.Idempotent != nil, "idempotent"}, {rt.InputSchema != nil, "input_schema"}, {rt.Deferred != nil, "deferred"}} {
			if f.set {
				fail(at(f.name), "%s cannot be set for builtin %q: the builtin defines it", f.name, *rt.Builtin)
			}
		}
		b := mk(l.opts)
		b.Name = rt.Name
		if rt.Description != nil {
			b.Description = *rt.Description
		}
		if rt.Retry != nil {
			b.Retry = s.Retry
		}
		if rt.Pending != nil {
			if b.Deferred {
				// The config's pending: refines the builtin's own defaults.
				b.Pending = b.Pending.Merge(*rt.Pending)
				if ap, ok := b.Impl.(*approvalTool); ok {
					c := *ap
					c.defaults = b.Pending
					b.Impl = &c
				}
			} else {
				fail(at("pending"), "pending cannot be set for builtin %q: it never defers a call", *rt.Builtin)
			}
		}
		s = b
	}

	if rt.Pending != nil {
		switch {
		case !s.Deferred && rt.Builtin == nil:
			fail(at("pending"), "pending is only allowed with deferred: true")
		case !s.Deferred:
			// Reported above.
		default:
			if err := s.Pending.Validate(); err != nil {
				field, msg := optionsProblem(err)
				fail(at("pending", field), "%s", msg)
			}
			// Only an explicit choice: the default on_cancel without a
			// cancel_url simply has nothing to call.
			if rt.Pending.OnCancel == completion.OnCancelExternalWork && (rt.HTTP == nil || rt.HTTP.CancelURL == "") {
				fail(at("pending", "on_cancel"), "pending.on_cancel %s needs an http.cancel_url to call", completion.OnCancelExternalWork)
			}
		}
	}

	if rt.InputSchema != nil && rt.Builtin == nil {
		js, err := json.Marshal(rt.InputSchema)
		if err != nil {
			fail(at("input_schema"), "input_schema cannot be written as JSON: %v", err)
		} else if err := s.CompileSchema(js); err != nil {
			fail(at("input_schema"), "input_schema: %v", err)
		}
	}

	if rt.HTTP != nil && rt.Builtin == nil {
		t, problems := l.httpTool(*rt.HTTP, s, at)
		for _, p := range problems {
			fail(p.line, "%s", p.msg)
		}
		s.Impl = t
		s.CancelURL = t.cancelURL
	}
	if len(l.errs) > nerrs {
		return nil
	}
	return s
}

type problem struct {
	line int
	msg  string
}

// reservedHeaders are set by the protocol itself (or, for Host, would be
// ignored by net/http), so the config may not set them.
var reservedHeaders = []string{"Content-Type", "Content-Length", "Idempotency-Key", "Transfer-Encoding", "Host", "Connection"}

// httpTool validates an http block and builds the tool of spec s (whose
// Deferred and Pending are set).
func (l *loader) httpTool(rh rawHTTP, s *Spec, at func(...any) int) (*httpTool, []problem) {
	var ps []problem
	add := func(ln int, format string, args ...any) {
		ps = append(ps, problem{ln, fmt.Sprintf(format, args...)})
	}
	t := &httpTool{timeout: DefaultTimeout, client: l.client(), now: l.opts.Now,
		deferred: s.Deferred, pending: s.Pending}

	if rh.URL == "" {
		add(at("http"), "http.url is required")
	} else if u, msg := absoluteURL("http.url", rh.URL, l.opts.Env); msg != "" {
		add(at("http", "url"), "%s", msg)
	} else {
		t.url = u
	}
	switch {
	case rh.CancelURL == "":
	case !s.Deferred:
		add(at("http", "cancel_url"), "http.cancel_url is only allowed with deferred: true")
	default:
		if u, msg := absoluteURL("http.cancel_url", rh.CancelURL, l.opts.Env); msg != "" {
			add(at("http", "cancel_url"), "%s", msg)
		} else {
			t.cancelURL = u
		}
	}

	if rh.Timeout != nil {
		if d, msg := positiveDuration("http.timeout", *rh.Timeout); msg != "" {
			add(at("http", "timeout"), "%s", msg)
		} else {
			t.timeout = d
		}
	}
	t.header = l.headers("http", rh.Headers, reservedHeaders, at, add)
	return t, ps
}

// headers checks the headers block of block (http or mcp) and expands
// ${VAR} in its values; reserved are the headers the protocol sets itself.
func (l *loader) headers(block string, raw map[string]string, reserved []string,
	at func(...any) int, add func(int, string, ...any)) http.Header {
	h := http.Header{}
	names := make([]string, 0, len(raw))
	for k := range raw {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		ln := at(block, "headers", k)
		ck := http.CanonicalHeaderKey(k)
		switch {
		case !validHeaderName(k):
			add(ln, "%s.headers: %q is not a valid header name", block, k)
			continue
		case slices.Contains(reserved, ck):
			add(ln, "%s.headers: %s is set by turnd", block, ck)
			continue
		case len(h[ck]) > 0:
			add(ln, "%s.headers: %s is given twice", block, ck)
			continue
		}
		v, err := expandEnv(raw[k], l.opts.Env)
		if err != nil {
			add(ln, "%s.headers.%s: %v", block, k, err)
			continue
		}
		if !validHeaderValue(v) {
			// Not the value: it is likely a secret.
			add(ln, "%s.headers.%s: the value contains control characters", block, k)
			continue
		}
		h[ck] = []string{v}
	}
	return h
}

// absoluteURL expands ${VAR} in the URL of a config field and checks that
