package turn_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnd/turnd/completion"
	"github.com/turnd/turnd/tool"
	"github.com/turnd/turnd/turn"
)

// received is one request the receiver got.
type received struct {
	header http.Header
	uri    string
	body   []byte
}

// receiver is a loopback webhook endpoint. It answers the status codes in
// codes, in order, then 200; every request is handed to got before it is
// answered. With hold set, it answers nothing until its client gives up.
type receiver struct {
	srv  *httptest.Server
	got  chan received
	hold atomic.Bool

	mu    sync.Mutex
	codes []int
}

func newReceiver(t *testing.T, codes ...int) *receiver {
	t.Helper()
	rc := &receiver{got: make(chan received, 64), codes: codes}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("receiver: reading body: %v", err)
		}
		rc.got <- received{header: r.Header.Clone(), uri: r.RequestURI, body: body}
		if rc.hold.Load() {
			<-r.Context().Done()
			return
		}
		rc.mu.Lock()
		code := http.StatusOK
		if len(rc.codes) > 0 {
			code, rc.codes = rc.codes[0], rc.codes[1:]
		}
		rc.mu.Unlock()
		w.WriteHeader(code)
		_, _ = io.WriteString(w, "receiver body, never recorded")
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// next returns the next request, failing the test when none comes.
func (rc *receiver) next(t *testing.T) received {
	t.Helper()
	select {
	case r := <-rc.got:
		return r
	case <-time.After(20 * time.Second):
		t.Fatal("no webhook arrived")
		return received{}
	}
}

