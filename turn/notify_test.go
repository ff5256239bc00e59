package turn_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnd/turnd/dispatch"
	"github.com/turnd/turnd/tool"
	"github.com/turnd/turnd/turn"
)

// bus is an in-process turn.Notifier hub: what one member publishes, every
// other member's listener hears, as replicas on one database would.
type bus struct {
	mu        sync.Mutex
	listeners map[*busMember]func(turn.TurnKey)
	published map[turn.TurnKey]int // publications per key
}

type busMember struct{ b *bus }

func (b *bus) member() *busMember { return &busMember{b} }

func (m *busMember) Publish(_ context.Context, keys ...turn.TurnKey) error {
	m.b.mu.Lock()
	defer m.b.mu.Unlock()
	if m.b.published == nil {
		m.b.published = map[turn.TurnKey]int{}
	}
	for _, k := range keys {
		m.b.published[k]++
	}
	for other, f := range m.b.listeners {
		if other != m {
			for _, k := range keys {
				f(k)
			}
		}
	}
	return nil
}

func (m *busMember) Listen(ctx context.Context, f func(turn.TurnKey)) error {
	m.b.mu.Lock()
	if m.b.listeners == nil {
		m.b.listeners = map[*busMember]func(turn.TurnKey){}
	}
	m.b.listeners[m] = f
	m.b.mu.Unlock()
	f(turn.TurnKey{})
	<-ctx.Done()
	m.b.mu.Lock()
	delete(m.b.listeners, m)
	m.b.mu.Unlock()
	return nil
}

// publishedOf is how many times k was published.
func (b *bus) publishedOf(k turn.TurnKey) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.published[k]
}

// waitPublished waits until k was published (what says what k's changes
// are, for the failure).
func waitPublished(t *testing.T, b *bus, k turn.TurnKey, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for b.publishedOf(k) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%s were never published", what)
		}
		time.Sleep(time.Millisecond) // the notify loop publishes on its own goroutine
	}
}

// submitCompleted submits turn tid of calls cs (see calls) to svc in
// session sid and waits until it completed.
func submitCompleted(t *testing.T, svc *turn.Service, sid, tid string, cs ...string) {
	t.Helper()
	if _, err := svc.Submit(context.Background(), sid, turn.TurnRequest{ID: tid, Calls: calls(cs...)}); err != nil {
		t.Fatalf("turn %s: %v", tid, err)
	}
	tr, err := svc.WaitSettled(context.Background(), turn.TurnKey{SessionID: sid, TurnID: tid})
	if err != nil || tr.Status != turn.StatusCompleted {
		t.Fatalf("turn %s: %v %+v", tid, err, tr)
	}
}

// listening reports whether n members listen.
func (b *bus) listening(n int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.listeners) == n
}

// blocker is a read tool whose calls wait until released or cancelled.
type blocker struct {
	started chan string
	release chan struct{}
}

func newBlocker() *blocker {
	return &blocker{started: make(chan string, 16), release: make(chan struct{})}
}

func (b *blocker) spec() *tool.Spec {
	return &tool.Spec{Name: "block", Effect: dispatch.EffectRead, Impl: dispatch.ToolFunc(
		func(ctx context.Context, c dispatch.Call, _ *dispatch.Attempt) dispatch.Outcome {
			b.started <- c.ID
			select {
			case <-b.release:
				return dispatch.OK([]byte(`"released"`), true)
			case <-ctx.Done():
				return dispatch.Cancelled("cancelled while blocked")
			}
		})}
}

func (b *blocker) waitStarted(t *testing.T) {
	t.Helper()
	select {
	case <-b.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the blocking call never started")
	}
}

// replica starts a service on f's store, as another process would, with
// notifier n (nil: none).
func (f *fixture) replica(owner string, n turn.Notifier, lease time.Duration) *turn.Service {
	f.t.Helper()
	svc := startService(f.t, turn.Config{
		Store: f.store, Tools: func() *tool.Registry { return f.reg }, Owner: owner,
		LeaseTTL: lease, Notifier: n,
	})
	return svc
}

func waitSignal(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("no signal: %s", what)
	}
}

func waitListening(t *testing.T, b *bus, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !b.listening(n) {
		if time.Now().After(deadline) {
			t.Fatalf("%d listeners never registered", n)
		}
		time.Sleep(time.Millisecond) // the listeners start on their own goroutines
	}
}

