package turn_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
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

// journal records every invocation of the keyed test tools: a global
// sequence number at each start and end, and the most calls in flight.
type journal struct {
	seq      atomic.Int64
	mu       sync.Mutex
	start    map[string]int64
	end      map[string]int64
	inFlight int
	most     int
}

func newJournal() *journal {
	return &journal{start: map[string]int64{}, end: map[string]int64{}}
}

func (j *journal) enter(id string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.start[id] = j.seq.Add(1)
	j.inFlight++
	j.most = max(j.most, j.inFlight)
}

func (j *journal) leave(id string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.end[id] = j.seq.Add(1)
	j.inFlight--
}

// after reports whether call b started after call a ended.
func (j *journal) after(a, b string) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.start[b] > j.end[a] && j.end[a] > 0
}

func (j *journal) ran(id string) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	_, ok := j.start[id]
	return ok
}

// meet is a rendezvous: the calls of a group named in their arguments
// ("meet": "g") each wait until every member has arrived. Calls that are
// not run at once never all arrive, and the first gives up after a while
// with an error the test reports: the overlap is proved by the meeting,
// not by timing.
type meet struct {
	mu     sync.Mutex
	groups map[string]*group
	size   map[string]int
}

type group struct {
	n   int
	all chan struct{}
}

func (m *meet) arrive(ctx context.Context, name string) error {
	m.mu.Lock()
	g := m.groups[name]
	if g == nil {
		g = &group{all: make(chan struct{})}
		m.groups[name] = g
	}
	g.n++
	if g.n == m.size[name] {
		close(g.all)
		delete(m.groups, name) // the next arrival starts a new meeting
	}
	m.mu.Unlock()
	select {
	case <-g.all:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(20 * time.Second):
		return fmt.Errorf("group %q: the other calls never ran alongside this one", name)
	}
}

const (
	editSchema = `{"type":"object","required":["path"],"properties":{"path":{"type":"string"},"meet":{"type":"string"}}}`
	// lookSchema leaves path optional: a call without it passes the schema
	// and is refused by its resource template.
	lookSchema = `{"type":"object","properties":{"path":{"type":"string"},"meet":{"type":"string"}}}`
)

// keyedTools are "edit" (write, resource file:{/path}), "plain" (a write
// without resources) and "look" (read, resource file:{/path}).
func keyedTools(t *testing.T, j *journal, m *meet, mutate func(*tool.Spec)) []*tool.Spec {
	t.Helper()
	res, err := tool.ParseResource("file:{/path}")
	if err != nil {
		t.Fatal(err)
	}
	run := func(ctx context.Context, c dispatch.Call, _ *dispatch.Attempt) dispatch.Outcome {
		j.enter(c.ID)
		defer j.leave(c.ID)
		var args struct{ Meet string }
		_ = json.Unmarshal(c.Arguments, &args)
		if args.Meet != "" {
			if err := m.arrive(ctx, args.Meet); err != nil {
				return dispatch.Fail("no_overlap", err.Error())
			}
		}
		return dispatch.OK([]byte(`"`+c.ID+`"`), false)
	}
	specs := []*tool.Spec{
		{Name: "edit", Effect: dispatch.EffectWrite, Impl: dispatch.ToolFunc(run), InputSchema: json.RawMessage(editSchema),
			ResourceTemplates: []tool.Resource{res}},
		{Name: "look", Effect: dispatch.EffectRead, Impl: dispatch.ToolFunc(run), InputSchema: json.RawMessage(lookSchema),
			ResourceTemplates: []tool.Resource{res}},
		{Name: "plain", Effect: dispatch.EffectWrite, Impl: dispatch.ToolFunc(run)},
	}
	if mutate != nil {
		for _, s := range specs {
			mutate(s)
		}
	}
	return specs
}

func keyedCall(id, name, path, meetGroup string) turn.Call {
	args := map[string]string{"path": path}
	if meetGroup != "" {
		args["meet"] = meetGroup
	}
	if path == "" {
		delete(args, "path")
	}
	b, _ := json.Marshal(args)
	return turn.Call{ID: id, Name: name, Arguments: b}
}

