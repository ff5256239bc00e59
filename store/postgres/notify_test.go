package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/turnd/turnd/internal/pgtest"
	"github.com/turnd/turnd/internal/testnet"
	"github.com/turnd/turnd/store/postgres"
	"github.com/turnd/turnd/turn"
)

// openAt opens a store on the schema of url, closed in t.Cleanup.
func openAt(t *testing.T, url string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func newNotifier(t *testing.T, s *postgres.Store, o postgres.NotifierOptions) *postgres.Notifier {
	t.Helper()
	n, err := postgres.NewNotifier(context.Background(), s, o)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// listening runs n.Listen until the test ends and returns what it hears.
func listening(t *testing.T, n *postgres.Notifier) <-chan turn.TurnKey {
	t.Helper()
	heard := make(chan turn.TurnKey, 64)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Listen(ctx, func(k turn.TurnKey) { heard <- k }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Listen returned %v after its context ended, want nil", err)
		}
	})
	return heard
}

func next(t *testing.T, heard <-chan turn.TurnKey) turn.TurnKey {
	t.Helper()
	select {
	case k := <-heard:
		return k
	case <-time.After(10 * time.Second):
		t.Fatal("no notification")
		return turn.TurnKey{}
	}
}

func publish(t *testing.T, n *postgres.Notifier, keys ...turn.TurnKey) {
	t.Helper()
	if err := n.Publish(context.Background(), keys...); err != nil {
		t.Fatal(err)
	}
}

// connected waits for a listener's first notification, the zero key its
// (re)connection sends; when is when that is, for the failure's message.
func connected(t *testing.T, heard <-chan turn.TurnKey, when string) {
	t.Helper()
	if k := next(t, heard); k != (turn.TurnKey{}) {
		t.Fatalf("%s: notification %v, want the zero key", when, k)
	}
}

// publishHeard publishes k from n, and fails (what the case is) unless
// the next notification heard is k.
func publishHeard(t *testing.T, n *postgres.Notifier, heard <-chan turn.TurnKey, k turn.TurnKey, what string) {
	t.Helper()
	publish(t, n, k)
	if got := next(t, heard); got != k {
		t.Errorf("%s: heard %v, want %v", what, got, k)
	}
}

// The listener hears the other notifiers of its schema — not itself, not
// another schema's — and, after connecting, the zero key.
func TestNotifier(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	// A short ping interval: idle waits time out and ping in between.
	listener := newNotifier(t, openAt(t, url), postgres.NotifierOptions{PingInterval: 20 * time.Millisecond})
	publisher := newNotifier(t, openAt(t, url), postgres.NotifierOptions{})
	stranger := newNotifier(t, pgtest.Store(t), postgres.NotifierOptions{})
	if listener.Channel() == stranger.Channel() || listener.Channel() != publisher.Channel() {
		t.Fatalf("channels %q, %q (same schema) and %q (another schema)", listener.Channel(), publisher.Channel(), stranger.Channel())
	}

	heard := listening(t, listener)
	connected(t, heard, "first")
	if err := listener.Listen(context.Background(), func(turn.TurnKey) {}); err == nil {
		t.Error("a second Listen on one notifier did not fail")
	}
	time.Sleep(100 * time.Millisecond) // a few idle ping intervals

	a := turn.TurnKey{SessionID: "s-1", TurnID: "t.1:x@y+z=w~v"}
	b := turn.TurnKey{SessionID: "s-2", TurnID: "t-2"}
	sentinel := turn.TurnKey{SessionID: "s", TurnID: "sentinel"}
	publish(t, publisher, a, b)
	got := map[turn.TurnKey]bool{next(t, heard): true, next(t, heard): true}
	if !got[a] || !got[b] {
		t.Errorf("heard %v, want %v and %v", got, a, b)
	}
	publish(t, listener, turn.TurnKey{SessionID: "own", TurnID: "t"})
	publish(t, stranger, turn.TurnKey{SessionID: "other-schema", TurnID: "t"})
	publish(t, publisher) // no keys: nothing
	publish(t, publisher, sentinel)
	if k := next(t, heard); k != sentinel {
		t.Errorf("heard %v before the sentinel: its own or another schema's publication", k)
	}
}

