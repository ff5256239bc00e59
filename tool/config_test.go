package tool

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/turnd/turnd/budget"
	"github.com/turnd/turnd/completion"
	"github.com/turnd/turnd/dispatch"
)

// secret is the value of $TOKEN in these tests; no error may show it.
const secret = "s3cr3t-t0ken"

func testEnv(name string) (string, bool) {
	switch name {
	case "TOKEN":
		return secret, true
	case "EMPTY":
		return "", true
	case "HOST":
		return "127.0.0.1:9000", true
	}
	return "", false
}

// parse parses a config with the test environment and closes the
// registry's connections when the test ends.
func parseConfig(t *testing.T, config string) (*Registry, error) {
	t.Helper()
	reg, err := Parse([]byte(config), Options{Env: testEnv})
	if reg != nil {
		t.Cleanup(reg.CloseIdleConnections)
	}
	return reg, err
}

func mustParse(t *testing.T, config string) *Registry {
	t.Helper()
	reg, err := parseConfig(t, config)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return reg
}

func lookup(t *testing.T, reg *Registry, name string) *Spec {
	t.Helper()
	s, ok := reg.Lookup(name)
	if !ok {
		t.Fatalf("tool %q not registered", name)
	}
	return s
}

const fullConfig = `
tools:
  - name: search_docs
    description: Search the documentation
    effect: read
    idempotent: true
    input_schema: {type: object, properties: {q: {type: string}}, required: [q]}
    http:
      url: http://${HOST}/search
      timeout: 2s
      headers:
        Authorization: "Bearer ${TOKEN}"
        x-empty: "${EMPTY}"
        X-Literal: "$$5 and $HOME"
    retry: {max_attempts: 4, initial_interval: 100ms, max_interval: 2s, multiplier: 1.5, jitter: 0.1}
  - name: write_note
    http: {url: "https://notes.example/notes#frag"}
  - name: shout
    description: Says it back
    builtin: echo
    retry: {max_attempts: 2}
builtin: [sleep, now]
`

func TestParseValid(t *testing.T) {
	t.Parallel()
	reg := mustParse(t, fullConfig)

	var names []string
	for _, s := range reg.List() {
		names = append(names, s.Name)
	}
	if want := []string{"now", "search_docs", "shout", "sleep", "write_note"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("List() = %v, want %v", names, want)
	}

	s := lookup(t, reg, "search_docs")
	if s.Description != "Search the documentation" || s.Effect != dispatch.EffectRead || !s.Idempotent {
		t.Errorf("search_docs = %+v", s)
	}
	var schema any
	if err := json.Unmarshal(s.InputSchema, &schema); err != nil {
		t.Fatalf("InputSchema %s: %v", s.InputSchema, err)
	}
	wantSchema := map[string]any{
		"type":       "object",
		"properties": map[string]any{"q": map[string]any{"type": "string"}},
		"required":   []any{"q"},
	}
	if !reflect.DeepEqual(schema, wantSchema) {
		t.Errorf("InputSchema = %s", s.InputSchema)
	}
	wantRetry := dispatch.RetryPolicy{MaxAttempts: 4, InitialInterval: 100 * time.Millisecond, MaxInterval: 2 * time.Second, Multiplier: 1.5, Jitter: 0.1}
	if s.Retry != wantRetry {
		t.Errorf("Retry = %+v, want %+v", s.Retry, wantRetry)
	}
	ht, ok := s.Impl.(*httpTool)
	if !ok {
		t.Fatalf("Impl = %T, want *httpTool", s.Impl)
	}
	if ht.url != "http://127.0.0.1:9000/search" || ht.timeout != 2*time.Second {
		t.Errorf("http tool url %q timeout %v", ht.url, ht.timeout)
	}
	wantHeader := http.Header{
		"Authorization": {"Bearer " + secret},
		"X-Empty":       {""},
		"X-Literal":     {"$5 and $HOME"},
	}
	if !reflect.DeepEqual(ht.header, wantHeader) {
		t.Errorf("headers = %v, want %v", ht.header, wantHeader)
	}

	w := lookup(t, reg, "write_note")
	if w.Effect != dispatch.EffectWrite || w.Idempotent || w.InputSchema != nil {
		t.Errorf("write_note defaults = %+v", w)
	}
	if w.Retry != (dispatch.RetryPolicy{MaxAttempts: 1}) {
		t.Errorf("write_note Retry = %+v, want one attempt", w.Retry)
	}
	wt := w.Impl.(*httpTool)
	if wt.url != "https://notes.example/notes" || wt.timeout != DefaultTimeout {
		t.Errorf("write_note url %q timeout %v", wt.url, wt.timeout)
	}
	if wt.client != ht.client || wt.client == nil {
		t.Error("tools of one registry should share its HTTP client")
	}

	sh := lookup(t, reg, "shout")
	if sh.Description != "Says it back" || sh.Effect != dispatch.EffectRead {
		t.Errorf("shout = %+v", sh)
	}
	if want := (dispatch.RetryPolicy{MaxAttempts: 2, InitialInterval: defaultRetry.InitialInterval,
		MaxInterval: defaultRetry.MaxInterval, Multiplier: defaultRetry.Multiplier, Jitter: defaultRetry.Jitter}); sh.Retry != want {
		t.Errorf("shout Retry = %+v, want %+v", sh.Retry, want)
	}
	if _, ok := sh.Impl.(*builtin); !ok {
		t.Errorf("shout Impl = %T, want the echo builtin", sh.Impl)
	}
	if _, ok := reg.Lookup("echo"); ok {
		t.Error("echo is registered though only aliased")
	}
}