func keyedService(t *testing.T, store turn.Store, specs []*tool.Spec) *turn.Service {
	t.Helper()
	reg := mustRegistry(t, specs...)
	return startService(t, turn.Config{Store: store, Tools: func() *tool.Registry { return reg }, Owner: "a", LeaseTTL: 10 * time.Second})
}

func TestResourcesOnBothStores(t *testing.T) {
	t.Parallel()
	teststores.Each(t, func(t *testing.T, open func(testing.TB) turn.Store) {
		cases := []struct {
			name  string
			calls []turn.Call
			meets map[string]int
			check func(t *testing.T, j *journal, got turn.Turn)
		}{
			{"writes on different paths overlap",
				[]turn.Call{keyedCall("w1", "edit", "a.txt", "g"), keyedCall("w2", "edit", "b.txt", "g")},
				map[string]int{"g": 2},
				func(t *testing.T, j *journal, got turn.Turn) {
					if j.most != 2 {
						t.Errorf("at most %d calls ran at once, want 2", j.most)
					}
				}},
			{"writes on one path run in call order",
				[]turn.Call{keyedCall("w1", "edit", "a.txt", ""), keyedCall("w2", "edit", "a.txt", ""), keyedCall("w3", "edit", "a.txt", "")},
				nil,
				func(t *testing.T, j *journal, got turn.Turn) {
					if !j.after("w1", "w2") || !j.after("w2", "w3") || j.most != 1 {
						t.Errorf("w2 after w1: %v, w3 after w2: %v, most at once %d", j.after("w1", "w2"), j.after("w2", "w3"), j.most)
					}
				}},
			{"a resource-less write after keyed writes waits for all",
				[]turn.Call{keyedCall("w1", "edit", "a.txt", "g"), keyedCall("w2", "edit", "b.txt", "g"), {ID: "w3", Name: "plain", Arguments: json.RawMessage(`{}`)}},
				map[string]int{"g": 2},
				func(t *testing.T, j *journal, got turn.Turn) {
					if !j.after("w1", "w3") || !j.after("w2", "w3") {
						t.Errorf("w3 started before w1 or w2 ended")
					}
				}},
			{"a read waits for the write on its path, not for others",
				[]turn.Call{keyedCall("w1", "edit", "a.txt", "g"), keyedCall("r2", "look", "b.txt", "g"), keyedCall("r3", "look", "a.txt", "")},
				map[string]int{"g": 2},
				func(t *testing.T, j *journal, got turn.Turn) {
					if !j.after("w1", "r3") {
						t.Errorf("r3 read a.txt while w1 wrote it")
					}
				}},
			{"a call missing the pointed field is refused, nothing of it run",
				[]turn.Call{keyedCall("w1", "edit", "a.txt", ""), {ID: "w2", Name: "look", Arguments: json.RawMessage(`{"meet":""}`)}},
				nil,
				func(t *testing.T, j *journal, got turn.Turn) {
					if j.ran("w2") {
						t.Errorf("w2 ran")
					}
				}},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				j, m := newJournal(), &meet{groups: map[string]*group{}, size: tc.meets}
				svc := keyedService(t, open(t), keyedTools(t, j, m, nil))
				got := submitAwait(t, svc, "s", turn.TurnRequest{ID: "t", Calls: tc.calls})
				for i, r := range got.Results {
					if r.Index != i || r.CallID != tc.calls[i].ID {
						t.Fatalf("result %d is %s (index %d): not in call order", i, r.CallID, r.Index)
					}
					if r.Status != turn.CallOK && !(tc.calls[i].ID == "w2" && strings.Contains(tc.name, "missing")) {
						t.Fatalf("%s: %s %+v", r.CallID, r.Status, r.Error)
					}
				}
				tc.check(t, j, got)
				if strings.Contains(tc.name, "missing") {
					r := got.Results[1]
					if r.Status != turn.CallRefused || r.Error == nil || r.Error.Code != "invalid_arguments" ||
						!strings.Contains(r.Error.Message, "/path is missing") {
						t.Fatalf("w2: %s %+v, want refused invalid_arguments naming /path", r.Status, r.Error)
					}
				}
			})
		}
	})
}

