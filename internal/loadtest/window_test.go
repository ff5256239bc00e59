package loadtest_test

import (
	"context"
	"slices"
	"testing"

	"github.com/turnd/turnd/internal/loadtest"
)

// A hook put on a context that already has one wraps it: it opens first
// and closes last, and both see every window of a run on that context.
func TestWithWindowNests(t *testing.T) {
	t.Parallel()
	var got []string
	hook := func(name string) func() func() {
		return func() func() {
			got = append(got, "open "+name)
			return func() { got = append(got, "close "+name) }
		}
	}
	ctx := loadtest.WithWindow(context.Background(), hook("inner"))
	ctx = loadtest.WithWindow(ctx, hook("outer"))
	for range 2 {
		loadtest.OpenWindow(ctx)()
	}
	want := []string{"open outer", "open inner", "close inner", "close outer", "open outer", "open inner", "close inner", "close outer"}
	if !slices.Equal(got, want) {
		t.Errorf("calls %q, want %q", got, want)
	}

	// A hook that returns no close function, inside or outside, is skipped
	// at the close; a context without a hook opens nothing.
	got = nil
	none := func() func() { got = append(got, "open none"); return nil }
	loadtest.OpenWindow(loadtest.WithWindow(loadtest.WithWindow(context.Background(), none), hook("outer")))()
	loadtest.OpenWindow(loadtest.WithWindow(loadtest.WithWindow(context.Background(), hook("inner")), none))()
	loadtest.OpenWindow(context.Background())()
	want = []string{"open outer", "open none", "close outer", "open none", "open inner", "close inner"}
	if !slices.Equal(got, want) {
		t.Errorf("calls %q, want %q", got, want)
	}
}
