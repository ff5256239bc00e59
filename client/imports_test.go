package client

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImports holds the package to its dependency rule: the standard
// library and the completion package's signer — never turn, store or api,
// and not the providers' SDKs either (package client/sdk has them, so that
// programs that do not use them, turnd's own command line among them, do
// not link them).
func TestImports(t *testing.T) {
	t.Parallel()
	allowed := []string{
		"github.com/turnd/turnd/completion",
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			first, _, _ := strings.Cut(path, "/")
			if !strings.Contains(first, ".") {
				continue // the standard library
			}
			ok := false
			for _, a := range allowed {
				if path == a || strings.HasPrefix(path, a+"/") {
					ok = true
				}
			}
			if !ok {
				t.Errorf("%s imports %s: the client imports only the standard library, completion and the providers' SDKs", name, path)
			}
		}
	}
}