// timestamp matches the RFC 3339 times inside ledger data.
var timestamp = regexp.MustCompile(`"\d{4}-\d\d-\d\dT[0-9:.]+Z"`)

// ledgerText is a turn's ledger with its times blanked out.
func ledgerText(t *testing.T, store turn.Store, session string) string {
	t.Helper()
	lines, err := store.Ledger(context.Background(), session, 0, 1000, turn.MaxPageBytes)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, l := range lines {
		fmt.Fprintf(&b, "%d %s %s %s %s\n", l.Seq, l.TurnID, l.Kind, l.CallID, timestamp.ReplaceAll(l.Data, []byte(`"T"`)))
	}
	return b.String()
}

// TestResourceLedgerMatchesSerialRun: the ledger of a turn whose writes ran
// at once is byte for byte that of the same turn run one call at a time
// (a shared max_concurrency of 1), times aside.
func TestResourceLedgerMatchesSerialRun(t *testing.T) {
	t.Parallel()
	teststores.Each(t, func(t *testing.T, open func(testing.TB) turn.Store) {
		req := turn.TurnRequest{ID: "t", Calls: []turn.Call{
			keyedCall("r0", "look", "z.txt", ""),
			keyedCall("w1", "edit", "a.txt", "g"), keyedCall("w2", "edit", "b.txt", "g"), keyedCall("w3", "edit", "c.txt", "g"),
			keyedCall("w4", "edit", "a.txt", ""), {ID: "w5", Name: "plain", Arguments: json.RawMessage(`{}`)},
		}}
		var texts []string
		for _, serial := range []bool{false, true} {
			j := newJournal()
			m := &meet{groups: map[string]*group{}, size: map[string]int{"g": 3}}
			if serial {
				m.size["g"] = 1 // each call meets only itself
			}
			// Both runs cap the keyed tools (so their lines have the same
			// fields): at 1 the keyed calls run one at a time, in call order.
			limit := dispatch.NewLimit(100)
			if serial {
				limit = dispatch.NewLimit(1)
			}
			mutate := func(s *tool.Spec) {
				if s.ResourceTemplates != nil {
					s.Limit = limit // shared by the keyed tools
				}
			}
			store := open(t)
			svc := keyedService(t, store, keyedTools(t, j, m, mutate))
			// The serial run's calls carry the same arguments: meet groups
			// of one.
			got := submitAwait(t, svc, "s", req)
			if statuses(got) != "r0=ok w1=ok w2=ok w3=ok w4=ok w5=ok" {
				t.Fatalf("serial=%v: %s", serial, statuses(got))
			}
			if want := map[bool]int{false: 3, true: 1}[serial]; j.most != want {
				t.Fatalf("serial=%v: %d calls at once, want %d", serial, j.most, want)
			}
			texts = append(texts, ledgerText(t, store, "s"))
		}
		if texts[0] != texts[1] {
			t.Fatalf("ledgers differ\nconcurrent:\n%s\nserial:\n%s", texts[0], texts[1])
		}
		if !strings.Contains(texts[0], `"resources":["file:a.txt"]`) || !strings.Contains(texts[0], `"ready_at":"T"`) {
			t.Fatalf("ledger lacks resources or waits:\n%s", texts[0])
		}
	})
}