// Watch fires on every change of its turn made here, from the turn's
// receipt to its settlement, and not after stop.
func TestWatchLocalChanges(t *testing.T) {
	t.Parallel()
	blk := newBlocker()
	f := newFixture(t, blk.spec())
	k := turn.TurnKey{SessionID: "s", TurnID: "t"}
	changed, stop := f.svc.Watch(k)
	other, stopOther := f.svc.Watch(turn.TurnKey{SessionID: "s", TurnID: "other"})
	defer stopOther()

	if _, err := f.svc.Submit(context.Background(), "s", turn.TurnRequest{ID: "t", Calls: calls("c1=block")}); err != nil {
		t.Fatal(err)
	}
	waitSignal(t, changed, "the turn was received")
	blk.waitStarted(t)
	close(blk.release)
	tr, err := f.svc.WaitSettled(context.Background(), k)
	if err != nil || tr.Status != turn.StatusCompleted {
		t.Fatalf("WaitSettled: %v %+v", err, tr)
	}
	waitSignal(t, changed, "the turn settled")
	select {
	case <-other:
		t.Error("a watch of another turn fired")
	default:
	}
	stop()
	stop() // idempotent
	if _, err := f.svc.Submit(context.Background(), "s", turn.TurnRequest{ID: "t2", Calls: calls("c2=read")}); err != nil {
		t.Fatal(err)
	}
}

// A change made by one replica fires the watches of the other, through
// the Notifier; a reconnection (the zero key) fires every watch.
func TestWatchRemoteChanges(t *testing.T) {
	t.Parallel()
	blk := newBlocker()
	f := newFixture(t, blk.spec())
	b := &bus{}
	a := f.replica("owner-a", b.member(), 10*time.Second)
	r := f.replica("owner-b", b.member(), 10*time.Second)
	waitListening(t, b, 2)

	k := turn.TurnKey{SessionID: "s", TurnID: "t"}
	changed, stop := r.Watch(k)
	defer stop()
	if _, err := a.Submit(context.Background(), "s", turn.TurnRequest{ID: "t", Calls: calls("c1=block")}); err != nil {
		t.Fatal(err)
	}
	blk.waitStarted(t)
	waitSignal(t, changed, "A received the turn")
	close(blk.release)
	// A Watch never polls: only A's publication can fire it.
	for {
		waitSignal(t, changed, "A settled the turn")
		tr, err := r.GetTurn(context.Background(), k)
		if err != nil {
			t.Fatal(err)
		}
		if tr.Status == turn.StatusCompleted {
			break
		}
	}
	tr, err := r.WaitSettled(context.Background(), k)
	if err != nil || tr.Status != turn.StatusCompleted {
		t.Fatalf("WaitSettled on B: %v %+v", err, tr)
	}

	// A reconnecting listener may have missed anything: every watch fires.
	w, stopW := r.Watch(turn.TurnKey{SessionID: "x", TurnID: "y"})
	defer stopW()
	b.mu.Lock()
	for _, listen := range b.listeners {
		listen(turn.TurnKey{})
	}
	b.mu.Unlock()
	waitSignal(t, w, "a reconnection")
}

// A turn of reads recorded whole is not published: it did not exist
// before, so no replica can be watching it; turns written step by step are.
func TestRecordedWholeIsNotPublished(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	b := &bus{}
	// A window no wave of this test outlasts, however slow the machine:
	// a read turn that outlasted it would be recorded step by step, and
	// published.
	a := startService(t, turn.Config{
		Store: f.store, Tools: func() *tool.Registry { return f.reg }, Owner: "owner-a",
		LeaseTTL: 10 * time.Second, Notifier: b.member(), ReadTurnWindow: time.Minute,
	})
	f.replica("owner-b", b.member(), 10*time.Second)
	waitListening(t, b, 2)
	published := func(tid string) int { return b.publishedOf(turn.TurnKey{SessionID: "s", TurnID: tid}) }
	submit := func(tid string, cs ...string) {
		t.Helper()
		submitCompleted(t, a, "s", tid, cs...)
	}
	submit("first", "f1=read") // the session becomes known to a
	submit("reads", "r1=read", "r2=read")
	submit("writes", "w1=write")
	// The notify loop publishes in order: once the write turn's changes
	// are out, anything queued before them is too.
	waitPublished(t, b, turn.TurnKey{SessionID: "s", TurnID: "writes"}, "the write turn's changes")
	if n := published("reads"); n != 0 {
		t.Errorf("the turn of reads recorded whole was published %d times", n)
	}
}

