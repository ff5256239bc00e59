package tool

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"

	"github.com/turnd/turnd/completion"
	"github.com/turnd/turnd/dispatch"
)

// Defaults applied by the config loader.
const (
	// DefaultTimeout bounds one attempt of an HTTP tool without http.timeout.
	DefaultTimeout = 30 * time.Second
	// DefaultKeepCap caps the bytes an HTTP tool reads from one response
	// when the context carries no keep cap (see WithProjector).
	DefaultKeepCap int64 = 64 << 20

	// MaxAttempts is the largest retry.max_attempts accepted.
	MaxAttempts = 20
)

// defaultRetry fills in what a tool's retry block leaves out. A tool
// without a retry block is tried once.
var defaultRetry = dispatch.RetryPolicy{
	MaxAttempts:     3,
	InitialInterval: 200 * time.Millisecond,
	MaxInterval:     5 * time.Second,
	Multiplier:      2,
	Jitter:          0.2,
}

// noRetry is the policy of a tool without a retry block: one attempt.
var noRetry = dispatch.RetryPolicy{MaxAttempts: 1}

// ErrInvalidConfig is matched (errors.Is) by every ConfigError.
var ErrInvalidConfig = errors.New("invalid tool config")

// ConfigError is one problem in the tool config, located as precisely as
// the YAML allows. Its message never contains a header value or anything
// read from the environment.
type ConfigError struct {
	File string // the config file; "" when parsed from bytes
	Line int    // 1-based; 0 when unknown
	Tool string // the tool's name (or "tools[i]" while it has none); "" outside a tool
	Msg  string
	Err  error // the underlying error, if any (a YAML error, ...)
}