func TestParseClient(t *testing.T) {
	t.Parallel()
	client := &http.Client{}
	reg, err := Parse([]byte("tools: [{name: a, http: {url: 'http://x/'}}]"), Options{HTTPClient: client})
	if err != nil {
		t.Fatal(err)
	}
	if got := lookup(t, reg, "a").Impl.(*httpTool).client; got != client {
		t.Error("Options.HTTPClient not used")
	}
	reg.CloseIdleConnections() // a no-op: the client is the caller's
}

func TestParseEmpty(t *testing.T) {
	t.Parallel()
	for _, config := range []string{"", "# nothing\n", "---\n", "tools: []\n", "tools:\nbuiltin: []\n"} {
		reg := mustParse(t, config)
		if n := len(reg.List()); n != 0 {
			t.Errorf("%q: %d tools, want none", config, n)
		}
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		config string
		line   int
		tool   string
		msg    string // substring of the first error
	}{
		{"bad name", "tools:\n  - name: 'bad name'\n    http: {url: 'http://x/'}\n", 2, "tools[0]", "must match"},
		{"long name", "tools:\n  - name: " + strings.Repeat("a", 65) + "\n    http: {url: 'http://x/'}\n", 2, "tools[0]", "must match"},
		{"reserved name", "tools:\n  - name: call\n    http: {url: 'http://x/'}\n", 2, "call", `name "call" is reserved`},
		{"missing name", "tools:\n  - http: {url: 'http://x/'}\n", 2, "tools[0]", "name is required"},
		{"duplicate", "tools:\n  - name: a\n    http: {url: 'http://x/'}\n  - name: a\n    http: {url: 'http://y/'}\n", 4, "a", `duplicate tool name "a" (first defined at line 2)`},
		{"duplicate builtin", "tools:\n  - name: echo\n    http: {url: 'http://x/'}\nbuiltin:\n  - echo\n", 5, "echo", `duplicate tool name "echo"`},
		{"bad effect", "tools:\n  - name: a\n    effect: delete\n    http: {url: 'http://x/'}\n", 3, "a", `effect "delete" must be read or write`},
		{"relative url", "tools:\n  - name: a\n    http:\n      url: /search\n", 4, "a", "absolute http or https URL"},
		{"ftp url", "tools:\n  - name: a\n    http: {url: 'ftp://x/'}\n", 3, "a", `scheme is "ftp"`},
		{"missing url", "tools:\n  - name: a\n    http: {timeout: 1s}\n", 3, "a", "http.url is required"},
		{"bad duration", "tools:\n  - name: a\n    http:\n      url: http://x/\n      timeout: 30\n", 5, "a", `http.timeout "30" is not a duration`},
		{"negative duration", "tools:\n  - name: a\n    http: {url: 'http://x/', timeout: -1s}\n", 3, "a", "must be positive"},
		{"undefined env", "tools:\n  - name: a\n    http:\n      url: http://x/\n      headers:\n        X-Key: ${NOPE}\n", 6, "a", "environment variable NOPE is not set"},
		{"undefined env in url", "tools:\n  - name: a\n    http: {url: 'http://${NOPE}/'}\n", 3, "a", "environment variable NOPE is not set"},
		{"unterminated env", "tools:\n  - name: a\n    http: {url: 'http://x/', headers: {X: '${TOKEN'}}\n", 3, "a", "unterminated ${"},
		{"bad header name", "tools:\n  - name: a\n    http: {url: 'http://x/', headers: {'X Y': v}}\n", 3, "a", "not a valid header name"},
		{"reserved header", "tools:\n  - name: a\n    http: {url: 'http://x/', headers: {idempotency-key: v}}\n", 3, "a", "Idempotency-Key is set by turnd"},
		{"header twice", "tools:\n  - name: a\n    http: {url: 'http://x/', headers: {x-a: v, X-A: w}}\n", 3, "a", "X-A is given twice"},
		{"control char in header", "tools:\n  - name: a\n    http: {url: 'http://x/', headers: {X-A: \"a\\nb\"}}\n", 3, "a", "control characters"},
		{"bad schema", "tools:\n  - name: a\n    input_schema: {type: object, properties: {q: {type: strng}}}\n    http: {url: 'http://x/'}\n", 3, "a", "input_schema: not a valid JSON Schema: at /properties/q/type"},
		{"schema not object", "tools:\n  - name: a\n    input_schema: {type: string}\n    http: {url: 'http://x/'}\n", 3, "a", `"type" must be "object"`},
		{"schema external ref", "tools:\n  - name: a\n    input_schema: {$ref: 'file:///etc/passwd'}\n    http: {url: 'http://x/'}\n", 3, "a", "external schema references are not allowed"},
		{"schema not a mapping", "tools:\n  - name: a\n    input_schema: [1]\n    http: {url: 'http://x/'}\n", 3, "a", "must be a JSON Schema object"},
		{"unknown key", "tools:\n  - name: a\n    http: {url: 'http://x/'}\n    timeout: 1s\n", 4, "a", `unknown field "timeout"`},
		{"unknown nested key", "tools:\n  - name: a\n    http:\n      url: 'http://x/'\n      header: {}\n", 5, "a", `unknown field "header"`},
		{"unknown top-level key", "tools: []\npending: {}\n", 2, "", `unknown field "pending"`},
		{"type mismatch", "tools:\n  - name: a\n    idempotent: sometimes\n    http: {url: 'http://x/'}\n", 3, "a", "idempotent: expected a boolean, got a string"},
		{"integer expected", "tools:\n  - name: a\n    http: {url: 'http://x/'}\n    retry: {max_attempts: many}\n", 4, "a", "max_attempts: expected an integer, got a string"},
		{"after the tools block", "tools:\n  - name: a\n    http: {url: 'http://x/'}\nbuiltin: {a: 1}\n", 4, "", "mapping was used where sequence is expected"},
		{"tag", "tools:\n  - name: a\n    http: {url: !!str 'http://x/'}\n", 3, "a", "YAML tags (!tag) are not supported"},
		{"duplicate key", "tools:\n  - name: a\n    name: b\n    http: {url: 'http://x/'}\n", 3, "", `mapping key "name" already defined`},
		{"syntax", "tools: [\n", 1, "", "not found"},
		{"unknown builtin", "builtin: [echo, shell]\n", 1, "", `unknown builtin "shell"; the builtins are: approval, echo, now, sleep`},
		{"unknown builtin entry", "tools:\n  - name: a\n    builtin: shell\n", 3, "a", `unknown builtin "shell"`},
		{"builtin with schema", "tools:\n  - name: a\n    builtin: echo\n    input_schema: {type: object}\n", 4, "a", "input_schema cannot be set for builtin"},
		{"both", "tools:\n  - name: a\n    builtin: echo\n    http: {url: 'http://x/'}\n", 2, "a", "has both http and builtin"},
		{"neither", "tools:\n  - name: a\n    description: nothing\n", 2, "a", "needs an implementation"},
		{"max attempts 0", "tools:\n  - name: a\n    http: {url: 'http://x/'}\n    retry:\n      max_attempts: 0\n", 5, "a", "retry.max_attempts: must be between 1 and 20"},
		{"max attempts 21", "tools:\n  - name: a\n    http: {url: 'http://x/'}\n    retry: {max_attempts: 21}\n", 4, "a", "retry.max_attempts"},
		{"multiplier", "tools:\n  - name: a\n    http: {url: 'http://x/'}\n    retry: {multiplier: 0.5}\n", 4, "a", "retry.multiplier: must be a number ≥ 1"},
		{"multiplier nan", "tools:\n  - name: a\n    http: {url: 'http://x/'}\n    retry: {multiplier: .nan}\n", 4, "a", "retry.multiplier"},
		{"jitter", "tools:\n  - name: a\n    http: {url: 'http://x/'}\n    retry: {jitter: 1.5}\n", 4, "a", "retry.jitter: must be between 0 and 1"},
		{"retry interval", "tools:\n  - name: a\n    http: {url: 'http://x/'}\n    retry: {initial_interval: soon}\n", 4, "a", `retry.initial_interval: "soon" is not a duration`},
		{"retry intervals order", "tools:\n  - name: a\n    http: {url: 'http://x/'}\n    retry: {initial_interval: 10s, max_interval: 1s}\n", 4, "a", "retry.max_interval: must not be less than initial_interval"},
		{"two documents", "tools: []\n---\nbuiltin: []\n", 3, "", "more than one YAML document"},
		{"pending without deferred", "tools:\n  - name: a\n    http: {url: 'http://x/'}\n    pending: {deadline: 1h}\n", 4, "a", "pending is only allowed with deferred: true"},
		{"pending with deferred false", "tools:\n  - name: a\n    deferred: false\n    http: {url: 'http://x/'}\n    pending:\n      deadline: 1h\n", 6, "a", "pending is only allowed with deferred: true"},
		{"cancel_url without deferred", "tools:\n  - name: a\n    http:\n      url: http://x/\n      cancel_url: http://x/cancel\n", 5, "a", "http.cancel_url is only allowed with deferred: true"},
		{"relative cancel_url", "tools:\n  - name: a\n    deferred: true\n    http:\n      url: http://x/\n      cancel_url: /cancel\n", 6, "a", "http.cancel_url must be an absolute http or https URL"},
		{"ftp cancel_url", "tools:\n  - name: a\n    deferred: true\n    http: {url: 'http://x/', cancel_url: 'ftp://x/'}\n", 4, "a", `http.cancel_url must be an absolute http or https URL (scheme is "ftp")`},
		{"undefined env in cancel_url", "tools:\n  - name: a\n    deferred: true\n    http: {url: 'http://x/', cancel_url: 'http://x/?t=${NOPE}'}\n", 4, "a", "http.cancel_url: environment variable NOPE is not set"},
		{"cancel_url not a URL with the secret", "tools:\n  - name: a\n    deferred: true\n    http: {url: 'http://x/', cancel_url: '${TOKEN}'}\n", 4, "a", "http.cancel_url must be an absolute http or https URL"},
		{"deferred not a boolean", "tools:\n  - name: a\n    deferred: yes\n    http: {url: 'http://x/'}\n", 3, "a", "deferred: expected a boolean, got a string"},
		{"pending deadline not a duration", "tools:\n  - name: a\n    deferred: true\n    http: {url: 'http://x/'}\n    pending:\n      on_timeout: fail_turn\n      deadline: forever\n", 7, "a", `pending.deadline "forever": not a Go duration`},
		{"pending deadline absolute", "tools:\n  - name: a\n    deferred: true\n    http: {url: 'http://x/'}\n    pending: {deadline: '2030-01-01T00:00:00Z'}\n", 5, "a", "an absolute time belongs in a pending answer"},
		{"pending deadline too long", "tools:\n  - name: a\n    deferred: true\n    http: {url: 'http://x/'}\n    pending: {deadline: 721h}\n", 5, "a", `pending.deadline "721h": longer than the maximum`},
		{"pending deadline zero", "tools:\n  - name: a\n    deferred: true\n    http: {url: 'http://x/'}\n    pending: {deadline: 0s}\n", 5, "a", `pending.deadline "0s": not positive`},
		{"pending heartbeat past the deadline", "tools:\n  - name: a\n    deferred: true\n    http: {url: 'http://x/'}\n    pending:\n      deadline: 1h\n      heartbeat_timeout: 2h\n", 7, "a", `pending.heartbeat_timeout "2h"`},
		{"pending on_timeout", "tools:\n  - name: a\n    deferred: true\n    http: {url: 'http://x/'}\n    pending:\n      on_timeout: retry\n", 6, "a", `pending.on_timeout "retry": not "error_as_result" or "fail_turn"`},
		{"pending on_cancel", "tools:\n  - name: a\n    deferred: true\n    http: {url: 'http://x/'}\n    pending:\n      on_cancel: abort\n", 6, "a", `pending.on_cancel "abort"`},
		{"pending unknown field", "tools:\n  - name: a\n    deferred: true\n    http: {url: 'http://x/'}\n    pending:\n      deadlin: 1h\n", 6, "a", `unknown field "deadlin"`},
		{"pending not a mapping", "tools:\n  - name: a\n    deferred: true\n    http: {url: 'http://x/'}\n    pending: [1h]\n", 5, "a", "sequence was used where mapping is expected"},
		{"cancel_external_work without cancel_url", "tools:\n  - name: a\n    deferred: true\n    http: {url: 'http://x/'}\n    pending:\n      on_cancel: cancel_external_work\n", 6, "a", "pending.on_cancel cancel_external_work needs an http.cancel_url"},
		{"builtin deferred", "tools:\n  - name: a\n    builtin: approval\n    deferred: true\n", 4, "a", `deferred cannot be set for builtin "approval"`},
		{"pending on a builtin that never defers", "tools:\n  - name: a\n    builtin: echo\n    pending: {deadline: 1h}\n", 4, "a", `pending cannot be set for builtin "echo": it never defers a call`},
		{"approval pending invalid", "tools:\n  - name: a\n    builtin: approval\n    pending: {deadline: 1y}\n", 4, "a", `pending.deadline "1y"`},
		{"approval cancel_external_work", "tools:\n  - name: a\n    builtin: approval\n    pending: {on_cancel: cancel_external_work}\n", 4, "a", "needs an http.cancel_url"},
		{"not a mapping", "- a\n", 1, "", "sequence was used where mapping is expected"},
		{"unknown projection window", "tools:\n  - name: a\n    http: {url: 'http://x/'}\n    projection:\n      window: middle\n", 5, "a", `projection.window "middle": want "head", "tail", "head_tail" or "errors"`},
		{"empty projection pattern", "tools:\n  - name: a\n    http: {url: 'http://x/'}\n    projection:\n      window: errors\n      patterns: [FAIL, '']\n", 6, "a", `projection.patterns "": a pattern must not be empty`},
		{"projection unknown key", "tools:\n  - name: a\n    http: {url: 'http://x/'}\n    projection: {mode: errors}\n", 4, "a", "unknown field"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := parseConfig(t, tt.config)
			if err == nil {
				t.Fatal("Parse succeeded")
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("error %v is not ErrInvalidConfig", err)
			}
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("error %v (%T) holds no *ConfigError", err, err)
			}
			if ce.Line != tt.line || ce.Tool != tt.tool || !strings.Contains(ce.Msg, tt.msg) {
				t.Errorf("got line %d, tool %q, msg %q\nwant line %d, tool %q, msg containing %q", ce.Line, ce.Tool, ce.Msg, tt.line, tt.tool, tt.msg)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error shows the secret: %v", err)
			}
		})
	}
}

