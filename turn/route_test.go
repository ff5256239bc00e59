package turn_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnd/turnd/budget"
	"github.com/turnd/turnd/completion"
	"github.com/turnd/turnd/dispatch"
	"github.com/turnd/turnd/tool"
	"github.com/turnd/turnd/turn"
)

// parkedIn submits a turn of one deferred call in session sid and returns
// its completion key once the call is parked.
func parkedIn(t *testing.T, svc *turn.Service, keys <-chan string, sid string) string {
	t.Helper()
	sub, err := svc.Submit(context.Background(), sid, turn.TurnRequest{ID: "t", Calls: []turn.Call{{ID: "d", Name: "defer"}}})
	if err != nil {
		t.Fatal(err)
	}
	key := <-keys
	if tr, err := svc.Await(context.Background(), turn.TurnKey{SessionID: sid, TurnID: sub.Turn.ID}); err != nil || tr.Status != turn.StatusWaiting {
		t.Fatalf("turn of %s: %v %v, want waiting", sid, tr.Status, err)
	}
	return key
}

// A key routes to its session; a key whose route or MAC was changed, or
// the MAC alone, is answered exactly as an unknown key is, by every
// completion endpoint, and touches no parked call.
func TestForgedRoutesRefused(t *testing.T) {
	t.Parallel()
	keys := make(chan string, 2)
	_, svc := startedFixture(t, deferring(keys, nil))
	mine, theirs := parkedIn(t, svc, keys, "s"), parkedIn(t, svc, keys, "s2")
	mac := func(k string) string { return k[:completion.KeyLen] }
	if sid, _ := completion.Route(mine); sid != "s" {
		t.Fatalf("key %q routes to %q, want s", mine, sid)
	}
	forged := []struct{ name, key string }{
		{"route of another session with a parked call", mac(mine) + ".s2"},
		{"MAC of another session's call, routed here", mac(theirs) + ".s"},
		{"route of no session", mac(mine) + ".nosuch"},
		{"route extended", mine + "x"},
		{"route with a dot more", mac(mine) + "..s"},
		{"MAC alone (a legacy key's form)", mac(mine)},
		{"MAC changed", mac(mine)[:completion.KeyLen-1] + "A.s"},
		{"empty route", mac(mine) + "."},
		{"route with a slash", mac(mine) + ".s/x"},
		{"unknown key", "ck_" + strings.Repeat("A", 43) + ".s"},
	}
	for _, f := range forged {
		if f.key == mine {
			continue // the MAC change happened to keep the character
		}
		if _, err := svc.Complete(context.Background(), f.key, turn.Delivery{Output: json.RawMessage(`1`)}); !errors.Is(err, turn.ErrNotFound) {
			t.Errorf("Complete with %s (%q): %v, want ErrNotFound", f.name, f.key, err)
		}
		if _, err := svc.Heartbeat(context.Background(), f.key); !errors.Is(err, turn.ErrNotFound) {
			t.Errorf("Heartbeat with %s: %v, want ErrNotFound", f.name, err)
		}
		if _, err := svc.CompletionStatus(context.Background(), f.key); !errors.Is(err, turn.ErrNotFound) {
			t.Errorf("CompletionStatus with %s: %v, want ErrNotFound", f.name, err)
		}
	}
	for _, sid := range []string{"s", "s2"} {
		tr, err := svc.GetTurn(context.Background(), turn.TurnKey{SessionID: sid, TurnID: "t"})
		if err != nil || tr.Status != turn.StatusWaiting {
			t.Fatalf("turn of %s after the forged keys: %v %v, want still waiting", sid, tr.Status, err)
		}
	}
	for _, k := range []struct{ sid, key string }{{"s", mine}, {"s2", theirs}} {
		if res, err := svc.Complete(context.Background(), k.key, turn.Delivery{Output: json.RawMessage(`"ok"`)}); err != nil || res.Status != "accepted" {
			t.Fatalf("Complete with the key of %s: %+v %v", k.sid, res, err)
		}
		if done := waitSettled(t, svc, k.sid, "t"); done.Status != turn.StatusCompleted {
			t.Fatalf("turn of %s: %s", k.sid, done.Status)
		}
	}
}

