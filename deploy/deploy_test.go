package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"github.com/turnd/turnd/tool"
)

// The tests run in deploy/; the repository root is its parent.
const repoRoot = ".."

// TestFilesParse parses every YAML (all documents) and JSON file under
// deploy/: a file that does not parse, an empty document or a duplicate key
// fails.
func TestFilesParse(t *testing.T) {
	t.Parallel()
	var seen int
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		switch filepath.Ext(path) {
		case ".yaml", ".yml":
			docs, err := yamlDocs(path)
			if err != nil {
				t.Errorf("%s: %v", path, err)
				return nil
			}
			if len(docs) == 0 {
				t.Errorf("%s: no YAML document", path)
			}
			for i, d := range docs {
				if d == nil {
					t.Errorf("%s: document %d is empty", path, i+1)
				}
			}
		case ".json":
			if _, err := jsonFile(path); err != nil {
				t.Errorf("%s: %v", path, err)
			}
		default:
			return nil
		}
		seen++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// compose (5 YAML + 1 JSON) and kubernetes (9): a walk that finds far
	// fewer is looking in the wrong place.
	if seen < 15 {
		t.Fatalf("parsed %d YAML/JSON files under deploy/, want at least 15", seen)
	}
}

func TestYAMLDocsRejects(t *testing.T) {
	t.Parallel()
	for name, src := range map[string]string{
		"duplicate key":  "a: 1\na: 2\n",
		"unclosed flow":  "a: [1, 2\n",
		"bad indent":     "a:\n  b: 1\n c: 2\n",
		"unknown anchor": "a: *nowhere\n",
	} {
		if docs, err := decodeYAMLDocs([]byte(src)); err == nil {
			t.Errorf("%s: decoded %v, want an error", name, docs)
		}
	}
	docs, err := decodeYAMLDocs([]byte("a: 1\n---\nb: [2]\n---\n"))
	if err != nil || len(docs) != 2 {
		t.Fatalf("two documents: %v, %v", docs, err)
	}
	if _, err := jsonFile(writeTemp(t, "x.json", `{"a": 1,}`)); err == nil {
		t.Error("a trailing comma in JSON passed")
	}
	if _, err := jsonFile(writeTemp(t, "x.json", `{"a": 1} {"b": 2}`)); err == nil {
		t.Error("two JSON values in one file passed")
	}
}

// yamlDocs decodes every document of a YAML file.
func yamlDocs(path string) ([]any, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return decodeYAMLDocs(data)
}

func decodeYAMLDocs(data []byte) ([]any, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []any
	for {
		var v any
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		docs = append(docs, v)
	}
}

// yamlFile decodes a YAML file of exactly one document.
func yamlFile(t *testing.T, path string) map[string]any {
	t.Helper()
	docs, err := yamlDocs(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(docs) != 1 {
		t.Fatalf("%s: %d documents, want 1", path, len(docs))
	}
	m, ok := docs[0].(map[string]any)
	if !ok {
		t.Fatalf("%s: the document is %T, want a mapping", path, docs[0])
	}
	return m
}

func jsonFile(path string) (map[string]any, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("more than one JSON value")
	}
	return m, nil
}

func writeTemp(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// dig walks v along path (mapping keys and sequence indexes); ok is false
// when an element is missing or of another kind.
func dig(v any, path ...any) (any, bool) {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil, false
			}
			if v, ok = m[k]; !ok {
				return nil, false
			}
		case int:
			l, ok := v.([]any)
			if !ok || k < 0 || k >= len(l) {
				return nil, false
			}
			v = l[k]
		default:
			panic(fmt.Sprintf("dig: path element %T", p))
		}
	}
	return v, true
}

func digString(v any, path ...any) string {
	x, _ := dig(v, path...)
	s, _ := x.(string)
	return s
}

func digMap(v any, path ...any) map[string]any {
	x, _ := dig(v, path...)
	m, _ := x.(map[string]any)
	return m
}

func digList(v any, path ...any) []any {
	x, _ := dig(v, path...)
	l, _ := x.([]any)
	return l
}