// TestParkedWriteHoldsItsPath: a write parked on a completion key keeps its
// path until the completion is delivered; a write on another path goes on.
func TestParkedWriteHoldsItsPath(t *testing.T) {
	t.Parallel()
	teststores.Each(t, func(t *testing.T, open func(testing.TB) turn.Store) {
		j, m := newJournal(), &meet{groups: map[string]*group{}}
		var delivered atomic.Bool
		var early atomic.Bool
		// w2 must not start before the delivery.
		specs, keys := parkingTools(t, j, m, func(c dispatch.Call) {
			if c.ID == "w2" && !delivered.Load() {
				early.Store(true)
			}
		})
		store := open(t)
		svc := keyedService(t, store, specs)
		k := turn.TurnKey{SessionID: "s", TurnID: "t"}
		if _, err := svc.Submit(context.Background(), "s", turn.TurnRequest{ID: "t", Calls: []turn.Call{
			keyedCall("w1", "park", "a.txt", ""), keyedCall("w2", "edit", "a.txt", ""), keyedCall("w3", "edit", "b.txt", ""),
		}}); err != nil {
			t.Fatal(err)
		}
		var key string
		select {
		case key = <-keys:
		case <-time.After(30 * time.Second):
			t.Fatal("the park tool never ran")
		}
		if key == "" {
			t.Fatal("the park tool got no completion key")
		}
		// Wait until the park is recorded and w3, on another path, has run.
		waitUntil(t, svc, k, func() bool { return j.ran("w3") && parked(t, store, "s") })
		if j.ran("w2") {
			t.Fatal("w2 ran while w1 was parked on its path")
		}
		delivered.Store(true)
		if _, err := svc.Complete(context.Background(), key, turn.Delivery{Output: json.RawMessage(`"approved"`)}); err != nil {
			t.Fatal(err)
		}
		got, err := svc.Await(context.Background(), k)
		if err != nil {
			t.Fatal(err)
		}
		if early.Load() {
			t.Fatal("w2 started before w1's completion was delivered")
		}
		if statuses(got) != "w1=ok w2=ok w3=ok" || got.Status != turn.StatusCompleted {
			t.Fatalf("turn %s: %s", got.Status, statuses(got))
		}
	})
}

// parked reports whether the session's ledger has a call_pending line.
func parked(t *testing.T, store turn.Store, session string) bool {
	lines, err := store.Ledger(context.Background(), session, 0, 1000, turn.MaxPageBytes)
	if err != nil {
		t.Fatal(err)
	}
	return slices.ContainsFunc(lines, func(l turn.Line) bool { return l.Kind == turn.LineCallPending })
}

// TestStartedWritesAreNotRunTwice: a process stops while two writes on
// different paths run; the one that resumes the turn answers both
// interrupted (they may have taken effect), runs the write that waited
// behind one of them once, and the ledger shows each started write's lines.
func TestStartedWritesAreNotRunTwice(t *testing.T) {
	t.Parallel()
	teststores.Each(t, func(t *testing.T, open func(testing.TB) turn.Store) {
		t.Run("not idempotent", func(t *testing.T) {
			t.Parallel()
			startedWritesResumed(t, open, false)
		})
		t.Run("idempotent", func(t *testing.T) {
			t.Parallel()
			startedWritesResumed(t, open, true)
		})
	})
}