func (e *ConfigError) Error() string {
	var b strings.Builder
	b.WriteString("tool config: ")
	switch {
	case e.File != "" && e.Line > 0:
		fmt.Fprintf(&b, "%s:%d: ", e.File, e.Line)
	case e.File != "":
		b.WriteString(e.File + ": ")
	case e.Line > 0:
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Tool != "" {
		if strings.HasPrefix(e.Tool, "tools[") {
			b.WriteString(e.Tool + ": ")
		} else {
			fmt.Fprintf(&b, "tool %q: ", e.Tool)
		}
	}
	b.WriteString(e.Msg)
	return b.String()
}

func (e *ConfigError) Unwrap() error        { return e.Err }
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// Options tunes Load and Parse. The zero value is ready to use.
type Options struct {
	// Env resolves ${VAR} in http.url, http.cancel_url, http.headers,
	// mcp.url, mcp.headers and mcp.env values (default os.LookupEnv). An
	// unset variable is a config error. A stdio MCP server also gets PATH,
	// HOME and a few other variables (mcpInheritedEnv) from it.
	Env func(name string) (string, bool)
	// HTTPClient sends every HTTP tool's requests. Nil: the registry gets a
	// client of its own from NewHTTPClient, which Registry.CloseIdleConnections
	// closes. A client given here is the caller's to close, and its redirect
	// policy applies (NewHTTPClient's follows none). Per-attempt timeouts
	// come from the tool config, not from the client.
	HTTPClient *http.Client
	// Now is the clock of the now builtin, of HTTP-date Retry-After
	// headers, of pending deadlines and of signed cancel requests (default
	// time.Now).
	Now func() time.Time
	// Logger receives the approval builtin's "approval requested" lines
	// and a Live's MCP connection events (default: discard).
	Logger *slog.Logger
	// LogCompletionURLs lets the approval builtin log each call's complete
	// URL, which carries its completion key (a credential): the demo's way
	// of telling a person where to answer. Off, no key is ever logged.
	LogCompletionURLs bool

	// Test knobs of MCP connections: the SDK's reconnects of a broken
	// stream before it ends the session (0: the SDK's default), and the
	// first wait before reconnecting to a server (0: mcpMinBackoff).
	mcpStreamRetries int
	mcpBackoff       time.Duration
	// mcpStopGrace: a stdio server's time to exit before the next signal
	// (0: mcpStopGrace).
	mcpStopGrace time.Duration
}

func (o Options) withDefaults() Options {
	if o.Env == nil {
		o.Env = os.LookupEnv
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Load reads and parses the tool config file at path. See Parse.
func Load(path string, opts Options) (*Registry, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tool: reading config: %w", err)
	}
	return staticRegistry(path, data, opts)
}

// Parse builds a registry from a YAML tool config:
//
//	tools:
//	  - name: search_docs            # ^[a-zA-Z0-9_-]{1,64}$
//	    description: Search the documentation
//	    effect: read                 # read | write (default write)
//	    idempotent: false
//	    input_schema: {type: object, properties: {q: {type: string}}}
//	    http:
//	      url: http://127.0.0.1:9000/search
//	      timeout: 30s               # per attempt (default 30s)
//	      headers: {Authorization: "Bearer ${SEARCH_TOKEN}"}
//	    retry: {max_attempts: 3, initial_interval: 200ms, max_interval: 5s, multiplier: 2, jitter: 0.2}
//	  - name: deploy                 # may park its calls on a completion key
//	    deferred: true
//	    pending:                     # defaults; a pending answer may override them
//	      deadline: 2h               # Go duration (default 24h, at most 720h)
//	      heartbeat_timeout: 10m     # optional
//	      on_timeout: error_as_result  # or fail_turn
//	      on_cancel: cancel_external_work  # or ignore
//	    http:
//	      url: https://deployer.internal/run
//	      cancel_url: https://deployer.internal/cancel  # only with deferred
//	  - name: shout                  # a builtin under another name
//	    builtin: echo
//	  - mcp:                         # every tool of an MCP server (only with Open)
//	      url: https://mcp.internal/docs/mcp  # streamable HTTP
//	      headers: {Authorization: "Bearer ${DOCS_MCP_TOKEN}"}
//	      prefix: docs_              # prepended to the server's tool names
//	      trust_annotations: false   # true: readOnlyHint → effect read
//	      timeout: 30s               # per call attempt, connect and list (default 30s)
//	    retry: {max_attempts: 3}     # an mcp entry defaults to the retry defaults
//	  - mcp:                         # an MCP server turnd runs and speaks stdio with
//	      command: [npx, -y, "@modelcontextprotocol/server-filesystem", /srv/docs]
//	      env: {API_KEY: "${FS_KEY}"}  # added to PATH, HOME and a few others of turnd's
//	      cwd: /srv                  # must exist (default: turnd's working directory)
//	      prefix: fs_
//	builtin: [echo, sleep, now, approval]  # turnd's demo tools, off unless listed
//
// Decoding is strict: an unknown key is an error. Every problem found is
// reported, each as a *ConfigError (joined with errors.Join), naming the
// tool and the line. ${VAR} in http.url, http.cancel_url and header values
// is read from Options.Env once, here; "$$" stands for a literal "$". An
// empty config is a valid, empty registry.
//
// pending: and http.cancel_url are only allowed with deferred: true, and
// pending: passes completion.Options.Validate. An explicit
// on_cancel: cancel_external_work needs a cancel_url to call; left to its
// default it merely does nothing without one. A deferred builtin (approval)
// takes pending: too, as its defaults.
//
// An mcp entry takes only mcp: and retry:, and yields as many tools as the
// server lists (see Live). Unlike other entries it is retried by default
// (the defaults shown under retry:), since "unreachable" is its common
// failure; a tools/call carries _meta "io.turnd/idempotency-key" so that a
// server can tell a retry, and retry: {max_attempts: 1} turns retries off.
//
// An mcp entry has either url (streamable HTTP, with headers) or command
// (stdio, with env and cwd); ${VAR} is expanded in mcp.env values as in
// headers.
//
// An mcp entry imports the tools of an MCP server; see Open, which such a
// config needs: Load and Parse build a fixed registry, and refuse it.
func Parse(data []byte, opts Options) (*Registry, error) {
	return staticRegistry("", data, opts)
}

// staticRegistry parses a config that must not change at run time.
func staticRegistry(file string, data []byte, opts Options) (*Registry, error) {
	l, specs, err := parse(file, data, opts)
	if err != nil {
		return nil, err
	}
	if len(l.mcp) > 0 {
		src := l.mcp[0]
		return nil, &ConfigError{File: file, Line: src.line, Tool: src.label,
			Msg: "an mcp entry imports tools that change while turnd runs: open this config with tool.Open, not Load or Parse"}
	}
	return l.registry(specs), nil
}

// The YAML shapes. Pointers tell "absent" from a zero value.
type (
	rawFile struct {
		Tools   []rawTool `yaml:"tools"`
		Builtin []string  `yaml:"builtin"`
	}
	rawTool struct {
		Name        string    `yaml:"name"`
		Description *string   `yaml:"description"`
		Effect      *string   `yaml:"effect"`
		Idempotent  *bool     `yaml:"idempotent"`
		InputSchema any       `yaml:"input_schema"`
		HTTP        *rawHTTP  `yaml:"http"`
		Builtin     *string   `yaml:"builtin"`
		MCP         *rawMCP   `yaml:"mcp"`
		Retry       *rawRetry `yaml:"retry"`
		Deferred    *bool     `yaml:"deferred"`
		// Pending decodes strictly like the rest; its yaml tags are the
		// completion package's.
		Pending *completion.Options `yaml:"pending"`
	}
	rawHTTP struct {
		URL       string            `yaml:"url"`
		CancelURL string            `yaml:"cancel_url"`
		Timeout   *string           `yaml:"timeout"`
		Headers   map[string]string `yaml:"headers"`
	}
	rawMCP struct {
		URL              string            `yaml:"url"`
		Headers          map[string]string `yaml:"headers"`
		Command          []string          `yaml:"command"`
		Env              map[string]string `yaml:"env"`
		Cwd              *string           `yaml:"cwd"`
		Prefix           *string           `yaml:"prefix"`
		TrustAnnotations *bool             `yaml:"trust_annotations"`
		Timeout          *string           `yaml:"timeout"`
	}
	rawRetry struct {
		MaxAttempts     *int     `yaml:"max_attempts"`
		InitialInterval *string  `yaml:"initial_interval"`
		MaxInterval     *string  `yaml:"max_interval"`
		Multiplier      *float64 `yaml:"multiplier"`
		Jitter          *float64 `yaml:"jitter"`
	}
)

var namePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// loader carries one parse: the source for locating problems and the
// problems found so far.
type loader struct {
	file string
	opts Options
	body ast.Node // the document's root; nil for an empty config
	errs []error
	mcp  []*mcpSource // the mcp entries, in config order

	ownedClient *http.Client // made for this registry when opts has none
}

// client is the HTTP client of the registry's tools.
func (l *loader) client() *http.Client {
	if l.opts.HTTPClient != nil {
		return l.opts.HTTPClient
	}
	if l.ownedClient == nil {
		l.ownedClient = NewHTTPClient()
	}
	return l.ownedClient
}

// parse checks a config and builds its static tools; the loader keeps
// the mcp entries and the HTTP client it made.
func parse(file string, data []byte, opts Options) (*loader, []*Spec, error) {
	l := &loader{file: file, opts: opts.withDefaults()}
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		return nil, nil, l.yamlError(err)
	}
	for _, d := range f.Docs {
		if d == nil || d.Body == nil {
			continue
		}
		if l.body != nil {
			return nil, nil, &ConfigError{File: file, Line: line(d.Body), Msg: "more than one YAML document"}
		}
		l.body = d.Body
	}
	if l.body == nil {
		return l, nil, nil
	}
	// Tags mean nothing in this config, and they lead the YAML library
	// into corners where it has panicked (found by FuzzParse).
	tf := &tagFinder{}
	ast.Walk(tf, l.body)
	if tf.tag != nil {
		return nil, nil, &ConfigError{File: file, Line: line(tf.tag), Tool: l.toolAt(start(tf.tag)), Msg: "YAML tags (!tag) are not supported"}
	}
	var raw rawFile
	if err := decode(l.body, &raw); err != nil {
		return nil, nil, l.yamlError(err)
	}
	specs := l.build(raw)
	if len(l.errs) > 0 {
		slices.SortStableFunc(l.errs, func(a, b error) int {
			return a.(*ConfigError).Line - b.(*ConfigError).Line
		})
		return nil, nil, errors.Join(l.errs...)
	}
	return l, specs, nil
}

// decode decodes strictly. A panic of the YAML library becomes an error:
// a bad config file must not take the process down.
func decode(body ast.Node, raw *rawFile) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("the YAML decoder failed on this input: %v", v)
		}
	}()
	return yaml.NodeToValue(body, raw, yaml.Strict())
}

