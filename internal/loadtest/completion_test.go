package loadtest_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/turnd/turnd/api"
	"github.com/turnd/turnd/internal/loadtest"
	"github.com/turnd/turnd/store/sqlite"
	"github.com/turnd/turnd/tool"
	"github.com/turnd/turnd/turn"
)

func TestPendingToolRefusesACallWithoutKey(t *testing.T) {
	t.Parallel()
	p := loadtest.NewPendingTool("")
	w := httptest.NewRecorder()
	p.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/", bytes.NewReader([]byte(`{"session_id":"s","turn_id":"t","call_id":"c"}`))))
	if w.Code != http.StatusBadRequest {
		t.Errorf("status %d, want 400", w.Code)
	}
	w = httptest.NewRecorder()
	p.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/", bytes.NewReader([]byte(
		`{"session_id":"s","turn_id":"t","call_id":"c","completion":{"key":"ck_1","url":"u","deadline":"d"}}`))))
	if w.Code != http.StatusAccepted || w.Body.String() != `{"pending":{"deadline":"24h"}}` {
		t.Errorf("answer %d %s", w.Code, w.Body)
	}
	if k, ok := p.Key("s", "t", "c"); !ok || k != "ck_1" {
		t.Errorf("key %q, %v", k, ok)
	}
	if parked, refused := p.Calls(); parked != 1 || refused != 1 {
		t.Errorf("parked %d, refused %d", parked, refused)
	}
}

// TestParkAndComplete runs the deferred-completion loops against a whole
// turnd on the embedded store: calls park, deliveries settle their turns,
// and waiters learn of it.
func TestParkAndComplete(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pending := loadtest.NewPendingTool("")
	toolSrv := httptest.NewServer(pending)
	t.Cleanup(toolSrv.Close)

	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "turnd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	reg, err := tool.Parse(loadtest.DeferredToolConfig("job", toolSrv.URL, "write"), tool.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.CloseIdleConnections)
	timed := loadtest.NewTimedCompletions(st)
	svc, err := turn.New(turn.Config{Store: timed, Tools: func() *tool.Registry { return reg }})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = svc.Shutdown(sctx)
	})
	srv := httptest.NewServer(api.New(api.Config{Service: svc}))
	t.Cleanup(srv.Close)

	turns, r, err := loadtest.Park(ctx, srv.URL, loadtest.Parking{Clients: 2, Turns: 4, Body: loadtest.DeferredTurn("job", 3), Tool: pending, TurnsPerSession: 2})
	if err != nil {
		t.Fatal(err)
	}
	if r.Ops != 4 || len(turns) != 4 {
		t.Fatalf("parked %v: %d turns", r, len(turns))
	}
	if turns[0].SessionID != turns[1].SessionID || turns[1].SessionID == turns[2].SessionID {
		t.Errorf("two turns per session: sessions %s, %s, %s", turns[0].SessionID, turns[1].SessionID, turns[2].SessionID)
	}
	for _, pt := range turns {
		if len(pt.Keys) != 3 || pt.Keys[0] == "" || pt.Keys[0] == pt.Keys[1] {
			t.Fatalf("turn %+v", pt)
		}
	}
	if n, _ := pending.Calls(); n != 12 {
		t.Errorf("the tool parked %d calls, want 12", n)
	}

	d, exhausted, err := loadtest.Completions(ctx, srv.URL, 2, time.Minute, turns)
	if err != nil {
		t.Fatal(err)
	}
	if !exhausted || d.Ops != 12 || d.Errors != 0 || d.Elapsed >= time.Minute {
		t.Errorf("completions %v, exhausted %v", d, exhausted)
	}
	client := &http.Client{}
	t.Cleanup(client.CloseIdleConnections)
	for _, pt := range turns {
		if s, err := loadtest.AwaitTurn(ctx, client, srv.URL, pt.SessionID, pt.TurnID, 0); err != nil || s != "completed" {
			t.Errorf("turn %s: %s (%v)", pt.TurnID, s, err)
		}
	}
	calls := timed.Snapshot()
	for _, c := range calls {
		if c.Name == "Resolve" && c.Calls != 12 {
			t.Errorf("%d Resolve calls, want 12", c.Calls)
		}
	}

	more, _, err := loadtest.Park(ctx, srv.URL, loadtest.Parking{Clients: 2, Turns: 4, Body: loadtest.DeferredTurn("job", 1), Tool: pending})
	if err != nil {
		t.Fatal(err)
	}
	l, err := loadtest.CompletionLatency(ctx, srv.URL, srv.URL, more, 2, loadtest.LatencyOptions{Hold: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if l.Ops != 4 || l.P50 <= 0 || l.P50 > 10*time.Second {
		t.Errorf("latency %v", l)
	}
}
