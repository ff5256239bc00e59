package turn_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/turnd/turnd/tool"
	"github.com/turnd/turnd/turn"
)

// records keeps the log records of level warn and above.
type records struct {
	mu   sync.Mutex
	msgs []string
}

func (h *records) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (h *records) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.msgs = append(h.msgs, r.Message)
	h.mu.Unlock()
	return nil
}
func (h *records) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *records) WithGroup(string) slog.Handler      { return h }

func (h *records) all() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return strings.Join(h.msgs, "; ")
}

// pausingStore blocks the first GetTurn of a turn after its move to
// waiting (the settling wave reads the turn back) until release closes.
type pausingStore struct {
	turn.Store
	paused  chan struct{}
	release chan struct{}
	once    sync.Once
}

func (s *pausingStore) GetTurn(ctx context.Context, k turn.TurnKey) (turn.Turn, error) {
	t, err := s.Store.GetTurn(ctx, k)
	if err == nil && t.Status == turn.StatusWaiting {
		s.once.Do(func() {
			close(s.paused)
			<-s.release
		})
	}
	return t, err
}

// A turn that just moved to waiting released its lease itself: a renewal
// pass while its wave still ends finds no lease, and that is no "turn lease
// lost" (11 such warnings in one run before).
func TestNoLeaseLostWarningForWaitingTurns(t *testing.T) {
	t.Parallel()
	st := &pausingStore{Store: openSQLite(t), paused: make(chan struct{}), release: make(chan struct{})}
	keys := make(chan string, 1)
	reg := mustRegistry(t, deferring(keys, nil))
	logs := &records{}
	svc := startService(t, turn.Config{Store: st, Tools: func() *tool.Registry { return reg }, Logger: slog.New(logs)})
	if _, err := svc.Submit(context.Background(), "s1", turn.TurnRequest{ID: "t1", Async: true,
		Calls: []turn.Call{{ID: "c1", Name: "defer", Arguments: json.RawMessage(`{}`)}}}); err != nil {
		t.Fatal(err)
	}
	<-keys
	<-st.paused
	svc.Renew(context.Background())
	close(st.release)
	got, err := svc.Await(context.Background(), turn.TurnKey{SessionID: "s1", TurnID: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != turn.StatusWaiting {
		t.Errorf("turn %s, want waiting", got.Status)
	}
	if w := logs.all(); strings.Contains(w, "lease lost") {
		t.Errorf("warnings: %s", w)
	}
}