// startedWritesResumed is TestStartedWritesAreNotRunTwice with an edit
// tool that is idempotent or not: an idempotent one runs the two started
// writes again (once each), after their first attempts' lines.
func startedWritesResumed(t *testing.T, open func(testing.TB) turn.Store, idempotent bool) {
	j, m := newJournal(), &meet{groups: map[string]*group{}, size: map[string]int{"g": 2}}
	unblock := make(chan struct{})
	var runs sync.Map
	specs := keyedTools(t, j, m, nil)
	for _, s := range specs {
		if s.Name == "edit" {
			s.Idempotent = idempotent
			inner := s.Impl
			s.Impl = dispatch.ToolFunc(func(ctx context.Context, c dispatch.Call, at *dispatch.Attempt) dispatch.Outcome {
				n, _ := runs.LoadOrStore(c.ID, new(atomic.Int64))
				first := n.(*atomic.Int64).Add(1) == 1
				o := inner.Invoke(ctx, c, at)
				if c.ID != "w3" && first {
					select { // the process "dies" with w1 and w2 in flight
					case <-unblock:
					case <-ctx.Done():
					}
				}
				return o
			})
		}
	}
	store := open(t)
	reg := mustRegistry(t, specs...)
	svcA := newService(t, turn.Config{Store: store, Tools: func() *tool.Registry { return reg }, Owner: "a", LeaseTTL: 10 * time.Second})
	if _, err := svcA.Submit(context.Background(), "s", turn.TurnRequest{ID: "t", Calls: []turn.Call{
		keyedCall("w1", "edit", "a.txt", "g"), keyedCall("w2", "edit", "b.txt", "g"), keyedCall("w3", "edit", "a.txt", ""),
	}}); err != nil {
		t.Fatal(err)
	}
	// Both writes journaled their attempts and met.
	waitUntil(t, svcA, turn.TurnKey{SessionID: "s", TurnID: "t"}, func() bool {
		return j.ran("w1") && j.ran("w2") && startedRows(t, store)
	})
	later := func() time.Time { return time.Now().Add(time.Hour) }
	svcB := newService(t, turn.Config{Store: store, Tools: func() *tool.Registry { return reg }, Owner: "b", LeaseTTL: 10 * time.Second, Now: later})
	if n, err := svcB.Recover(context.Background()); err != nil || n != 1 {
		t.Fatalf("recovered %d, %v", n, err)
	}
	got, err := svcB.Await(context.Background(), turn.TurnKey{SessionID: "s", TurnID: "t"})
	if err != nil {
		t.Fatal(err)
	}
	wantStatus, wantRuns := "w1=error(interrupted) w2=error(interrupted) w3=ok", int64(1)
	want := "turn_received: call_admitted:w1 attempt_started:w1 turn_resumed: call_answered:w1 " +
		"call_admitted:w2 attempt_started:w2 call_answered:w2 call_admitted:w3 attempt_started:w3 call_answered:w3 turn_settled:"
	if idempotent {
		wantStatus, wantRuns = "w1=ok w2=ok w3=ok", 2
		want = "turn_received: call_admitted:w1 attempt_started:w1 turn_resumed: attempt_started:w1 call_answered:w1 " +
			"call_admitted:w2 attempt_started:w2 attempt_started:w2 call_answered:w2 call_admitted:w3 attempt_started:w3 call_answered:w3 turn_settled:"
	}
	if statuses(got) != wantStatus {
		t.Fatalf("after recovery: %s, want %s", statuses(got), wantStatus)
	}
	for id, want := range map[string]int64{"w1": wantRuns, "w2": wantRuns, "w3": 1} {
		n, _ := runs.LoadOrStore(id, new(atomic.Int64))
		if got := n.(*atomic.Int64).Load(); got != want {
			t.Errorf("%s ran %d times, want %d", id, got, want)
		}
	}
	if got := ledgerKinds(t, store); got != want {
		t.Fatalf("ledger\n got %s\nwant %s", got, want)
	}
	// A's tools return: nothing of A's stale wave reaches the ledger.
	close(unblock)
	if _, err := svcA.Await(context.Background(), turn.TurnKey{SessionID: "s", TurnID: "t"}); err != nil && !errors.Is(err, turn.ErrLeaseLost) {
		t.Fatal(err)
	}
	if got := ledgerKinds(t, store); got != want {
		t.Fatalf("ledger after A's wave ended\n got %s\nwant %s", got, want)
	}
}

// startedRows reports whether the turn's results hold two started writes.
func startedRows(t *testing.T, store turn.Store) bool {
	got, err := store.GetTurn(context.Background(), turn.TurnKey{SessionID: "s", TurnID: "t"})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range got.Results {
		if r.Status == turn.CallStarted {
			n++
		}
	}
	return n == 2
}

// waitUntil waits for cond, looking again at each change of turn k (and
// now and then, for a change made before the watch began).
func waitUntil(t *testing.T, svc *turn.Service, k turn.TurnKey, cond func() bool) {
	t.Helper()
	changed, stop := svc.Watch(k)
	defer stop()
	deadline := time.After(30 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-changed:
		case <-tick.C:
		case <-deadline:
			t.Fatal("condition not reached in 30s")
		}
	}
}

// ledgerKinds is session s's ledger as "kind:call" words.
func ledgerKinds(t *testing.T, store turn.Store) string {
	t.Helper()
	lines, err := store.Ledger(context.Background(), "s", 0, 1000, turn.MaxPageBytes)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, l := range lines {
		kinds = append(kinds, string(l.Kind)+":"+l.CallID)
	}
	return strings.Join(kinds, " ")
}

