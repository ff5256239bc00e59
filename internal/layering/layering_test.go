package layering

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// module is the module's path: a package may import itself (its examples
// and external tests do).
const module = "github.com/turnd/turnd/"

// TestStandardLibraryOnly holds each pure package to its rule: nothing but
// the standard library and the packages of this module its row names
// (budget: internal/rawjson, itself held to the standard library) — in its
// tests too, for those that say so.
func TestStandardLibraryOnly(t *testing.T) {
	t.Parallel()
	for _, rule := range []struct {
		pkg   string
		tests bool     // the rule holds for its tests too
		also  []string // packages of this module it may import
	}{
		{"budget", true, []string{"internal/rawjson"}},
		{"internal/rawjson", true, nil}, // budget's JSON scanner
		{"completion", true, nil},
		{"dispatch", false, nil}, // its tests use goleak
		// The client: never turn, store or api, and not the providers'
		// SDKs either (package client/sdk has them, so that programs that
		// do not use them, turnd's own command line among them, do not
		// link them). Its tests start a real server.
		{"client", false, []string{"completion"}},
	} {
		t.Run(rule.pkg, func(t *testing.T) {
			t.Parallel()
			files, err := filepath.Glob(filepath.Join("..", "..", rule.pkg, "*.go"))
			if err != nil || len(files) == 0 {
				t.Fatalf("no Go files: %v", err)
			}
			for _, name := range files {
				if !rule.tests && strings.HasSuffix(name, "_test.go") {
					continue
				}
				f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
				if err != nil {
					t.Fatal(err)
				}
				for _, imp := range f.Imports {
					path, _ := strconv.Unquote(imp.Path.Value)
					first, _, _ := strings.Cut(path, "/")
					if strings.Contains(first, ".") && path != module+rule.pkg && !slices.Contains(rule.also, strings.TrimPrefix(path, module)) {
						t.Errorf("%s imports %s, which is not in the standard library", name, path)
					}
				}
			}
		})
	}
}