// legacyKeys stands for a database upgraded from a release before routed
// keys: the key hashes of legacy keys are known without their session
// (the store's legacy_keys), here by a map from a legacy key's hash to
// the session and the hash its call's row has. It records the sessions
// GetCompletion (and GetDelivery) is asked for.
type legacyKeys struct {
	turn.Store
	legacy map[[32]byte]turn.Completion
	asked  chan string
}

func (s legacyKeys) GetCompletion(ctx context.Context, sessionID string, h [32]byte) (turn.Completion, error) {
	s.asked <- sessionID
	if sessionID == "" {
		c, ok := s.legacy[h]
		if !ok {
			return turn.Completion{}, turn.ErrNotFound
		}
		return s.Store.GetCompletion(ctx, c.SessionID, c.KeyHash)
	}
	return s.Store.GetCompletion(ctx, sessionID, h)
}

// GetDelivery reads a legacy key's completion as GetCompletion does, and
// its turn from the store.
func (s legacyKeys) GetDelivery(ctx context.Context, sessionID string, h [32]byte) (turn.DeliveryTarget, error) {
	return turn.ReadDelivery(ctx, s, sessionID, h)
}

// A key without a route (a legacy key, issued before keys carried their
// session) is looked up by its hash alone, and completes its call; a
// routed key is looked up in its session.
func TestLegacyKeyCompletes(t *testing.T) {
	t.Parallel()
	keys := make(chan string, 1)
	f := newFixture(t, deferring(keys, nil))
	store := legacyKeys{Store: f.store, legacy: map[[32]byte]turn.Completion{}, asked: make(chan string, 64)}
	svc := startService(t, turn.Config{Store: store, Tools: func() *tool.Registry { return f.reg }, Owner: "completer"})
	routed := parkedIn(t, svc, keys, "s")
	secret, err := f.store.Secret(context.Background(), func() (string, error) { return "", errors.New("no secret stored") })
	if err != nil {
		t.Fatal(err)
	}
	s, err := completion.ParseSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	ring, err := completion.NewKeyring(s)
	if err != nil {
		t.Fatal(err)
	}
	legacy := ring.LegacyKey("s", "t", "d")
	store.legacy[legacy.Hash()] = turn.Completion{SessionID: "s", KeyHash: completion.Key(routed).Hash()}
	for len(store.asked) > 0 {
		<-store.asked
	}

	info, err := svc.CompletionStatus(context.Background(), string(legacy))
	if err != nil || info.Status != turn.CompletionPending {
		t.Fatalf("CompletionStatus of the legacy key: %+v %v", info, err)
	}
	if got := <-store.asked; got != "" {
		t.Errorf("a legacy key was looked up in session %q, want by its hash alone", got)
	}
	if _, err := svc.CompletionStatus(context.Background(), routed); err != nil {
		t.Fatal(err)
	}
	if got := <-store.asked; got != "s" {
		t.Errorf("a routed key was looked up in session %q, want s", got)
	}
	res, err := svc.Complete(context.Background(), string(legacy), turn.Delivery{Output: json.RawMessage(`"legacy"`)})
	if err != nil || res.Status != "accepted" {
		t.Fatalf("Complete with the legacy key: %+v %v", res, err)
	}
	if done := waitSettled(t, svc, "s", "t"); done.Status != turn.StatusCompleted || string(done.Results[0].Output) != `"legacy"` {
		t.Fatalf("after the legacy delivery: %s %s", done.Status, done.Results[0].Output)
	}
}

