package tool

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
	"github.com/turnd/turnd/internal/testnet"
)

// docsEnv sets the variables the repository's examples and docs/config.md
// refer to.
func docsEnv(name string) (string, bool) {
	switch name {
	case "SEARCH_TOKEN", "DOCS_MCP_TOKEN", "FS_KEY", "DEPLOY_TOKEN", "TOKEN":
		return "t0ken", true
	case "PATH", "HOME":
		return os.Getenv(name), true
	}
	return "", false
}

// checkString writes config to a file and checks it.
func checkString(t *testing.T, config string, env func(string) (string, bool)) (Summary, error) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "turnd.yaml")
	if err := os.WriteFile(p, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	return Check(p, Options{Env: env})
}

// repoExamples are the tool configs the repository ships, by name: the
// example and deployment files (the ConfigMap's embedded file included)
// and every yaml block of docs/config.md.
func repoExamples(t *testing.T) map[string]string {
	t.Helper()
	read := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	ex := map[string]string{
		"examples/turnd.yaml":       read("../examples/turnd.yaml"),
		"deploy/compose/turnd.yaml": read("../deploy/compose/turnd.yaml"),
	}
	var cm struct {
		Data map[string]string `yaml:"data"`
	}
	if err := yaml.Unmarshal([]byte(read("../deploy/kubernetes/configmap.yaml")), &cm); err != nil || cm.Data["turnd.yaml"] == "" {
		t.Fatalf("configmap.yaml: no data turnd.yaml (%v)", err)
	}
	ex["deploy/kubernetes/configmap.yaml"] = cm.Data["turnd.yaml"]
	// The commented-out entries, uncommented as the files say.
	ex["examples/turnd.yaml, mcp block"] = uncomment(ex["examples/turnd.yaml"], "#  - mcp:", "#", "tools:")
	for _, name := range []string{"deploy/compose/turnd.yaml", "deploy/kubernetes/configmap.yaml"} {
		ex[name+", http tool"] = uncomment(ex[name], "# tools:", "# ", "")
	}
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(read("../docs/config.md"), -1)
	if len(blocks) < 5 {
		t.Fatalf("docs/config.md has %d yaml blocks, want its examples", len(blocks))
	}
	for i, b := range blocks {
		ex[fmt.Sprintf("docs/config.md block %d", i+1)] = b[1]
	}
	return ex
}