// tagFinder finds the first tag node.
type tagFinder struct{ tag ast.Node }

func (f *tagFinder) Visit(n ast.Node) ast.Visitor {
	if f.tag != nil {
		return nil
	}
	if t, ok := n.(*ast.TagNode); ok {
		f.tag = t
		return nil
	}
	return f
}

// registry wraps the specs; an HTTP client the loader made is owned by it.
func (l *loader) registry(specs []*Spec) *Registry {
	r := NewRegistry(specs...)
	r.owned = l.ownedClient
	r.client = l.opts.HTTPClient
	if r.client == nil {
		r.client = l.ownedClient
	}
	r.now = l.opts.Now
	return r
}

// build validates the decoded config and makes the specs.
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

// positiveDuration parses the duration of a config field; on a problem it
// returns the message instead.
func positiveDuration(field, v string) (time.Duration, string) {
	d, err := time.ParseDuration(v)
	switch {
	case err != nil:
		return 0, fmt.Sprintf("%s %q is not a duration such as \"30s\"", field, v)
	case d <= 0:
		return 0, field + " must be positive"
	}
	return d, ""
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
// it is an absolute http or https URL; it drops the fragment. On a problem
// it returns the message instead. The URL may hold secrets once expanded:
// the message describes it, never echoes it.
func absoluteURL(field, raw string, env func(string) (string, bool)) (string, string) {
	expanded, err := expandEnv(raw, env)
	if err != nil {
		return "", fmt.Sprintf("%s: %v", field, err)
	}
	u, err := url.Parse(expanded)
	switch {
	case err != nil, !u.IsAbs(), u.Host == "":
		return "", field + " must be an absolute http or https URL"
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Sprintf("%s must be an absolute http or https URL (scheme is %q)", field, u.Scheme)
	}
	u.Fragment, u.RawFragment = "", ""
	return u.String(), ""
}

// optionsProblem describes an error of completion.Options.Validate as a
// config problem: the field under pending it is about, and the message.
func optionsProblem(err error) (field, msg string) {
	var oe *completion.OptionsError
	if !errors.As(err, &oe) {
		return "", "pending: " + err.Error()
	}
	v := oe.Value
	if len(v) > 64 {
		v = v[:64] + "..."
	}
	return oe.Field, fmt.Sprintf("pending.%s %q: %s", oe.Field, v, oe.Reason)
}

// retryPolicy checks a retry block, defaulting what it leaves out. A
// problem comes with the field it is about.
func retryPolicy(r rawRetry) (p dispatch.RetryPolicy, field string, err error) {
	p = defaultRetry
	if r.MaxAttempts != nil {
		p.MaxAttempts = *r.MaxAttempts
	}
	if p.MaxAttempts < 1 || p.MaxAttempts > MaxAttempts {
		return p, "max_attempts", fmt.Errorf("must be between 1 and %d", MaxAttempts)
	}
	for _, d := range []struct {
		name string
		src  *string
		dst  *time.Duration
	}{{"initial_interval", r.InitialInterval, &p.InitialInterval}, {"max_interval", r.MaxInterval, &p.MaxInterval}} {
		if d.src == nil {
			continue
		}
		v, err := time.ParseDuration(*d.src)
		if err != nil {
			return p, d.name, fmt.Errorf("%q is not a duration such as \"200ms\"", *d.src)
		}
		if v <= 0 {
			return p, d.name, errors.New("must be positive")
		}
		*d.dst = v
	}
	if p.MaxInterval < p.InitialInterval {
		return p, "max_interval", errors.New("must not be less than initial_interval")
	}
	if r.Multiplier != nil {
		p.Multiplier = *r.Multiplier
	}
	if !(p.Multiplier >= 1) || math.IsInf(p.Multiplier, 0) { // !(>=) catches NaN
		return p, "multiplier", errors.New("must be a number ≥ 1")
	}
	if r.Jitter != nil {
		p.Jitter = *r.Jitter
	}
	if !(p.Jitter >= 0 && p.Jitter <= 1) {
		return p, "jitter", errors.New("must be between 0 and 1")
	}
	return p, "", nil
}

// expandEnv replaces ${NAME} with the variable's value and $$ with $. An
// unset variable is an error naming it (never its value).
func expandEnv(s string, lookup func(string) (string, bool)) (string, error) {
	if !strings.Contains(s, "$") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '$' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '{':
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				return "", errors.New("unterminated ${")
			}
			name := s[i+2 : i+2+end]
			if !envName.MatchString(name) {
				return "", fmt.Errorf("${%s} is not a valid variable reference", name)
			}
			v, ok := lookup(name)
			if !ok {
				return "", fmt.Errorf("environment variable %s is not set", name)
			}
			b.WriteString(v)
			i += 2 + end
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// validHeaderName reports whether s is an RFC 9110 token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// validHeaderValue rejects control characters other than tab.
func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// yamlError turns an error of the YAML library into a ConfigError at the
// line it gives, naming the tool when the line is inside one.
func (l *loader) yamlError(err error) error {
	ce := &ConfigError{File: l.file, Msg: err.Error(), Err: err}
	var ye yaml.Error
	if errors.As(err, &ye) {
		ce.Msg = ye.GetMessage()
		tk := ye.GetToken()
		if tk != nil && tk.Position != nil {
			ce.Line = tk.Position.Line
			ce.Tool = l.toolAt(tk.Position)
		}
		// The library's text names Go types; say it in the config's terms.
		// The value itself is left out: it might be a secret.
		var te *yaml.TypeError
		if errors.As(err, &te) && te.DstType != nil {
			ce.Msg = "expected " + yamlKind(te.DstType)
			if te.SrcType != nil {
				ce.Msg += ", got " + yamlKind(te.SrcType)
			}
			if key := l.keyOf(tk); key != "" {
				ce.Msg = key + ": " + ce.Msg
			}
		}
	}
	return ce
}

// yamlKind names a Go type as the YAML value it decodes from.
func yamlKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Bool:
		return "a boolean"
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "a mapping"
	}
	return "a value"
}