// An output id routes to its session: GET /v1/outputs/{id} finds it there,
// and an id whose route was changed or dropped finds nothing.
func TestOutputIDRoutes(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("line of output\n", 100)
	f := newFixture(t, &tool.Spec{Name: "big", Effect: dispatch.EffectRead, Impl: dispatch.ToolFunc(func(context.Context, dispatch.Call, *dispatch.Attempt) dispatch.Outcome {
		return dispatch.OK([]byte(big), false)
	})})
	lim := budget.Config{Limit: 100}
	ids := map[string]string{}
	for _, sid := range []string{"s", "s2"} {
		if _, err := f.svc.CreateSession(context.Background(), turn.SessionSpec{ID: sid, Budget: &lim}); err != nil {
			t.Fatal(err)
		}
		tr := f.run(f.svc, sid, turn.TurnRequest{Calls: []turn.Call{{ID: "c", Name: "big"}}})
		ids[sid] = tr.Results[0].OutputID
		if rand, route, ok := strings.Cut(ids[sid], "."); !ok || route != sid || !strings.HasPrefix(rand, "out_") {
			t.Fatalf("output id %q does not route to %s", ids[sid], sid)
		}
		out, err := f.svc.GetOutput(context.Background(), ids[sid])
		if err != nil || out.SessionID != sid || string(out.Data) != big {
			t.Fatalf("GetOutput(%q) = %v (session %q)", ids[sid], err, out.SessionID)
		}
	}
	head := func(id string) string { h, _, _ := strings.Cut(id, "."); return h }
	for _, bad := range []string{
		head(ids["s"]) + ".s2",
		head(ids["s2"]) + ".s",
		head(ids["s"]),
		head(ids["s"]) + ".nosuch",
		head(ids["s"]) + ".",
		head(ids["s"]) + ".s/x",
		ids["s"] + "x",
		head(ids["s"]) + "." + strings.Repeat("s", 257),
	} {
		if _, err := f.svc.GetOutput(context.Background(), bad); !errors.Is(err, turn.ErrNotFound) {
			t.Errorf("GetOutput(%q): %v, want ErrNotFound", bad, err)
		}
	}
}

// A resumed call whose key a release before routed keys issued (its
// legacy key's row is the turn's) gets that legacy key again, so that the
// key its first attempt handed out stays the call's.
func TestResumedCallKeepsLegacyKey(t *testing.T) {
	t.Parallel()
	keys := make(chan string, 2)
	var runs atomic.Int64
	block := make(chan struct{})
	defer close(block)
	idem := &tool.Spec{Name: "idefer", Effect: dispatch.EffectWrite, Idempotent: true,
		Impl: dispatch.ToolFunc(func(ctx context.Context, c dispatch.Call, at *dispatch.Attempt) dispatch.Outcome {
			key, err := at.CompletionKey(ctx)
			if err != nil {
				return dispatch.Fail("no_key", err.Error())
			}
			keys <- key
			if runs.Add(1) == 1 {
				select { // the first owner dies here
				case <-block:
				case <-ctx.Done():
				}
				return dispatch.Fail("gone", "owner died")
			}
			return dispatch.Outcome{Status: dispatch.StatusPending, Pending: &dispatch.Pending{Key: key}}
		})}
	f := newFixture(t, idem)
	started := func(owner string, now func() time.Time) *turn.Service {
		return startService(t, turn.Config{Store: f.store, Tools: func() *tool.Registry { return f.reg },
			Owner: owner, Now: now, LeaseTTL: 10 * time.Second})
	}
	svcA := started("owner-a", time.Now)
	if _, err := svcA.Submit(context.Background(), "s", turn.TurnRequest{ID: "t", Calls: []turn.Call{{ID: "d", Name: "idefer"}}}); err != nil {
		t.Fatal(err)
	}
	routed := <-keys
	ring := storedKeyring(t, f.store)
	legacy := ring.LegacyKey("s", "t", "d")
	// What an older release wrote for the call: its key's row.
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(f.store.IssueCompletion(context.Background(), turn.Completion{KeyHash: legacy.Hash(), SessionID: "s", TurnID: "t",
		CallIndex: 0, CallID: "d", CallName: "idefer", Status: turn.CompletionIssued, CreatedAt: time.Now()}))

	// Another replica, an hour on: the lease has run out, and its
	// recovery (at start, or this call) resumes the turn.
	svcB := started("owner-b", func() time.Time { return time.Now().Add(time.Hour) })
	if _, err := svcB.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	if again := <-keys; again != string(legacy) {
		t.Errorf("the resumed call got key %q, want its legacy key (the first attempt's was %q)", again, routed)
	}
}

// storedKeyring is the keyring of the secret kept in s.
func storedKeyring(t *testing.T, s turn.Store) *completion.Keyring {
	t.Helper()
	secret, err := s.Secret(context.Background(), func() (string, error) { return "", errors.New("no secret stored") })
	if err != nil {
		t.Fatal(err)
	}
	sec, err := completion.ParseSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	ring, err := completion.NewKeyring(sec)
	if err != nil {
		t.Fatal(err)
	}
	return ring
}
