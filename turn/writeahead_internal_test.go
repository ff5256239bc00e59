package turn

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"
)

// gatedCommits is a Store whose first Commit waits for release and then
// fails; later commits are recorded, in the order they arrive.
type gatedCommits struct {
	Store            // nil: only Commit is called
	entered, release chan struct{}
	mu               sync.Mutex
	calls            int
	lines            []string
}

func (s *gatedCommits) Commit(_ context.Context, c Commit) error {
	s.mu.Lock()
	s.calls++
	first := s.calls == 1
	s.mu.Unlock()
	if first {
		close(s.entered)
		<-s.release
		return errors.New("rejected")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range c.Lines {
		s.lines = append(s.lines, l.CallID)
	}
	return nil
}

// TestFailedBatchGoesAheadOfTheNext: a mid-wave commit that fails hands
// what it took from the buffer to the batch filled meanwhile, ahead of
// that batch's own lines, so nothing is committed out of the order it was
// buffered in.
func TestFailedBatchGoesAheadOfTheNext(t *testing.T) {
	t.Parallel()
	st := &gatedCommits{entered: make(chan struct{}), release: make(chan struct{})}
	svc := &Service{store: st, cfg: Config{Owner: "a", LeaseTTL: time.Minute, Now: time.Now}, log: slog.New(slog.DiscardHandler)}
	r := &run{svc: svc, key: TurnKey{"s", "t"}, turn: Turn{SessionID: "s", ID: "t"}, logCtx: context.Background()}
	held := func(id string) Commit { return Commit{Lines: []Line{{CallID: id, Kind: LineCallAnswered}}} }
	ctx := context.Background()

	r.mu.Lock()
	b, lead, prev := r.joinLocked(held("x"), nil, nil)
	r.mu.Unlock()
	failed := make(chan error, 1)
	go func() { failed <- r.await(ctx, b, lead, prev) }()
	<-st.entered // b is being committed: the next joiner fills a batch of its own
	r.mu.Lock()
	b2, lead2, prev2 := r.joinLocked(held("y"), nil, nil)
	r.mu.Unlock()
	if !lead2 || prev2 != b {
		t.Fatalf("the second joiner leads %v after %p, want a batch of its own after %p", lead2, prev2, b)
	}
	close(st.release)
	if err := <-failed; err == nil {
		t.Fatal("the first batch's commit did not fail")
	}
	if err := r.await(ctx, b2, lead2, prev2); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(st.lines, []string{"x", "y"}) {
		t.Fatalf("committed %q, want x (taken first) before y", st.lines)
	}
	if len(r.pending.Lines) != 0 {
		t.Fatalf("lines left in the buffer: %v", r.pending.Lines)
	}
}