// keyOf finds the mapping key whose value is at tk ("" if none).
func (l *loader) keyOf(tk *token.Token) string {
	if tk == nil || l.body == nil {
		return ""
	}
	f := &keyFinder{tk: tk}
	ast.Walk(f, l.body)
	return f.key
}

type keyFinder struct {
	tk  *token.Token
	key string
}

func (f *keyFinder) Visit(n ast.Node) ast.Visitor {
	if f.key != "" {
		return nil
	}
	if mv, ok := n.(*ast.MappingValueNode); ok && mv.Value != nil {
		if p := start(mv.Value); p != nil && f.tk.Position != nil && *p == *f.tk.Position {
			f.key = mv.Key.GetToken().Value
			return nil
		}
	}
	return f
}

// toolAt names the tools[] entry that holds pos ("" if none).
func (l *loader) toolAt(pos *token.Position) string {
	seq, ok := unwrap(l.child(l.body, "tools")).(*ast.SequenceNode)
	if !ok {
		return ""
	}
	idx := -1
	for i, item := range seq.Values {
		if p := start(item); p != nil && !before(pos, p) {
			idx = i
		}
	}
	if idx < 0 {
		return ""
	}
	// A top-level key between the entry's start and pos ends the entry.
	if m, ok := unwrap(l.body).(*ast.MappingNode); ok {
		for _, mv := range m.Values {
			k := start(mv.Key)
			if mv.Key.GetToken().Value != "tools" && before(start(seq.Values[idx]), k) && !before(pos, k) {
				return ""
			}
		}
	}
	if n, ok := unwrap(l.child(seq.Values[idx], "name")).(*ast.StringNode); ok && namePattern.MatchString(n.Value) {
		return n.Value
	}
	return fmt.Sprintf("tools[%d]", idx)
}