func TestParseProjection(t *testing.T) {
	t.Parallel()
	reg := mustParse(t, "tools:\n  - name: build\n    http: {url: 'http://x/'}\n    projection: {window: errors, patterns: ['undefined:', FAIL]}\n  - name: plain\n    http: {url: 'http://x/'}\n  - name: said\n    builtin: echo\n    projection: {window: tail}\n")
	tests := []struct {
		tool string
		want budget.Projection
	}{
		{"build", budget.Projection{Window: budget.WindowErrors, Patterns: []string{"undefined:", "FAIL"}}},
		{"plain", budget.Projection{}},
		{"said", budget.Projection{Window: budget.WindowTail}},
	}
	for _, tt := range tests {
		if got := lookup(t, reg, tt.tool).Projection; !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: Projection = %+v, want %+v", tt.tool, got, tt.want)
		}
	}
}

func TestParseDeferred(t *testing.T) {
	t.Parallel()
	reg := mustParse(t, `
tools:
  - name: deploy
    deferred: true
    pending: {deadline: 2h, heartbeat_timeout: 10m, on_timeout: fail_turn, on_cancel: cancel_external_work}
    http:
      url: http://${HOST}/run
      cancel_url: "http://${HOST}/cancel?t=${TOKEN}#frag"
      timeout: 3s
  - name: quick
    deferred: true
    pending: {}
    http: {url: 'http://x/'}
  - name: plain
    http: {url: 'http://x/'}
  - name: ask
    builtin: approval
    pending: {deadline: 1h, on_timeout: fail_turn}
builtin: [approval]
`)
	d := lookup(t, reg, "deploy")
	wantPending := completion.Options{Deadline: "2h", HeartbeatTimeout: "10m", OnTimeout: completion.OnTimeoutFailTurn, OnCancel: completion.OnCancelExternalWork}
	if !d.Deferred || d.Pending != wantPending || d.CancelURL != "http://127.0.0.1:9000/cancel?t="+secret {
		t.Errorf("deploy: Deferred %v, Pending %+v, CancelURL %q", d.Deferred, d.Pending, d.CancelURL)
	}
	if ht := d.Impl.(*httpTool); !ht.deferred || ht.pending != wantPending || ht.cancelURL != d.CancelURL {
		t.Errorf("deploy's tool: deferred %v, pending %+v", ht.deferred, ht.pending)
	}
	if q := lookup(t, reg, "quick"); !q.Deferred || q.Pending != (completion.Options{}) || q.CancelURL != "" {
		t.Errorf("quick = %+v", q)
	}
	if p := lookup(t, reg, "plain"); p.Deferred || p.Impl.(*httpTool).deferred {
		t.Errorf("plain is deferred")
	}

	approvalDefaults := completion.Options{OnTimeout: completion.OnTimeoutErrorAsResult, OnCancel: completion.OnCancelIgnore}
	for name, want := range map[string]completion.Options{
		"approval": approvalDefaults,
		"ask":      {Deadline: "1h", OnTimeout: completion.OnTimeoutFailTurn, OnCancel: completion.OnCancelIgnore},
	} {
		s := lookup(t, reg, name)
		if !s.Deferred || s.Effect != dispatch.EffectWrite || s.Pending != want || s.CancelURL != "" {
			t.Errorf("%s: Deferred %v, Effect %v, Pending %+v", name, s.Deferred, s.Effect, s.Pending)
		}
		if got := s.Impl.(*approvalTool).defaults; got != want {
			t.Errorf("%s's tool defaults = %+v, want %+v", name, got, want)
		}
	}
}

