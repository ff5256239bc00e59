package turn_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnd/turnd/dispatch"
	"github.com/turnd/turnd/internal/teststores"
	"github.com/turnd/turnd/tool"
	"github.com/turnd/turnd/turn"
)

// failingStore fails the commits that carry a result whose output contains
// "POISON" with err, and every commit while down is set (with
// turn.ErrUnavailable), telling failed of each.
type failingStore struct {
	turn.Store
	err    error
	down   atomic.Bool
	failed chan error
}

func (s *failingStore) Commit(ctx context.Context, c turn.Commit) error {
	if s.down.Load() {
		err := fmt.Errorf("committing: %w: connection refused", turn.ErrUnavailable)
		s.failed <- err
		return err
	}
	for _, r := range c.Results {
		if strings.Contains(string(r.Output), "POISON") {
			s.failed <- s.err
			return s.err
		}
	}
	return s.Store.Commit(ctx, c)
}

// clock is a test clock that only moves when told.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func poisonTools(runs *atomic.Int64, writes *atomic.Int64) *tool.Registry {
	return tool.NewRegistry(
		&tool.Spec{Name: "poison", Effect: dispatch.EffectRead, Impl: dispatch.ToolFunc(func(context.Context, dispatch.Call, *dispatch.Attempt) dispatch.Outcome {
			runs.Add(1)
			return dispatch.OK(json.RawMessage(`{"s":"POISON"}`), true)
		})},
		&tool.Spec{Name: "write", Effect: dispatch.EffectWrite, Impl: dispatch.ToolFunc(func(_ context.Context, c dispatch.Call, _ *dispatch.Attempt) dispatch.Outcome {
			writes.Add(1)
			return dispatch.OK(c.Arguments, true)
		})},
	)
}

