package layering

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestNoTracingSDKInDomain holds the domain packages to the tracing rule:
// they see the OpenTelemetry API (trace, attribute, codes, propagation)
// or an observer hook, never the SDK, an exporter or an instrumentation
// library; cmd/turnd wires those.
func TestNoTracingSDKInDomain(t *testing.T) {
	t.Parallel()
	for _, pkg := range []string{"api", "turn", "tool", "dispatch", "budget", "completion", "store/postgres", "store/sqlite", "metrics", "client"} {
		t.Run(pkg, func(t *testing.T) {
			t.Parallel()
			files, err := filepath.Glob(filepath.Join("..", "..", pkg, "*.go"))
			if err != nil || len(files) == 0 {
				t.Fatalf("no Go files: %v", err)
			}
			for _, name := range files {
				if strings.HasSuffix(name, "_test.go") {
					continue // tests may export to memory
				}
				f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
				if err != nil {
					t.Fatal(err)
				}
				for _, imp := range f.Imports {
					path, _ := strconv.Unquote(imp.Path.Value)
					if strings.HasPrefix(path, "go.opentelemetry.io/otel/sdk") || strings.HasPrefix(path, "go.opentelemetry.io/otel/exporters") ||
						strings.HasPrefix(path, "go.opentelemetry.io/contrib") {
						t.Errorf("%s imports %s: the tracing SDK is wired in cmd/turnd only", name, path)
					}
				}
			}
		})
	}
}