// settledPayload is the body of a turn.settled webhook.
type settledPayload struct {
	Type      string    `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	Data      struct {
		SessionID string      `json:"session_id"`
		TurnID    string      `json:"turn_id"`
		Status    turn.Status `json:"status"`
		SettledAt time.Time   `json:"settled_at"`
	} `json:"data"`
}

func newSigner(t *testing.T) *completion.Signer {
	t.Helper()
	s, err := completion.NewSigner("whsec_" + base64.StdEncoding.EncodeToString([]byte(rand.Text())))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// hooked is a started service that delivers webhooks fast (backoff of a
// millisecond), on f's store.
type hooked struct {
	f      *fixture
	svc    *turn.Service
	signer *completion.Signer
	stop   func(ctx context.Context) error
}

func newHooked(t *testing.T, f *fixture, signer *completion.Signer, edit func(*turn.Config)) *hooked {
	t.Helper()
	cfg := turn.Config{
		Store: f.store, Tools: func() *tool.Registry { return f.reg }, Owner: "hooks",
		SweepInterval:     10 * time.Millisecond,
		WebhookSigner:     signer,
		WebhookInterval:   10 * time.Millisecond,
		WebhookBackoff:    time.Millisecond,
		WebhookMaxBackoff: 2 * time.Millisecond,
	}
	if edit != nil {
		edit(&cfg)
	}
	svc, err := turn.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	h := &hooked{f: f, svc: svc, signer: signer}
	h.stop = func(ctx context.Context) error {
		err := errors.New("already stopped")
		once.Do(func() { err = svc.Shutdown(ctx) })
		return err
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = h.stop(ctx)
	})
	return h
}

// shutdown stops the service, letting attempts in flight finish and record
// their outcome.
func (h *hooked) shutdown(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := h.stop(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
}

func (h *hooked) webhooks(t *testing.T, session, id string) []turn.Webhook {
	t.Helper()
	ws, err := h.f.store.TurnWebhooks(context.Background(), turn.TurnKey{SessionID: session, TurnID: id})
	if err != nil {
		t.Fatal(err)
	}
	return ws
}

// check verifies a received webhook's headers and signature and returns
// its payload.
func (h *hooked) check(t *testing.T, r received) settledPayload {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	if id := r.header.Get(completion.HeaderID); !strings.HasPrefix(id, "msg_") {
		t.Errorf("webhook-id %q", id)
	}
	if err := h.signer.Verify(r.header, r.body, time.Now(), 0); err != nil {
		t.Errorf("signature: %v", err)
	}
	var p settledPayload
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatalf("payload %s: %v", r.body, err)
	}
	return p
}

func (h *hooked) createSession(t *testing.T, id, callback string) {
	t.Helper()
	if _, err := h.svc.CreateSession(context.Background(), turn.SessionSpec{ID: id, CallbackURL: callback}); err != nil {
		t.Fatal(err)
	}
}

func TestWebhookSettledTurn(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	h := newHooked(t, newFixture(t), newSigner(t), nil)
	h.createSession(t, "s", rc.srv.URL+"/hooks/turns?tenant=7")
	tr := h.f.run(h.svc, "s", turn.TurnRequest{ID: "t", Calls: calls("a=read")})
	if tr.Status != turn.StatusCompleted {
		t.Fatalf("turn %s", tr.Status)
	}

	r := rc.next(t)
	p := h.check(t, r)
	if r.uri != "/hooks/turns?tenant=7" {
		t.Errorf("posted to %q", r.uri)
	}
	if p.Type != turn.EventTurnSettled || p.Data.SessionID != "s" || p.Data.TurnID != "t" || p.Data.Status != turn.StatusCompleted {
		t.Errorf("payload %s", r.body)
	}
	if !p.Data.SettledAt.Equal(tr.SettledAt) || !p.Timestamp.Equal(tr.SettledAt) {
		t.Errorf("payload times %v %v, turn settled at %v", p.Timestamp, p.Data.SettledAt, tr.SettledAt)
	}

	h.shutdown(t)
	ws := h.webhooks(t, "s", "t")
	if len(ws) != 1 {
		t.Fatalf("%d webhooks recorded, want 1", len(ws))
	}
	w := ws[0]
	if w.ID != r.header.Get(completion.HeaderID) || string(w.Body) != string(r.body) || w.Event != turn.EventTurnSettled {
		t.Errorf("recorded %+v, sent id %q body %s", w, r.header.Get(completion.HeaderID), r.body)
	}
	if w.DeliveredAt.IsZero() || !w.DeadAt.IsZero() || w.Attempts != 1 || w.LastError != "" {
		t.Errorf("recorded %+v, want delivered at the first attempt", w)
	}
	if len(rc.got) != 0 {
		t.Errorf("%d more requests after the acknowledgement", len(rc.got))
	}
}

// A receiver failing twice gets the same message three times (same
// webhook-id and body, each signed) and acknowledges it once.
func TestWebhookRetriedUntilAcknowledged(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, http.StatusServiceUnavailable, http.StatusServiceUnavailable)
	h := newHooked(t, newFixture(t), newSigner(t), nil)
	h.createSession(t, "s", rc.srv.URL)
	h.f.run(h.svc, "s", turn.TurnRequest{ID: "t", Calls: calls("a=write")})

	var rs []received
	for range 3 {
		r := rc.next(t)
		h.check(t, r)
		rs = append(rs, r)
	}
	h.shutdown(t)
	for _, r := range rs[1:] {
		if id := r.header.Get(completion.HeaderID); id != rs[0].header.Get(completion.HeaderID) {
			t.Errorf("webhook-id %q on a retry of %q", id, rs[0].header.Get(completion.HeaderID))
		}
		if string(r.body) != string(rs[0].body) {
			t.Errorf("retry body %s, first %s", r.body, rs[0].body)
		}
	}
	if len(rc.got) != 0 {
		t.Errorf("%d more requests after the acknowledgement", len(rc.got))
	}
	ws := h.webhooks(t, "s", "t")
	if len(ws) != 1 || ws[0].DeliveredAt.IsZero() || ws[0].Attempts != 3 || ws[0].LastError != "HTTP 503 Service Unavailable" {
		t.Fatalf("recorded %+v, want one delivered at attempt 3 after a 503", ws)
	}
}

// Turns that settle through their parked calls — a delivery, a timeout, a
// cancellation — send the webhook too; a waiting turn sends none.
func TestWebhookSettledByCompletion(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	keys := make(chan string, 4)
	h := newHooked(t, newFixture(t, deferring(keys, nil)), newSigner(t), nil)
	h.createSession(t, "s", rc.srv.URL)
	// Call ids differ: a session answers a call id once.
	submit := func(id, args string) {
		t.Helper()
		_, err := h.svc.Submit(context.Background(), "s", turn.TurnRequest{ID: id, Calls: []turn.Call{{ID: id + "-d", Name: "defer", Arguments: json.RawMessage(args)}}})
		if err != nil {
			t.Fatal(err)
		}
	}

	nextKey := func() string {
		t.Helper()
		select {
		case k := <-keys:
			return k
		case <-time.After(20 * time.Second):
			t.Fatal("the deferring tool did not run")
			return ""
		}
	}

	submit("delivered", `{}`)
	key := nextKey()
	tr, err := h.svc.Await(context.Background(), turn.TurnKey{SessionID: "s", TurnID: "delivered"})
	if err != nil || tr.Status != turn.StatusWaiting {
		t.Fatalf("before delivery: %s %v", tr.Status, err)
	}
	if ws := h.webhooks(t, "s", "delivered"); len(ws) != 0 {
		t.Fatalf("a waiting turn has webhooks %+v", ws)
	}
	if _, err := h.svc.Complete(context.Background(), key, turn.Delivery{Output: json.RawMessage(`{"approved":true}`)}); err != nil {
		t.Fatal(err)
	}
	p := h.check(t, rc.next(t))
	done := waitSettled(t, h.svc, "s", "delivered")
	if p.Data.TurnID != "delivered" || p.Data.Status != turn.StatusCompleted || !p.Data.SettledAt.Equal(done.SettledAt) {
		t.Errorf("payload %+v, turn settled %s at %v", p, done.Status, done.SettledAt)
	}

	submit("cancelled", `{}`)
	nextKey()
	if tr, err := h.svc.Await(context.Background(), turn.TurnKey{SessionID: "s", TurnID: "cancelled"}); err != nil || tr.Status != turn.StatusWaiting {
		t.Fatalf("before cancel: %s %v", tr.Status, err)
	}
	if _, err := h.svc.Cancel(context.Background(), turn.TurnKey{SessionID: "s", TurnID: "cancelled"}); err != nil {
		t.Fatal(err)
	}
	if p := h.check(t, rc.next(t)); p.Data.TurnID != "cancelled" || p.Data.Status != turn.StatusCancelled {
		t.Errorf("payload %+v, want cancelled", p)
	}

	submit("timed-out", `{"deadline_ms": 20}`)
	nextKey()
	if p := h.check(t, rc.next(t)); p.Data.TurnID != "timed-out" || p.Data.Status != turn.StatusCompleted {
		t.Errorf("payload %+v, want the timed-out turn completed", p)
	}
	h.shutdown(t)
	for _, id := range []string{"delivered", "cancelled", "timed-out"} {
		if ws := h.webhooks(t, "s", id); len(ws) != 1 || ws[0].DeliveredAt.IsZero() {
			t.Errorf("webhooks of %s: %+v, want one delivered", id, ws)
		}
	}
}

// Without a callback URL nothing is recorded, hence nothing is sent: the
// outbox row would have been written with the settlement.
func TestWebhookNoCallbackURL(t *testing.T) {
	t.Parallel()
	h := newHooked(t, newFixture(t), newSigner(t), nil)
	h.createSession(t, "explicit", "")
	h.f.run(h.svc, "explicit", turn.TurnRequest{ID: "t", Calls: calls("a=read")})
	h.f.run(h.svc, "implicit", turn.TurnRequest{ID: "t", Calls: calls("a=read")})
	for _, s := range []string{"explicit", "implicit"} {
		if ws := h.webhooks(t, s, "t"); len(ws) != 0 {
			t.Errorf("session %s: webhooks %+v", s, ws)
		}
	}
}

// Unsigned (no signer configured): the id and timestamp still go out, so
// receivers can drop duplicates.
func TestWebhookUnsigned(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	h := newHooked(t, newFixture(t), nil, nil)
	h.createSession(t, "s", rc.srv.URL)
	h.f.run(h.svc, "s", turn.TurnRequest{ID: "t", Calls: calls("a=read")})
	r := rc.next(t)
	if r.header.Get(completion.HeaderID) == "" || r.header.Get(completion.HeaderTimestamp) == "" || r.header.Get(completion.HeaderSignature) != "" {
		t.Errorf("unsigned headers %v", r.header)
	}
}

// A webhook failing past its max age is given up: dead, not delivered,
// never sent again.
func TestWebhookGivenUp(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, http.StatusInternalServerError)
	h := newHooked(t, newFixture(t), newSigner(t), func(c *turn.Config) { c.WebhookMaxAge = time.Nanosecond })
	h.createSession(t, "s", rc.srv.URL)
	h.f.run(h.svc, "s", turn.TurnRequest{ID: "t", Calls: calls("a=read")})
	rc.next(t)
	h.shutdown(t)
	ws := h.webhooks(t, "s", "t")
	if len(ws) != 1 || ws[0].DeadAt.IsZero() || !ws[0].DeliveredAt.IsZero() || ws[0].LastError != "HTTP 500 Internal Server Error" {
		t.Fatalf("recorded %+v, want one dead after a 500", ws)
	}
	if len(rc.got) != 0 {
		t.Errorf("%d more requests after giving up", len(rc.got))
	}
}

// A shutdown whose grace ends during an attempt releases the webhook for
// an immediate retry; the next process sends it again, same id.
func TestWebhookInterruptedByShutdown(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	rc.hold.Store(true)
	f := newFixture(t)
	h := newHooked(t, f, newSigner(t), nil)
	h.createSession(t, "s", rc.srv.URL)
	f.run(h.svc, "s", turn.TurnRequest{ID: "t", Calls: calls("a=read")})
	first := rc.next(t) // the attempt is in flight, held by the receiver

	over, cancel := context.WithCancel(context.Background())
	cancel() // no grace left
	_ = h.stop(over)
	ws := h.webhooks(t, "s", "t")
	if len(ws) != 1 || !ws[0].DeliveredAt.IsZero() || !ws[0].DeadAt.IsZero() ||
		ws[0].NextAttemptAt.After(time.Now()) || ws[0].LastError != "attempt interrupted by shutdown" {
		t.Fatalf("after shutdown: %+v, want one open, due now", ws)
	}

	rc.hold.Store(false)
	next := newHooked(t, f, h.signer, nil)
	again := rc.next(t)
	next.check(t, again)
	if again.header.Get(completion.HeaderID) != first.header.Get(completion.HeaderID) {
		t.Errorf("retried as %q, first sent as %q", again.header.Get(completion.HeaderID), first.header.Get(completion.HeaderID))
	}
	next.shutdown(t)
	if ws := next.webhooks(t, "s", "t"); len(ws) != 1 || ws[0].DeliveredAt.IsZero() || ws[0].Attempts != 2 {
		t.Fatalf("after the retry: %+v, want delivered at attempt 2", ws)
	}
}

func TestCallbackURLValidated(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, bad := range []string{
		"/relative/path",
		"hooks.example.com/x",
		"ftp://hooks.example.com/x",
		"https://user:secret@hooks.example.com/x",
		"https://user@hooks.example.com/x",
		"https:///no-host",
		"https:opaque",
		"http://[::1",
		"https://hooks.example.com/" + strings.Repeat("x", 2048),
	} {
		_, err := f.svc.CreateSession(context.Background(), turn.SessionSpec{CallbackURL: bad})
		var inv *turn.InvalidError
		if !errors.As(err, &inv) || inv.Field != "callback_url" {
			t.Errorf("callback_url %q: %v, want an InvalidError on callback_url", bad, err)
		}
	}
	for _, good := range []string{"https://hooks.example.com/turnd?tenant=7", "http://127.0.0.1:8080/hook", "HTTPS://Hooks.Example.com"} {
		if _, err := f.svc.CreateSession(context.Background(), turn.SessionSpec{CallbackURL: good}); err != nil {
			t.Errorf("callback_url %q: %v", good, err)
		}
	}
}
