package tool

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestResourceExpand(t *testing.T) {
	t.Parallel()
	cases := []struct {
		templates []string
		args      string
		want      []string
		err       string
	}{
		{[]string{"file:{/path}"}, `{"path":"a.txt"}`, []string{"file:a.txt"}, ""},
		{[]string{"db:{/table}/{/id}"}, `{"table":"users","id":7}`, []string{"db:users/7"}, ""},
		{[]string{"db:{/id}"}, `{"id":1.50}`, []string{"db:1.5"}, ""},
		// A number is one resource however it is written.
		{[]string{"db:{/id}", "db:{/a}", "db:{/b}", "db:{/c}"}, `{"id":7,"a":7.0,"b":7e0,"c":70e-1}`, []string{"db:7", "db:7", "db:7", "db:7"}, ""},
		{[]string{"db:{/id}"}, `{"id":-0.0}`, []string{"db:0"}, ""},
		{[]string{"flag:{/on}"}, `{"on":true}`, []string{"flag:true"}, ""},
		{[]string{"file:{/paths/*}"}, `{"paths":["a","b"]}`, []string{"file:a", "file:b"}, ""},
		{[]string{"file:{/paths/*/name}"}, `{"paths":[{"name":"a"},{"name":"b"}]}`, []string{"file:a", "file:b"}, ""},
		{[]string{"file:{/paths/*}"}, `{"paths":[]}`, []string{}, ""},
		{[]string{"file:{/paths/1}"}, `{"paths":["a","b"]}`, []string{"file:b"}, ""},
		{[]string{"file:{/from}", "file:{/to}"}, `{"from":"a","to":"b"}`, []string{"file:a", "file:b"}, ""},
		{[]string{"k:{/a~1b}/{/c~0d}"}, `{"a/b":"x","c~d":"y"}`, []string{"k:x/y"}, ""},
		{[]string{"{{literal}}:{/x}"}, `{"x":"1"}`, []string{"{literal}:1"}, ""},
		{[]string{"file:{/path}"}, `{}`, nil, `resource "file:{/path}": argument /path is missing`},
		{[]string{"file:{/path}"}, `{"path":null}`, nil, "argument /path is null"},
		{[]string{"file:{/path}"}, `{"path":{"a":1}}`, nil, "argument /path is object, want a string, number or boolean"},
		{[]string{"file:{/path/x}"}, `{"path":"a"}`, nil, "argument /path/x is missing"},
		{[]string{"file:{/paths/*}"}, `{"paths":[1,null]}`, nil, "argument /paths/* is null"},
		{[]string{"file:{/paths/9}"}, `{"paths":["a"]}`, nil, "argument /paths/9 is missing"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.templates, ",")+" "+tc.args, func(t *testing.T) {
			t.Parallel()
			s := &Spec{Name: "t"}
			for _, src := range tc.templates {
				r, err := ParseResource(src)
				if err != nil {
					t.Fatal(err)
				}
				s.ResourceTemplates = append(s.ResourceTemplates, r)
			}
			got, err := s.Resources(json.RawMessage(tc.args))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, ErrInvalidArguments) {
					t.Fatalf("got %q, %v; want an invalid-arguments error with %q", got, err, tc.err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	// Nothing declared: no resources, whatever the arguments.
	if got, err := (&Spec{}).Resources(json.RawMessage(`{}`)); got != nil || err != nil {
		t.Fatalf("a spec without templates: %q %v", got, err)
	}
}

func TestResourceTooMany(t *testing.T) {
	t.Parallel()
	r, _ := ParseResource("file:{/p/*}")
	s := &Spec{ResourceTemplates: []Resource{r}}
	paths := make([]string, MaxResources+1)
	for i := range paths {
		paths[i] = "x"
	}
	args, _ := json.Marshal(map[string]any{"p": paths})
	if _, err := s.Resources(args); err == nil || !strings.Contains(err.Error(), "more than 256") {
		t.Fatalf("err %v", err)
	}
}

func TestParseResourceErrors(t *testing.T) {
	t.Parallel()
	for src, want := range map[string]string{
		"":                  "the template is empty",
		"file:{path}":       "starts with /",
		"file:{}":           "starts with /",
		"file:{/path":       "never closed",
		"file:}":            "a lone }",
		"file:{/a/*}{/b/*}": "at most one *",
		"file:{/a~2}":       "~ must be followed by 0 or 1",
	} {
		if _, err := ParseResource(src); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseResource(%q): %v, want %q", src, err, want)
		}
	}
}

// TestConfigResources: templates and caps in the tool config, and every
// bad one refused at its line.
func TestConfigResources(t *testing.T) {
	t.Parallel()
	reg := mustParse(t, `
tools:
  - name: edit
    resource: "file:{/path}"
    max_concurrency: 2
    max_concurrency_per_session: 1
    input_schema:
      type: object
      properties: {path: {type: string}, ids: {type: array, items: {type: integer}}}
    http: {url: http://127.0.0.1:9/e}
  - name: move
    resource: ["file:{/from}", "file:{/to}"]
    http: {url: http://127.0.0.1:9/m}
  - name: wait
    builtin: sleep
    resource: "sleep:{/ms}"
`)
	edit := lookup(t, reg, "edit")
	if len(edit.ResourceTemplates) != 1 || edit.Limit == nil || edit.Limit.Cap() != 2 || edit.SessionLimit == nil || edit.SessionLimit.Cap() != 1 {
		t.Fatalf("edit: %+v", edit)
	}
	if g := edit.Gates("s1"); len(g) != 2 {
		t.Fatalf("edit gates: %v", g)
	}
	if move := lookup(t, reg, "move"); len(move.ResourceTemplates) != 2 || move.Gates("s") != nil {
		t.Fatalf("move: %+v", move)
	}
	if got, err := lookup(t, reg, "wait").Resources(json.RawMessage(`{"ms":5}`)); err != nil || !slices.Equal(got, []string{"sleep:5"}) {
		t.Fatalf("wait: %q %v", got, err)
	}

	bad := []struct{ config, want string }{
		{`
tools:
  - name: edit
    resource: "file:{/missing}"
    input_schema: {type: object, properties: {path: {type: string}}}
    http: {url: http://127.0.0.1:9/e}
`, `line 4: tool "edit": resource "file:{/missing}": {/missing} points to a field the input schema does not declare`},
		{`
tools:
  - name: edit
    resource: ["file:{/path}", "x:{/path/deeper}"]
    input_schema: {type: object, properties: {path: {type: string}}}
    http: {url: http://127.0.0.1:9/e}
`, `line 4: tool "edit": resource "x:{/path/deeper}": {/path/deeper} points to a field the input schema does not declare`},
		{`
tools:
  - name: edit
    resource: "file:{path}"
    http: {url: http://127.0.0.1:9/e}
`, `line 4: tool "edit": resource "file:{path}"`},
		{`
tools:
  - name: edit
    resource: []
    http: {url: http://127.0.0.1:9/e}
`, "the list is empty"},
		{`
tools:
  - name: edit
    resource: {a: "x:{/y}"}
    http: {url: http://127.0.0.1:9/e}
`, "resource must be a template string or a list of them"},
		{`
tools:
  - name: edit
    max_concurrency: 0
    http: {url: http://127.0.0.1:9/e}
`, "line 4: tool \"edit\": max_concurrency must be between 1 and 10000, got 0"},
		{`
tools:
  - name: edit
    max_concurrency_per_session: -3
    http: {url: http://127.0.0.1:9/e}
`, "max_concurrency_per_session must be between 1 and 10000, got -3"},
		{`
tools:
  - name: wait
    builtin: sleep
    resource: "x:{/nope}"
`, "{/nope} points to a field the input schema does not declare"},
	}
	for _, tc := range bad {
		_, err := parseConfig(t, tc.config)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("config %s\ngot %v\nwant %q", tc.config, err, tc.want)
		}
	}
}

// TestConfigResourcesFileLine: check-config's place for a bad template is
// FILE:LINE:COLUMN.
func TestConfigResourcesFileLine(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "turnd.yaml")
	if err := os.WriteFile(path, []byte("tools:\n  - name: edit\n    input_schema: {type: object, properties: {path: {type: string}}}\n    resource: \"file:{/pth}\"\n    http: {url: http://127.0.0.1:9/e}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Open(t.Context(), path, Options{Env: testEnv})
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Line != 4 || !strings.HasPrefix(ce.Located(), path+":4:") {
		t.Fatalf("err %v", err)
	}
}

// TestMCPResources: an mcp entry's resource map gives the server's tools
// their templates, checked against the schemas the server lists; its
// max_concurrency is one cap for all the server's tools.
func TestMCPResources(t *testing.T) {
	t.Parallel()
	rig := newMCPRig(t, "")
	schema := json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)
	rig.addTool(&mcp.Tool{Name: "write_file", InputSchema: schema}, textResult("written"))
	rig.addTool(&mcp.Tool{Name: "read_file", InputSchema: schema}, textResult("read"))
	rig.addTool(&mcp.Tool{Name: "move_file", InputSchema: schema}, textResult("never"))
	l, logs := openLive(t, mcpConfig(rig.url(), `      prefix: fs_
    resource:
      write_file: "file:{/path}"
      read_file: ["file:{/path}"]
      move_file: ["file:{/source}", "file:{/destination}"]
    max_concurrency: 3
`), nil)
	r := l.Registry()
	if got := names(r); !slices.Equal(got, []string{"fs_read_file", "fs_write_file"}) {
		t.Fatalf("tools %v (move_file's templates point outside its schema: left out)", got)
	}
	if !strings.Contains(logs.String(), "mcp_tool=move_file") || !strings.Contains(logs.String(), "{/source} points to a field the input schema does not declare") {
		t.Fatalf("no warning for move_file:\n%s", logs.String())
	}
	w, _ := r.Lookup("fs_write_file")
	rd, _ := r.Lookup("fs_read_file")
	got, err := w.Resources(json.RawMessage(`{"path":"a.txt"}`))
	if err != nil || !slices.Equal(got, []string{"file:a.txt"}) {
		t.Fatalf("write_file resources %q %v", got, err)
	}
	if w.Limit == nil || w.Limit != rd.Limit || w.Limit.Cap() != 3 {
		t.Fatalf("the server's tools do not share one cap of 3: %p %p", w.Limit, rd.Limit)
	}
	// In an mcp entry, resource is a map.
	if _, err := parseMCPOnly(t, mcpConfig(rig.url(), "    resource: \"file:{/path}\"\n")); err == nil || !strings.Contains(err.Error(), "maps the server's tool names to templates") {
		t.Fatalf("a template string in an mcp entry: %v", err)
	}
}

// parseMCPOnly checks a config with mcp entries without connecting.
func parseMCPOnly(t *testing.T, cfg string) (*loader, error) {
	t.Helper()
	l, _, err := parse("turnd.yaml", []byte(cfg), Options{Env: testEnv})
	return l, err
}

// TestCheck: Check validates the arguments, then computes the resources,
// from one decoding.
func TestCheck(t *testing.T) {
	t.Parallel()
	r, _ := ParseResource("file:{/path}")
	s := &Spec{Name: "edit", ResourceTemplates: []Resource{r}}
	if err := s.CompileSchema(json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"n":{"type":"integer"}}}`)); err != nil {
		t.Fatal(err)
	}
	for args, want := range map[string]string{
		`{"path":"a"}`:         "file:a",
		`{"path":"a","n":"x"}`: "error: at /n",
		`{"n":1}`:              "error: argument /path is missing",
		`[1]`:                  "error: arguments must be a JSON object",
	} {
		got, err := s.Check(json.RawMessage(args))
		switch {
		case strings.HasPrefix(want, "error: "):
			if err == nil || !errors.Is(err, ErrInvalidArguments) || !strings.Contains(err.Error(), strings.TrimPrefix(want, "error: ")) {
				t.Errorf("Check(%s) = %q, %v; want %s", args, got, err, want)
			}
		case err != nil || !slices.Equal(got, []string{want}):
			t.Errorf("Check(%s) = %q, %v; want %s", args, got, err, want)
		}
	}
	if got, err := (&Spec{}).Check(json.RawMessage(`{"a":1}`)); got != nil || err != nil {
		t.Errorf("a spec without templates or schema: %q %v", got, err)
	}
}