// uncomment removes strip from the start of the comment lines from the
// first one that starts with from to the block's end, and replaces the
// line "tools: []" with tools.
func uncomment(text, from, strip, tools string) string {
	var b strings.Builder
	in := false
	for _, line := range strings.Split(text, "\n") {
		switch {
		case line == "tools: []":
			line = tools
		case strings.HasPrefix(line, from):
			in = true
		case !strings.HasPrefix(line, "#"):
			in = false
		}
		if in {
			line = strings.TrimPrefix(line, strip)
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

// TestConfigExamplesValid: every tool config the repository ships passes
// the schema and the loader. docs/config.md's stdio example runs in
// /srv/docs, which the test replaces with a directory that exists.
func TestConfigExamplesValid(t *testing.T) {
	t.Parallel()
	cwd := t.TempDir()
	for name, config := range repoExamples(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			config = strings.ReplaceAll(config, "/srv/docs", cwd)
			sum, err := checkString(t, config, docsEnv)
			if err != nil {
				t.Errorf("%v\n%s", err, config)
			}
			if strings.Contains(name, ", ") && sum.HTTP+sum.MCP == 0 {
				t.Errorf("uncommented, the file has no http tool or mcp entry:\n%s", config)
			}
		})
	}
}

// TestConfigSchemaAcceptsValidConfigs: configs the loader accepts in this
// package's tests pass the schema too.
func TestConfigSchemaAcceptsValidConfigs(t *testing.T) {
	t.Parallel()
	for i, config := range []string{
		fullConfig,
		"",
		"tools:\n",
		"builtin: []\ntools: []\n",
		"tools:\n  - name: ask\n    builtin: approval\n    pending: {deadline: 1h, on_timeout: fail_turn, on_cancel: ignore}\n",
		"tools:\n  - name: d\n    deferred: true\n    pending: {deadline: 2h, heartbeat_timeout: 10m, on_cancel: cancel_external_work}\n" +
			"    http: {url: 'http://h/run', cancel_url: 'http://h/cancel'}\n",
		"tools:\n  - mcp: {url: 'http://h/mcp', headers: {Authorization: 'Bearer ${TOKEN}'}, prefix: docs_, trust_annotations: true, timeout: 5s}\n    retry: {max_attempts: 1}\n",
		"tools:\n  - mcp:\n      command: [srv, --flag]\n      env: {A_B: x}\n      prefix: fs_\n",
		"tools:\n  - name: t\n    http: {url: 'http://h/', timeout: 1h30m}\n    retry: {initial_interval: .5s, max_interval: 1.5s, multiplier: 1, jitter: 0}\n",
	} {
		if _, err := checkString(t, config, testEnv); err != nil {
			t.Errorf("config %d: %v\n%s", i, err, config)
		}
	}
}

// TestCheckRejects: bad configs are rejected with the place of the
// problem; schema says whether the schema alone rejects the config too
// (what an editor shows).
func TestCheckRejects(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, config string
		line, col    int // of the first problem
		msg          string
		schema       bool
	}{
		{"unknown key", "tools:\n  - name: a\n    http: {url: 'http://h/'}\n    colour: red\n", 4, 5, `unknown field "colour"`, true},
		{"unknown top-level key", "tool:\n  - name: a\n", 1, 1, `unknown field "tool"`, true},
		{"unknown http key", "tools:\n  - name: a\n    http:\n      url: http://h/\n      verb: GET\n", 5, 7, `unknown field "verb"`, true},
		{"wrong type", "tools:\n  - name: a\n    idempotent: yes please\n    http: {url: 'http://h/'}\n", 3, 17, "idempotent: expected a boolean, got a string", true},
		{"timeout a number", "tools:\n  - name: a\n    http:\n      url: http://h/\n      timeout: 30\n", 5, 16, `http.timeout "30" is not a duration`, true},
		{"missing name", "tools:\n  - description: d\n    http: {url: 'http://h/'}\n", 2, 5, "name is required", true},
		{"missing implementation", "tools:\n  - name: a\n", 2, 5, "needs an implementation", true},
		{"missing url", "tools:\n  - name: a\n    http: {timeout: 1s}\n", 3, 11, "http.url is required", true},
		{"bad duration", "tools:\n  - name: a\n    http:\n      url: http://h/\n      timeout: 3x\n", 5, 16, `http.timeout "3x" is not a duration`, true},
		{"zero duration", "tools:\n  - name: a\n    http:\n      url: http://h/\n      timeout: 0s\n", 5, 16, "http.timeout must be positive", false},
		{"bad retry duration", "tools:\n  - name: a\n    http: {url: 'http://h/'}\n    retry:\n      max_interval: soon\n", 5, 21, `retry.max_interval: "soon" is not a duration`, true},
		{"duplicate tool name", "tools:\n  - name: a\n    http: {url: 'http://h/'}\n  - name: a\n    builtin: echo\n", 4, 11, `duplicate tool name "a" (first defined at line 2)`, false},
		{"duplicate builtin", "builtin: [echo, echo]\n", 1, 17, `duplicate tool name "echo"`, true},
		{"url and command", "tools:\n  - mcp:\n      url: http://h/mcp\n      command: [srv]\n", 3, 7, "mcp.url is not allowed here: A stdio server", true},
		{"mcp without server", "tools:\n  - mcp:\n      prefix: x_\n", 3, 7, "mcp.url is required (or mcp.command", true},
		{"headers with command", "tools:\n  - mcp:\n      command: [srv]\n      headers: {X-A: b}\n", 4, 16, "mcp.headers goes with mcp.url", true},
		{"name in mcp entry", "tools:\n  - name: x\n    mcp: {url: 'http://h/mcp'}\n", 2, 11, "name cannot be set in an mcp entry", true},
		{"unknown builtin", "builtin: [echo, shout]\n", 1, 17, `unknown builtin "shout"`, true},
		{"builtin with effect", "tools:\n  - name: e\n    builtin: echo\n    effect: read\n", 4, 13, "effect cannot be set for builtin", true},
		{"bad effect", "tools:\n  - name: a\n    effect: sideways\n    http: {url: 'http://h/'}\n", 3, 13, `effect "sideways" must be read or write`, true},
		{"bad name", "tools:\n  - name: a.b\n    http: {url: 'http://h/'}\n", 2, 11, "must match", true},
		{"reserved name", "tools:\n  - name: call\n    http: {url: 'http://h/'}\n", 2, 11, "is reserved", true},
		{"pending without deferred", "tools:\n  - name: a\n    http: {url: 'http://h/'}\n    pending: {deadline: 1h}\n", 4, 14, "pending is only allowed with deferred: true", true},
		{"cancel_url without deferred", "tools:\n  - name: a\n    http: {url: 'http://h/', cancel_url: 'http://h/c'}\n", 3, 42, "http.cancel_url is only allowed with deferred: true", true},
		{"deadline too long", "tools:\n  - name: a\n    deferred: true\n    http: {url: 'http://h/'}\n    pending: {deadline: 1000h}\n", 5, 25, "pending.deadline", false},
		{"bad on_timeout", "tools:\n  - name: a\n    deferred: true\n    http: {url: 'http://h/'}\n    pending: {on_timeout: shrug}\n", 5, 27, "on_timeout", true},
		{"max_attempts", "tools:\n  - name: a\n    http: {url: 'http://h/'}\n    retry: {max_attempts: 0}\n", 4, 27, "retry.max_attempts: must be between 1 and 20", true},
		{"jitter", "tools:\n  - name: a\n    http: {url: 'http://h/'}\n    retry: {jitter: 2}\n", 4, 21, "retry.jitter: must be between 0 and 1", true},
		{"relative url", "tools:\n  - name: a\n    http: {url: '/search'}\n", 3, 17, "http.url must be an absolute http or https URL", false},
		{"unset variable", "tools:\n  - name: a\n    http: {url: 'http://${NOPE}/'}\n", 3, 17, "environment variable NOPE is not set", false},
		{"reserved header", "tools:\n  - name: a\n    http: {url: 'http://h/', headers: {Host: x}}\n", 3, 46, "http.headers: Host is set by turnd", false},
		{"env with url", "tools:\n  - mcp:\n      url: http://h/mcp\n      env: {A: b}\n", 4, 12, "mcp.env goes with mcp.command", true},
		{"bad prefix", "tools:\n  - mcp: {url: 'http://h/mcp', prefix: 'a.b'}\n", 2, 40, "mcp.prefix", true},
		{"YAML syntax", "tools:\n  - name: a\n    http: {url: 'http://h/'\n", 3, 11, "", false},
		{"tag", "tools:\n  - name: !x a\n    http: {url: 'http://h/'}\n", 2, 11, "YAML tags", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := checkString(t, tt.config, testEnv)
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Check = %v, want a config error", err)
			}
			var first *ConfigError
			for _, e := range flatten(err) {
				var ce *ConfigError
				if !errors.As(e, &ce) || ce.Line == 0 || ce.Column == 0 || !strings.HasPrefix(ce.Located(), ce.File+":") {
					t.Errorf("problem %q has no line and column", e)
					continue
				}
				if first == nil {
					first = ce
				}
			}
			if first == nil || first.Line != tt.line || first.Column != tt.col || !strings.Contains(first.Msg, tt.msg) {
				var got []string
				for _, e := range flatten(err) {
					got = append(got, e.(*ConfigError).Located())
				}
				t.Errorf("got\n%s\nwant the first at %d:%d containing %q", strings.Join(got, "\n"), tt.line, tt.col, tt.msg)
			}
			if tt.name == "YAML syntax" || tt.name == "tag" {
				return // not a document the schema can see
			}
			l := &loader{file: "t.yaml", opts: Options{Env: testEnv}.withDefaults()}
			if err := l.readBody([]byte(tt.config)); err != nil {
				t.Fatal(err)
			}
			if got, err := l.schemaProblems(); err != nil || (len(got) > 0) != tt.schema {
				t.Errorf("the schema alone found %v (%v); want problems: %v", got, err, tt.schema)
			}
		})
	}
}

