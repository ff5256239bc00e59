package tool

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

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
	// Column is 1-based, 0 when unknown. Error leaves it out; Located
	// has it.
	Column int
	Tool   string // the tool's name (or "tools[i]" while it has none); "" outside a tool
	Msg    string
	Err    error // the underlying error, if any (a YAML error, ...)
}

func (e *ConfigError) Error() string { return "tool config: " + e.format(false) }

// Located is the problem as compilers print theirs, with the column:
// "file:line:column: tool \"x\": message".
func (e *ConfigError) Located() string { return e.format(true) }

// format writes the place (with the column if col), the tool and the
// message.
func (e *ConfigError) format(col bool) string {
	var b strings.Builder
	where := ""
	if e.Line > 0 {
		where = strconv.Itoa(e.Line)
		if col && e.Column > 0 {
			where += ":" + strconv.Itoa(e.Column)
		}
	}
	switch {
	case e.File != "" && where != "":
		b.WriteString(e.File + ":" + where + ": ")
	case e.File != "":
		b.WriteString(e.File + ": ")
	case where != "":
		b.WriteString("line " + where + ": ")
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

// Options tunes Open and Parse. The zero value is ready to use.
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

// Parse builds a fixed registry from a YAML tool config; docs/config.md
// describes every key and ConfigSchema is its JSON Schema. Decoding is
// strict, and every problem is reported as a *ConfigError (joined) naming
// the tool, line and column; ${VAR} is read from Options.Env. A config
// with mcp entries needs Open, and Parse refuses it.
func Parse(data []byte, opts Options) (*Registry, error) {
	l, specs, err := parse("", data, opts)
	if err != nil {
		return nil, err
	}
	if len(l.mcp) > 0 {
		src := l.mcp[0]
		return nil, &ConfigError{Line: src.at.line, Column: src.at.col, Tool: src.label,
			Msg: "an mcp entry imports tools that change while turnd runs: open this config with tool.Open, not Parse"}
	}
	r := NewRegistry(specs...)
	r.owned = l.ownedClient // an HTTP client the loader made is the registry's
	r.client = l.opts.HTTPClient
	if r.client == nil {
		r.client = l.ownedClient
	}
	r.now = l.opts.Now
	return r, nil
}

// The YAML shapes. Pointers tell "absent" from a zero value.
type (
	rawFile struct {
		Tools   []rawTool `yaml:"tools"`
		Builtin []string  `yaml:"builtin"`
		// Approval is the default approval policy of every tool without
		// its own (approval.go).
		Approval any `yaml:"approval"`
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
		// Projection refines the session's budget for the tool's outputs.
		Projection *rawProjection `yaml:"projection"`
		// Pending decodes strictly like the rest; its yaml tags are the
		// completion package's.
		Pending *completion.Options `yaml:"pending"`
		// Resource is a template or a list of them (an mcp entry: a map
		// from the server's tool names to those); see config_resource.go.
		Resource                 any  `yaml:"resource"`
		MaxConcurrency           *int `yaml:"max_concurrency"`
		MaxConcurrencyPerSession *int `yaml:"max_concurrency_per_session"`
		Approval                 any  `yaml:"approval"`
	}
	rawProjection struct {
		Window   string   `yaml:"window"`
		Patterns []string `yaml:"patterns"`
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
	if err := l.readBody(data); err != nil {
		return nil, nil, err
	}
	specs, err := l.load()
	if err != nil {
		return nil, nil, err
	}
	return l, specs, nil
}

// readBody parses the YAML of the config into l.body (nil for an empty
// config). More than one document, and tags, are refused.
func (l *loader) readBody(data []byte) error {
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		return l.yamlError(err)
	}
	for _, d := range f.Docs {
		if d == nil || d.Body == nil {
			continue
		}
		if l.body != nil {
			p := posOf(d.Body)
			return &ConfigError{File: l.file, Line: p.line, Column: p.col, Msg: "more than one YAML document"}
		}
		l.body = d.Body
	}
	if l.body == nil {
		return nil
	}
	// Tags mean nothing in this config, and they lead the YAML library
	// into corners where it has panicked (found by FuzzParse).
	tf := &tagFinder{}
	ast.Walk(tf, l.body)
	if tf.tag != nil {
		p := posOf(tf.tag)
		return &ConfigError{File: l.file, Line: p.line, Column: p.col, Tool: l.toolAt(start(tf.tag)), Msg: "YAML tags (!tag) are not supported"}
	}
	return nil
}

// load decodes l.body strictly and builds the config's tools (see build).
// Every problem is reported, in line order.
func (l *loader) load() ([]*Spec, error) {
	if l.body == nil {
		return nil, nil
	}
	var raw rawFile
	if err := decode(l.body, &raw); err != nil {
		return nil, l.yamlError(err)
	}
	specs := l.build(raw)
	if len(l.errs) > 0 {
		slices.SortStableFunc(l.errs, func(a, b error) int {
			return a.(*ConfigError).Line - b.(*ConfigError).Line
		})
		return nil, errors.Join(l.errs...)
	}
	return specs, nil
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

// build validates the decoded config and makes the specs.