// digInt reads an integer of any of the decoders' number types.
func digInt(v any, path ...any) (int64, bool) {
	x, ok := dig(v, path...)
	if !ok {
		return 0, false
	}
	switch n := x.(type) {
	case int:
		return int64(n), true
	case int64:
		return n, true
	case uint64:
		return int64(n), true
	case float64:
		return int64(n), n == float64(int64(n))
	}
	return 0, false
}

// strings of a YAML sequence of strings, or of a string split on spaces.
func stringList(v any) []string {
	switch x := v.(type) {
	case string:
		return strings.Fields(x)
	case []any:
		var out []string
		for _, e := range x {
			out = append(out, fmt.Sprint(e))
		}
		return out
	}
	return nil
}

// addrPort returns the port of a listen address such as ":8080".
func addrPort(t *testing.T, addr string) int {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("listen address %q: %v", addr, err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatalf("listen address %q: port %q", addr, port)
	}
	return n
}

// turndEnv holds the environment variables cmd/turnd reads, taken from the
// string literals of its source: flags' defaults come from them
// (TURND_ADDR, DATABASE_URL, ...), and secrets also take a _FILE variant.
type turndEnv struct {
	names     map[string]bool
	fileForms bool // the source builds NAME+"_FILE" names
}

var envName = regexp.MustCompile(`^(TURND_[A-Z0-9_]+|OTEL_[A-Z0-9_]+|DATABASE_URL(_FILE)?)$`)

func loadTurndEnv(t *testing.T) turndEnv {
	t.Helper()
	dir := filepath.Join(repoRoot, "cmd", "turnd")
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files in %s: %v", dir, err)
	}
	env := turndEnv{names: map[string]bool{}}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			if s == "_FILE" {
				env.fileForms = true
			}
			if envName.MatchString(s) {
				env.names[s] = true
			}
			return true
		})
	}
	for _, must := range []string{"TURND_ADDR", "DATABASE_URL", "TURND_NO_MIGRATE", "TURND_CONFIG"} {
		if !env.names[must] {
			t.Fatalf("%s not found in cmd/turnd: the environment scan is broken (found %v)", must, env.names)
		}
	}
	return env
}

// goRuntimeEnv are read by the Go runtime, not by turnd.
var goRuntimeEnv = []string{"GOMEMLIMIT", "GOMAXPROCS", "GOGC", "GODEBUG"}

// check reports whether name is one turnd (or the Go runtime) reads.
func (e turndEnv) check(name string) error {
	if e.names[name] || slices.Contains(goRuntimeEnv, name) {
		return nil
	}
	if base, ok := strings.CutSuffix(name, "_FILE"); ok && e.fileForms && e.names[base] {
		return nil
	}
	return fmt.Errorf("turnd reads no environment variable %s", name)
}

func TestTurndEnvCheck(t *testing.T) {
	t.Parallel()
	env := loadTurndEnv(t)
	for _, ok := range []string{"TURND_ADDR", "DATABASE_URL_FILE", "TURND_API_TOKENS_FILE", "TURND_WEBHOOK_SIGNING_SECRET_FILE", "TURND_WEBHOOK_SECRET_FILE", "GOMEMLIMIT"} {
		if err := env.check(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"TURND_ADRESS", "TURND_NOMIGRATE", "DATABASE_URI", "TURND_API_TOKEN_FILE", "PATH"} {
		if env.check(bad) == nil {
			t.Errorf("%s passed the check", bad)
		}
	}
}

// toolLoad loads a tool config the way turnd does (tool.Open), resolving
// ${VAR} from the given environment only: a variable the container does
// not set is an error here as it is at turnd's start.
func toolLoad(path string, env map[string]string) (*tool.Registry, error) {
	live, err := tool.Open(context.Background(), path, tool.Options{Env: func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}})
	if err != nil {
		return nil, err
	}
	defer live.Close() // the registry stays readable
	return live.Registry(), nil
}

// promtool returns promtool's path, or skips the test saying why.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is not installed (Debian's prometheus package has it; scripts/test.sh installs it when it can)")
	}
	return p
}

func runTool(t *testing.T, name string, args ...string) {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Errorf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
}