// A turn whose commits fail for a reason the service cannot classify is
// resumed a bounded number of times, with a growing wait between claims,
// and then settled failed with recovery_exhausted; its tools ran once per
// resumption and never after. Before, every lease expiry resumed it again,
// forever.
func TestRecoveryIsBounded(t *testing.T) {
	t.Parallel()
	teststores.Each(t, func(t *testing.T, open func(testing.TB) turn.Store) {
		fs := &failingStore{Store: open(t), err: errors.New("the store refuses this for a reason of its own"), failed: make(chan error, 64)}
		var runs, writes atomic.Int64
		reg := poisonTools(&runs, &writes)
		clk := &clock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
		const ttl, backoff, maxResumes = 10 * time.Second, time.Second, 3
		svc := func(owner string) *turn.Service {
			return newService(t, turn.Config{Store: fs, Tools: func() *tool.Registry { return reg }, Owner: owner,
				Now: clk.Now, LeaseTTL: ttl, ResumeBackoff: backoff, MaxResumes: maxResumes})
		}
		k := turn.TurnKey{SessionID: "s1", TurnID: "t1"}
		_, err := svc("first").Submit(context.Background(), k.SessionID, turn.TurnRequest{ID: k.TurnID, Async: true, Calls: []turn.Call{
			{ID: "c1", Name: "poison", Arguments: json.RawMessage(`{}`)},
			{ID: "c2", Name: "write", Arguments: json.RawMessage(`{}`)},
		}})
		if err != nil {
			t.Fatal(err)
		}
		<-fs.failed // the write's journaling commit (carrying c1's result)
		<-fs.failed // the settling commit
		for resume := 1; ; resume++ {
			// Each resumption is a new process: the lease expired, and
			// the back-off of the claims before it passed.
			wait := ttl + time.Millisecond
			if claims := resume - 1; claims >= turn.FreeResumes {
				wait += backoff << (claims - turn.FreeResumes)
			}
			clk.add(wait - time.Millisecond)
			p := svc(fmt.Sprintf("p%d", resume))
			if n, err := p.Recover(context.Background()); err != nil || n != 0 {
				t.Fatalf("resume %d: recovered %d (%v) before the back-off passed", resume, n, err)
			}
			clk.add(time.Millisecond)
			n, err := p.Recover(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if resume > maxResumes {
				if n != 0 {
					t.Fatalf("resumed %d turns past the limit", n)
				}
				break
			}
			if n != 1 {
				t.Fatalf("resume %d: recovered %d turns, want 1", resume, n)
			}
			<-fs.failed
			<-fs.failed
		}
		got, err := fs.GetTurn(context.Background(), k)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != turn.StatusFailed || statuses(got) != "c1=error(recovery_exhausted) c2=error(recovery_exhausted)" {
			t.Fatalf("turn %s %s, want failed with both calls recovery_exhausted", got.Status, statuses(got))
		}
		if r, w := runs.Load(), writes.Load(); r != 1+maxResumes || w != 0 {
			t.Errorf("the read ran %d times and the write %d, want %d and 0", r, w, 1+maxResumes)
		}
		lines, err := fs.Ledger(context.Background(), k.SessionID, 0, 100, turn.MaxPageBytes)
		if err != nil {
			t.Fatal(err)
		}
		var kinds []string
		for _, l := range lines {
			kinds = append(kinds, string(l.Kind))
		}
		if want := "turn_received call_answered call_answered turn_settled"; strings.Join(kinds, " ") != want {
			t.Errorf("ledger %v, want %s", kinds, want)
		}
		if last := string(lines[len(lines)-1].Data); !strings.Contains(last, `"code":"recovery_exhausted"`) || !strings.Contains(last, `"status":"failed"`) {
			t.Errorf("turn_settled %s", last)
		}
		// Nothing claims it again.
		clk.add(time.Hour)
		if n, err := svc("later").Recover(context.Background()); err != nil || n != 0 {
			t.Errorf("a settled turn recovered: %d, %v", n, err)
		}
	})
}

// A commit the store rejects for its content (turn.ErrRejected) is not
// retried and the turn is not left to recovery: it fails at once, the
// calls whose outcomes the commit carried answered store_rejected, and the
// tools ran once.
func TestRejectedCommitFailsTheTurn(t *testing.T) {
	t.Parallel()
	teststores.Each(t, func(t *testing.T, open func(testing.TB) turn.Store) {
		fs := &failingStore{Store: open(t), err: fmt.Errorf("committing: %w: invalid byte sequence", turn.ErrRejected), failed: make(chan error, 64)}
		var runs, writes atomic.Int64
		reg := poisonTools(&runs, &writes)
		svc := newService(t, turn.Config{Store: fs, Tools: func() *tool.Registry { return reg }})
		got := submitAwait(t, svc, "s1", turn.TurnRequest{ID: "t1", Calls: []turn.Call{
			{ID: "c1", Name: "write", Arguments: json.RawMessage(`{"n":1}`)},
			{ID: "c2", Name: "poison", Arguments: json.RawMessage(`{}`)},
		}})
		// The write's outcome was in the rejected commit: the turn says
		// it ran and may have taken effect.
		if got.Status != turn.StatusFailed || statuses(got) != "c1=error(store_rejected) c2=error(store_rejected)" {
			t.Fatalf("turn %s %s, want failed with both calls store_rejected", got.Status, statuses(got))
		}
		if msg := got.Results[0].Error.Message; !strings.Contains(msg, "may have taken effect") {
			t.Errorf("the write's error %q does not say it may have taken effect", msg)
		}
		if len(fs.failed) != 1 {
			t.Errorf("%d commits failed, want 1 (no retry)", len(fs.failed))
		}
		if r, w := runs.Load(), writes.Load(); r != 1 || w != 1 {
			t.Errorf("tools ran %d and %d times, want once each", r, w)
		}
	})
}

// While the store is unavailable, the outcome of a write that ran is held
// and committed once the store is back, however many tries that takes; it
// is never answered interrupted by the process that ran it. (Before, six
// tries over about three seconds, then the turn was left to recovery,
// which answered the write interrupted.)
func TestOutcomesOutliveAnOutage(t *testing.T) {
	t.Parallel()
	teststores.Each(t, func(t *testing.T, open func(testing.TB) turn.Store) {
		fs := &failingStore{Store: open(t), failed: make(chan error, 64)}
		var writes atomic.Int64
		reg := tool.NewRegistry(&tool.Spec{Name: "write", Effect: dispatch.EffectWrite, Impl: dispatch.ToolFunc(func(_ context.Context, c dispatch.Call, _ *dispatch.Attempt) dispatch.Outcome {
			writes.Add(1)
			fs.down.Store(true) // the store goes away while the tool runs
			return dispatch.OK(c.Arguments, true)
		})})
		svc := newService(t, turn.Config{Store: fs, Tools: func() *tool.Registry { return reg }})
		done := make(chan turn.Turn, 1)
		go func() {
			_, err := svc.Submit(context.Background(), "s1", turn.TurnRequest{ID: "t1", Calls: []turn.Call{{ID: "c1", Name: "write", Arguments: json.RawMessage(`{"n":1}`)}}})
			if err != nil {
				t.Errorf("submit: %v", err)
			}
			got, err := svc.Await(context.Background(), turn.TurnKey{SessionID: "s1", TurnID: "t1"})
			if err != nil {
				t.Errorf("await: %v", err)
			}
			done <- got
		}()
		for i := range 7 { // the old code gave up after six
			select {
			case <-fs.failed:
			case got := <-done:
				t.Fatalf("the turn came back (%q %s) after %d failed commits, while the store was still down", got.Status, statuses(got), i)
			}
		}
		fs.down.Store(false)
		got := <-done
		if got.Status != turn.StatusCompleted || statuses(got) != "c1=ok" {
			t.Fatalf("turn %s %s, want completed with c1 ok", got.Status, statuses(got))
		}
		if w := writes.Load(); w != 1 {
			t.Errorf("the write ran %d times", w)
		}
	})
}