// TestCheckSummary: Check counts what a config defines, and starts or
// reaches nothing: the stdio server's command would leave a file behind,
// and the MCP server's URL has no server.
func TestCheckSummary(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	marker := filepath.Join(dir, "started")
	script := filepath.Join(dir, "server.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\ntouch "+marker+"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf(`builtin: [echo, now]
tools:
  - name: search
    http: {url: "http://%s/search"}
  - name: deploy
    deferred: true
    http: {url: "http://%[1]s/deploy"}
  - name: ask
    builtin: approval
  - mcp: {url: "http://%[1]s/mcp"}
  - mcp: {command: [%q], cwd: %q}
`, testnet.ClosedAddr(t), script, dir)
	sum, err := checkString(t, config, testEnv)
	if err != nil {
		t.Fatal(err)
	}
	want := Summary{Tools: 5, HTTP: 2, Builtins: 3, Deferred: 2, MCP: 2, MCPStdio: 1}
	if sum != want {
		t.Errorf("Summary = %+v, want %+v", sum, want)
	}
	if got, want := sum.String(), "5 tools (2 http, 3 builtin, 2 deferred), 2 mcp servers (1 http, 1 stdio)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Errorf("the stdio server was started (%v)", err)
	}
	if got := (Summary{Tools: 1, Builtins: 1}).String(); got != "1 tool (1 builtin), 0 mcp servers" {
		t.Errorf("String() = %q", got)
	}
}

// TestCheckUnreadable: a file that cannot be read is not a config error.
func TestCheckUnreadable(t *testing.T) {
	t.Parallel()
	_, err := Check(filepath.Join(t.TempDir(), "nope.yaml"), Options{})
	if err == nil || errors.Is(err, ErrInvalidConfig) || !errors.Is(err, os.ErrNotExist) || len(ConfigErrors(err)) != 0 {
		t.Errorf("Check = %v, want a not-exist error", err)
	}
}

// FuzzConfigSchema: the schema check of any YAML the loader can read never
// panics, and each problem it finds has a place in the file.
func FuzzConfigSchema(f *testing.F) {
	for _, seed := range []string{fullConfig, "tools:\n  - mcp: {url: x, command: [a]}\n", "builtin: [1, {a: b}]\n",
		"tools: &a\n  - *a\n", "? [a]\n: b\n", "tools:\n  - name: a\n    pending: {deadline: [1]}\n"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, config string) {
		l := &loader{file: "f.yaml", opts: Options{Env: testEnv}.withDefaults()}
		if l.readBody([]byte(config)) != nil {
			return
		}
		problems, err := l.schemaProblems()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			if p.Line == 0 {
				t.Errorf("problem without a line: %v", p)
			}
		}
	})
}

// schemaNode resolves a local $ref ("#/$defs/x") of the config schema.
func schemaNode(t *testing.T, root, n map[string]any) map[string]any {
	t.Helper()
	for {
		ref, ok := n["$ref"].(string)
		if !ok {
			return n
		}
		def := strings.TrimPrefix(ref, "#/$defs/")
		next, ok := root["$defs"].(map[string]any)[def].(map[string]any)
		if !ok {
			t.Fatalf("unresolved $ref %s", ref)
		}
		n = next
	}
}

// TestConfigSchemaMatchesTypes walks the config's Go types by their yaml
// tags beside the schema: a key one has and the other lacks fails, so the
// two cannot drift apart.
func TestConfigSchemaMatchesTypes(t *testing.T) {
	t.Parallel()
	var root map[string]any
	if err := json.Unmarshal(ConfigSchema(), &root); err != nil {
		t.Fatal(err)
	}
	var walk func(path string, typ reflect.Type, node map[string]any)
	walk = func(path string, typ reflect.Type, node map[string]any) {
		props, _ := node["properties"].(map[string]any)
		if node["additionalProperties"] != false {
			t.Errorf("%s: the schema allows keys it does not name (additionalProperties is not false)", path)
		}
		var keys []string
		for i := range typ.NumField() {
			f := typ.Field(i)
			key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if key == "" || key == "-" {
				continue
			}
			keys = append(keys, key)
			prop, ok := props[key].(map[string]any)
			if !ok {
				t.Errorf("%s%s: in the Go type (%s.%s) but not in the schema", path, key, typ.Name(), f.Name)
				continue
			}
			prop = schemaNode(t, root, prop)
			ft := f.Type
			for ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice {
				if ft.Kind() == reflect.Slice {
					items, ok := prop["items"].(map[string]any)
					if !ok {
						t.Errorf("%s%s: a list in Go, not in the schema", path, key)
						break
					}
					prop = schemaNode(t, root, items)
				}
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				walk(path+key+".", ft, prop)
			}
		}
		for key := range props {
			if !slices.Contains(keys, key) {
				t.Errorf("%s%s: in the schema but not in the Go type %s", path, key, typ.Name())
			}
		}
	}
	// pending's keys are completion.Options', reached through rawTool.
	walk("", reflect.TypeFor[rawFile](), root)
}

// TestConfigDocsCoverSchema: docs/config.md names every key of the schema.
func TestConfigDocsCoverSchema(t *testing.T) {
	t.Parallel()
	docs, err := os.ReadFile("../docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	var root map[string]any
	if err := json.Unmarshal(ConfigSchema(), &root); err != nil {
		t.Fatal(err)
	}
	nodes := []map[string]any{root}
	for _, d := range root["$defs"].(map[string]any) {
		nodes = append(nodes, d.(map[string]any))
	}
	for _, n := range nodes {
		props, _ := n["properties"].(map[string]any)
		for key := range props {
			if !strings.Contains(string(docs), "`"+key+"`") {
				t.Errorf("docs/config.md does not describe `%s`", key)
			}
		}
	}
}

// TestCheckReportsAll: the schema finds what the loader's strict decoder,
// which stops at the first unknown key, does not reach.
func TestCheckReportsAll(t *testing.T) {
	t.Parallel()
	_, err := checkString(t, "tools:\n  - name: a\n    http: {url: 'http://h/'}\n    colour: red\n"+
		"  - name: b\n    http: {url: 'http://h/', verb: GET}\n", testEnv)
	var got []string
	for _, e := range flatten(err) {
		ce := e.(*ConfigError)
		got = append(got, fmt.Sprintf("%d:%d %s", ce.Line, ce.Column, ce.Msg))
	}
	want := []string{`4:5 unknown field "colour"`, `6:30 schema: unknown key "verb" in tools[1].http`}
	if !slices.Equal(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