// TestParseErrorsAll checks that every problem is reported, in line order.
func TestParseErrorsAll(t *testing.T) {
	t.Parallel()
	config := "tools:\n" +
		"  - name: a\n" +
		"    effect: sideways\n" +
		"    http: {url: 'http://${TOKEN}:x/', headers: {X-Key: 'Bearer ${TOKEN}${MISSING}'}}\n" +
		"  - name: b\n" +
		"    http: {url: 'http://x/'}\n" +
		"    retry: {jitter: -1}\n"
	_, err := parseConfig(t, config)
	if err == nil {
		t.Fatal("Parse succeeded")
	}
	got := err.Error()
	want := `tool config: line 3: tool "a": effect "sideways" must be read or write
tool config: line 4: tool "a": http.url must be an absolute http or https URL
tool config: line 4: tool "a": http.headers.X-Key: environment variable MISSING is not set
tool config: line 7: tool "b": retry.jitter: must be between 0 and 1`
	if got != want {
		t.Errorf("error:\n%s\nwant:\n%s", got, want)
	}
}

// TestOpenFile checks the config file as turnd serve reads it (Open): its
// tools, and its errors naming the file.
func TestOpenFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "tools.yaml")
	if err := os.WriteFile(path, []byte("builtin: [echo]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	live, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if _, ok := live.Registry().Lookup("echo"); !ok {
		t.Error("echo not loaded")
	}

	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("builtin: [echo]\nbogus: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Open(t.Context(), bad, Options{})
	if want := bad + `:2: unknown field "bogus"`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Open(bad) = %v, want it to contain %q", err, want)
	}

	if _, err := Open(t.Context(), filepath.Join(dir, "missing.yaml"), Options{}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Open(missing) = %v, want ErrNotExist", err)
	}
}