// TestParkedWriteHoldsItsPathAfterRestart: the process stops while a write
// is parked on a path and another waits for it; the process that resumes
// the turn still holds the path until the completion arrives, then runs
// the waiting write once.
func TestParkedWriteHoldsItsPathAfterRestart(t *testing.T) {
	t.Parallel()
	teststores.Each(t, func(t *testing.T, open func(testing.TB) turn.Store) {
		j, m := newJournal(), &meet{groups: map[string]*group{}}
		var delivered atomic.Bool
		var early atomic.Int64
		specs, keys := parkingTools(t, j, m, func(dispatch.Call) {
			if !delivered.Load() {
				early.Add(1)
			}
		})
		store := open(t)
		reg := mustRegistry(t, specs...)
		svcA := startService(t, turn.Config{Store: store, Tools: func() *tool.Registry { return reg }, Owner: "a", LeaseTTL: 10 * time.Second})
		k := turn.TurnKey{SessionID: "s", TurnID: "t"}
		if _, err := svcA.Submit(context.Background(), "s", turn.TurnRequest{ID: "t", Calls: []turn.Call{
			keyedCall("w1", "park", "a.txt", ""), keyedCall("w2", "edit", "a.txt", ""),
		}}); err != nil {
			t.Fatal(err)
		}
		key := <-keys
		waitUntil(t, svcA, k, func() bool { return parked(t, store, "s") })
		later := func() time.Time { return time.Now().Add(time.Hour) }
		// B's start recovers the turn, whose lease has run out by its clock.
		svcB := startService(t, turn.Config{Store: store, Tools: func() *tool.Registry { return reg }, Owner: "b", LeaseTTL: 10 * time.Second, Now: later})
		// B resumed the turn: w1 replayed as parked, w2 still waiting.
		waitUntil(t, svcB, k, func() bool { return strings.Contains(ledgerKinds(t, store), "turn_resumed") })
		if j.ran("w2") {
			t.Fatal("w2 ran while w1 was parked on its path")
		}
		delivered.Store(true)
		if _, err := svcB.Complete(context.Background(), key, turn.Delivery{Output: json.RawMessage(`"done"`)}); err != nil {
			t.Fatal(err)
		}
		got, err := svcB.Await(context.Background(), k)
		if err != nil {
			t.Fatal(err)
		}
		if statuses(got) != "w1=ok w2=ok" || got.Status != turn.StatusCompleted || early.Load() != 0 {
			t.Fatalf("turn %s: %s; w2 ran %d times before the delivery", got.Status, statuses(got), early.Load())
		}
	})
}

// parkingTools are keyedTools and "park", a write on file:{/path} that
// parks its call and sends its completion key on keys; onEdit sees every
// call of "edit" before it runs.
func parkingTools(t *testing.T, j *journal, m *meet, onEdit func(dispatch.Call)) ([]*tool.Spec, chan string) {
	t.Helper()
	keys := make(chan string, 4)
	specs := keyedTools(t, j, m, nil)
	res, _ := tool.ParseResource("file:{/path}")
	specs = append(specs, &tool.Spec{Name: "park", Effect: dispatch.EffectWrite, Deferred: true, InputSchema: json.RawMessage(editSchema),
		ResourceTemplates: []tool.Resource{res},
		Impl: dispatch.ToolFunc(func(ctx context.Context, c dispatch.Call, at *dispatch.Attempt) dispatch.Outcome {
			k, err := at.CompletionKey(ctx)
			keys <- k
			if err != nil {
				return dispatch.Fail("no_key", err.Error())
			}
			return dispatch.Outcome{Status: dispatch.StatusPending}
		})})
	for _, s := range specs {
		if s.Name == "edit" {
			inner := s.Impl
			s.Impl = dispatch.ToolFunc(func(ctx context.Context, c dispatch.Call, at *dispatch.Attempt) dispatch.Outcome {
				onEdit(c)
				return inner.Invoke(ctx, c, at)
			})
		}
	}
	return specs, keys
}