// A listening connection that breaks is replaced; the zero key says that
// notifications may have been missed meanwhile.
func TestNotifierReconnects(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	st := openAt(t, url)
	listener := newNotifier(t, st, postgres.NotifierOptions{MinBackoff: 10 * time.Millisecond})
	publisher := newNotifier(t, openAt(t, url), postgres.NotifierOptions{})
	heard := listening(t, listener)
	connected(t, heard, "first")

	ctx := context.Background()
	listen := "LISTEN " + pgx.Identifier{listener.Channel()}.Sanitize()
	var n int
	if err := st.Pool().QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE query = $1`, listen).Scan(&n); err != nil || n != 1 {
		t.Fatalf("terminating the listening connection: %d terminated, %v", n, err)
	}
	connected(t, heard, "after the connection broke")
	publishHeard(t, publisher, heard, turn.TurnKey{SessionID: "s", TurnID: "after"}, "after reconnecting")
}

// On Citus the notifications are the coordinator's: replicas whose stores
// talk to another node send and hear them through Options.NotifyURL. Here
// a second database stands for the coordinator: what goes through it is
// heard there, and not on the stores' own database.
func TestNotifierThroughNotifyURL(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	coordinator := pgtest.Database(t)
	openVia := func() *postgres.Store {
		s, err := postgres.Open(context.Background(), url, postgres.Options{NotifyURL: coordinator})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		return s
	}
	sender := newNotifier(t, openVia(), postgres.NotifierOptions{})
	hearer := newNotifier(t, openVia(), postgres.NotifierOptions{})
	local := newNotifier(t, openAt(t, url), postgres.NotifierOptions{})
	localSender := newNotifier(t, openAt(t, url), postgres.NotifierOptions{})
	heard, heardLocal := listening(t, hearer), listening(t, local)
	for _, h := range []<-chan turn.TurnKey{heard, heardLocal} {
		connected(t, h, "first")
	}
	publishHeard(t, sender, heard, turn.TurnKey{SessionID: "s", TurnID: "via-coordinator"}, "through the notification database")
	publishHeard(t, localSender, heardLocal, turn.TurnKey{SessionID: "s", TurnID: "sentinel"},
		"on the stores' own database, where nothing of the coordinator's comes before the sentinel")
}

// A notification database that cannot be reached fails Open.
func TestOpenNotifyURLUnreachable(t *testing.T) {
	t.Parallel()
	_, err := postgres.Open(context.Background(), pgtest.URL(t), postgres.Options{NotifyURL: "postgres://nobody@" + testnet.ClosedAddr(t) + "/none?connect_timeout=2"})
	if err == nil {
		t.Fatal("Open with an unreachable NotifyURL succeeded")
	}
}

// rawListen listens on channel with a connection of its own, as something
// that is not a turnd replica would, and returns the payloads it hears.
func rawListen(t *testing.T, url, channel string) <-chan string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	heard := make(chan string, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			msg, err := conn.WaitForNotification(ctx)
			if err != nil {
				return
			}
			heard <- msg.Payload
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		_ = conn.Close(context.Background())
	})
	return heard
}

// nextPayload returns the next payload heard that is not a replica saying
// it listens (hello or here).
func nextPayload(t *testing.T, heard <-chan string) string {
	t.Helper()
	for {
		select {
		case p := <-heard:
			if !strings.HasSuffix(p, " hello") && !strings.HasSuffix(p, " here") {
				return p
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no notification")
			return ""
		}
	}
}

// A listening replica that knows of no other publishes nothing; once
// another starts listening, the two hear each other's publications at
// once. A Notifier that does not listen publishes whatever it knows.
func TestNotifierAloneSendsNothing(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	// No periodic hello within the test, and no wait for answers after
	// joining: a Notifier that heard no one is alone at once.
	o := postgres.NotifierOptions{HelloInterval: time.Hour, JoinWait: time.Nanosecond}
	a := newNotifier(t, openAt(t, url), o)
	outsider := newNotifier(t, openAt(t, url), o) // never listens
	raw := rawListen(t, url, a.Channel())
	heardA := listening(t, a)
	connected(t, heardA, "first")
	alone := turn.TurnKey{SessionID: "s", TurnID: "alone"}
	sentinel := turn.TurnKey{SessionID: "s", TurnID: "sentinel"}
	publish(t, a, alone)
	publish(t, outsider, sentinel)
	if p := nextPayload(t, raw); !strings.HasSuffix(p, " s/sentinel") {
		t.Fatalf("heard %q before the outsider's sentinel: the lone replica published", p)
	}
	if k := next(t, heardA); k != sentinel {
		t.Fatalf("the lone replica heard %v, want the outsider's sentinel", k)
	}

	b := newNotifier(t, openAt(t, url), o)
	heardB := listening(t, b)
	connected(t, heardB, "first")
	// b said hello when it started listening, and a answered here: b
	// learns of a only from that answer (a's own hello came before b
	// listened, and no periodic one comes within the hour).
	toA := turn.TurnKey{SessionID: "s", TurnID: "to-a"}
	deadline := time.Now().Add(10 * time.Second)
	for learned := false; !learned; {
		publish(t, b, toA)
		select {
		case k := <-heardA:
			if k != toA {
				t.Fatalf("a heard %v, want b's publication %v", k, toA)
			}
			learned = true
		case <-time.After(50 * time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatal("b never published: it did not learn of a from a's answer to its hello")
			}
		}
	}
	// a learned of b from its hello, before answering it.
	publishHeard(t, a, heardB, turn.TurnKey{SessionID: "s", TurnID: "to-b"}, "b, a's publication")
}

// Just after its listening connection came up, a Notifier publishes even
// though it has heard no one yet: the others' answers take a moment.
func TestNotifierPublishesWhileJoining(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	a := newNotifier(t, openAt(t, url), postgres.NotifierOptions{HelloInterval: time.Hour, JoinWait: time.Hour})
	raw := rawListen(t, url, a.Channel())
	heardA := listening(t, a)
	connected(t, heardA, "first")
	if a.Alone() {
		t.Fatal("alone while joining")
	}
	publish(t, a, turn.TurnKey{SessionID: "s", TurnID: "joining"})
	if p := nextPayload(t, raw); !strings.HasSuffix(p, " s/joining") {
		t.Fatalf("heard %q, want the joining replica's publication", p)
	}
}