func TestExpandEnv(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, out string
		err     string
	}{
		{in: "plain", out: "plain"},
		{in: "Bearer ${TOKEN}", out: "Bearer " + secret},
		{in: "${HOST}${EMPTY}/x", out: "127.0.0.1:9000/x"},
		{in: "$$${TOKEN}", out: "$" + secret},
		{in: "$HOME $", out: "$HOME $"},
		{in: "${NOPE}", err: "environment variable NOPE is not set"},
		{in: "${}", err: "not a valid variable reference"},
		{in: "${A-B}", err: "not a valid variable reference"},
		{in: "x${TOKEN", err: "unterminated"},
	}
	for _, tt := range tests {
		got, err := expandEnv(tt.in, testEnv)
		switch {
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("expandEnv(%q) error = %v, want %q", tt.in, err, tt.err)
		case tt.err == "" && (err != nil || got != tt.out):
			t.Errorf("expandEnv(%q) = %q, %v; want %q", tt.in, got, err, tt.out)
		}
	}
}

func TestConfigErrorFormat(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  ConfigError
		want string
	}{
		{ConfigError{File: "t.yaml", Line: 3, Tool: "a", Msg: "m"}, `tool config: t.yaml:3: tool "a": m`},
		{ConfigError{File: "t.yaml", Msg: "m"}, `tool config: t.yaml: m`},
		{ConfigError{Line: 3, Tool: "tools[1]", Msg: "m"}, `tool config: line 3: tools[1]: m`},
		{ConfigError{Msg: "m"}, `tool config: m`},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(fullConfig))
	f.Add([]byte("tools: [{name: a, http: {url: 'http://x/'}}]"))
	f.Add([]byte("builtin: [echo]"))
	f.Add([]byte("tools: [{name: a, deferred: true, pending: {deadline: 1h, on_cancel: cancel_external_work}, http: {url: 'http://x/', cancel_url: 'http://x/c'}}, {name: b, builtin: approval, pending: {}}]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		reg, err := Parse(data, Options{Env: testEnv})
		if err != nil {
			if strings.Contains(err.Error(), secret) && !strings.Contains(string(data), secret) {
				t.Errorf("error shows the secret: %v", err)
			}
			return
		}
		reg.CloseIdleConnections()
	})
}