// A cancel posted to the replica that does not run the turn cancels the
// wave where it runs: at once through the Notifier, or at the owner's next
// lease renewal without one.
func TestCancelAcrossReplicas(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		notify bool
		lease  time.Duration
	}{
		{"notifier", true, time.Hour},
		{"renewal", false, 300 * time.Millisecond},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			blk := newBlocker()
			f := newFixture(t, blk.spec())
			b := &bus{}
			var na, nb turn.Notifier
			if tt.notify {
				na, nb = b.member(), b.member()
			}
			a := f.replica("owner-a", na, tt.lease)
			r := f.replica("owner-b", nb, tt.lease)
			if tt.notify {
				waitListening(t, b, 2)
			}
			if _, err := a.Submit(context.Background(), "s", turn.TurnRequest{ID: "t", Calls: calls("c1=block")}); err != nil {
				t.Fatal(err)
			}
			blk.waitStarted(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			tr, err := r.Cancel(ctx, turn.TurnKey{SessionID: "s", TurnID: "t"})
			if err != nil {
				t.Fatalf("Cancel on the other replica: %v", err)
			}
			if tr.Status != turn.StatusCancelled || len(tr.Results) != 1 || tr.Results[0].Status != turn.CallCancelled {
				t.Fatalf("cancelled turn %s %s", tr.Status, statuses(tr))
			}
			got := f.kinds("s", "t")
			if got[len(got)-1] != "turn_settled" {
				t.Errorf("ledger %v", got)
			}
		})
	}
}

// A cancel of a turn whose owner died waits for a recovery pass to resume
// it, which applies the request.
func TestCancelOfOrphanedTurn(t *testing.T) {
	t.Parallel()
	blk := newBlocker()
	f := newFixture(t, blk.spec())
	k := turn.TurnKey{SessionID: "s", TurnID: "t"}
	// The dead owner: a turn recorded with an expired lease, never run.
	dead := f.service("owner-dead", func() time.Time { return time.Now().Add(-time.Hour) })
	if _, err := dead.Submit(context.Background(), "s", turn.TurnRequest{ID: "t", Calls: calls("c1=block")}); err != nil {
		t.Fatal(err)
	}
	blk.waitStarted(t) // the dead owner's wave; it is ignored from here on
	r := f.replica("owner-b", nil, 300*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tr, err := r.Cancel(ctx, k)
	if err != nil || tr.Status != turn.StatusCancelled {
		t.Fatalf("Cancel: %v %+v", err, tr)
	}
	close(blk.release)
}

// aloneMember is a bus member that can say that no other replica would
// hear it (as postgres.Notifier does while it hears none).
type aloneMember struct {
	*busMember
	alone atomic.Bool
}

func (m *aloneMember) Alone() bool { return m.alone.Load() }

// A Notifier that says no other replica would hear it is handed nothing to
// publish while it says so, and everything again once it does not.
func TestAloneNotifierIsNotHandedPublications(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	b := &bus{}
	n := &aloneMember{busMember: b.member()}
	n.alone.Store(true)
	a := f.replica("owner-a", n, 10*time.Second)
	waitListening(t, b, 1)
	published := func(tid string) int { return b.publishedOf(turn.TurnKey{SessionID: "s", TurnID: tid}) }
	submit := func(tid string, cs ...string) {
		t.Helper()
		submitCompleted(t, a, "s", tid, cs...)
	}
	submit("quiet", "q1=write")
	n.alone.Store(false)
	submit("heard", "h1=write")
	// The notify loop publishes in order: once the second turn's changes
	// are out, any of the first's queued before them would be too.
	waitPublished(t, b, turn.TurnKey{SessionID: "s", TurnID: "heard"}, "the changes made once the notifier was not alone")
	if got := published("quiet"); got != 0 {
		t.Errorf("the turn run while the notifier was alone was published %d times", got)
	}
}
