package syncbuf_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/turnd/turnd/internal/syncbuf"
)

func TestConcurrentWrites(t *testing.T) {
	t.Parallel()
	var b syncbuf.Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				_, _ = b.Write([]byte("x\n"))
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if n := strings.Count(b.String(), "x\n"); n != 800 {
		t.Errorf("%d writes kept, want 800", n)
	}
}
