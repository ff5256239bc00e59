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
// library, the completion package's signer, and the providers' SDKs (their
// types are the caller's) — never turn, store or api.
func TestImports(t *testing.T) {
	t.Parallel()
	allowed := []string{
		"github.com/turnd/turnd/completion",
		"github.com/openai/openai-go/v3",
		"github.com/anthropics/anthropic-sdk-go",
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
