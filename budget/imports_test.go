package budget

import (
	"go/parser"
	gotoken "go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestImportsStandardLibraryOnly enforces the package rule: nothing but the
// standard library, in tests too (the example imports the package itself),
// and internal/rawjson, the tree's JSON scanner, held to the same rule.
func TestImportsStandardLibraryOnly(t *testing.T) {
	t.Parallel()
	checkStandardLibraryOnly(t, "*.go", "github.com/turnd/turnd/budget", "github.com/turnd/turnd/internal/rawjson")
	checkStandardLibraryOnly(t, "../internal/rawjson/*.go", "github.com/turnd/turnd/internal/rawjson")
}

func checkStandardLibraryOnly(t *testing.T, glob string, allowed ...string) {
	t.Helper()
	files, err := filepath.Glob(glob)
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files: %v", err)
	}
	for _, name := range files {
		f, err := parser.ParseFile(gotoken.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			first, _, _ := strings.Cut(path, "/")
			if strings.Contains(first, ".") && !slices.Contains(allowed, path) {
				t.Errorf("%s imports %s, which is not in the standard library", name, path)
			}
		}
	}
}
