package turndbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

// dir is Main's temp dir, where Build puts the binary.
var dir string

// Main runs m's tests with a temp dir for the binary, removed after them,
// and fails them when a goroutine outlives them (goleak). Call it from
// TestMain.
func Main(m *testing.M) {
	d, err := os.MkdirTemp("", "turnd-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	dir = d
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		os.RemoveAll(d)
		os.Exit(code)
	}))
}

// Build is cmd/turnd built once, on first use, so that the tests that do
// not run it do not pay for it. The zero value builds with no flags.
type Build struct {
	// Flags are go build's flags, such as -race or -ldflags.
	Flags []string

	once sync.Once
	path string
	err  error
}

// Binary returns the path of the binary, building it on the first call
// into Main's temp dir; a failed build fails t.
func (b *Build) Binary(t testing.TB) string {
	t.Helper()
	b.once.Do(func() {
		if dir == "" {
			b.err = fmt.Errorf("turndbin: Main did not run (call it from TestMain)")
			return
		}
		b.path = filepath.Join(dir, "turnd")
		args := append([]string{"build", "-o", b.path}, b.Flags...)
		cmd := exec.Command("go", append(args, "github.com/turnd/turnd/cmd/turnd")...)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}