// before reports whether a comes strictly before b; nil is never before.
func before(a, b *token.Position) bool {
	if a == nil || b == nil {
		return false
	}
	return a.Line < b.Line || a.Line == b.Line && a.Column < b.Column
}

// line finds the line of the node at path (keys and sequence indexes)
// from the document root, or of its nearest ancestor that exists.
func (l *loader) line(path ...any) int {
	n, best := l.body, 0
	for _, p := range path {
		if n == nil {
			break
		}
		if ln := line(n); ln > 0 {
			best = ln
		}
		n = l.step(n, p)
	}
	if n != nil {
		if ln := line(n); ln > 0 {
			best = ln
		}
	}
	return best
}

// nodeAt returns the node at path (keys and sequence indexes) from the
// document root, or nil.
func (l *loader) nodeAt(path ...any) ast.Node {
	n := l.body
	for _, p := range path {
		if n == nil {
			return nil
		}
		n = l.step(n, p)
	}
	return n
}

// step returns n's child at p: the value under a key (string) or the
// element at a sequence index (int); nil when there is none.
func (l *loader) step(n ast.Node, p any) ast.Node {
	switch k := p.(type) {
	case string:
		return l.child(n, k)
	case int:
		if seq, ok := unwrap(n).(*ast.SequenceNode); ok && k >= 0 && k < len(seq.Values) {
			return seq.Values[k]
		}
	}
	return nil
}

// child returns the value under key in a mapping node.
func (l *loader) child(n ast.Node, key string) ast.Node {
	var values []*ast.MappingValueNode
	switch m := unwrap(n).(type) {
	case *ast.MappingNode:
		values = m.Values
	case *ast.MappingValueNode:
		values = []*ast.MappingValueNode{m}
	}
	for _, mv := range values {
		if tk := mv.Key.GetToken(); tk != nil && tk.Value == key {
			return mv.Value
		}
	}
	return nil
}

// unwrap looks through an anchor to its value.
func unwrap(n ast.Node) ast.Node {
	if a, ok := n.(*ast.AnchorNode); ok {
		return a.Value
	}
	return n
}

func start(n ast.Node) *token.Position {
	if n == nil {
		return nil
	}
	if m, ok := unwrap(n).(*ast.MappingNode); ok && len(m.Values) > 0 && !m.IsFlowStyle {
		n = m.Values[0].Key
	}
	tk := n.GetToken()
	if tk == nil {
		return nil
	}
	return tk.Position
}

func line(n ast.Node) int {
	if p := start(n); p != nil {
		return p.Line
	}
	return 0
}
