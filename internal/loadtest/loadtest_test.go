package loadtest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/turnd/turnd/internal/loadtest"
)

func TestEchoTurn(t *testing.T) {
	t.Parallel()
	body := loadtest.EchoTurn(4)
	var turn struct {
		ID    string `json:"id"`
		Calls []struct {
			ID        string          `json:"id"`
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"calls"`
	}
	if err := json.Unmarshal(body(17), &turn); err != nil {
		t.Fatalf("%s: %v", body(17), err)
	}
	if turn.ID != "t17" || len(turn.Calls) != 4 {
		t.Fatalf("turn %+v", turn)
	}
	for k, c := range turn.Calls {
		if c.ID != fmt.Sprintf("t17.%d", k) || c.Name != "echo" || string(c.Arguments) != fmt.Sprintf(`{"n":17,"k":%d}`, k) {
			t.Errorf("call %d: %+v", k, c)
		}
	}
}

// fakeTurnd answers every turn completed with one ok result per call, and
// records which session posted which turn.
type fakeTurnd struct {
	mu    sync.Mutex
	turns map[string]string // turn id → session path
	fail  bool
}

func (f *fakeTurnd) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.fail {
		http.Error(w, `{"code":"internal"}`, http.StatusInternalServerError)
		return
	}
	var req struct {
		ID    string `json:"id"`
		Calls []struct {
			ID string `json:"id"`
		} `json:"calls"`
	}
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/turns") || json.NewDecoder(r.Body).Decode(&req) != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	if prev, dup := f.turns[req.ID]; dup {
		f.mu.Unlock()
		http.Error(w, "turn id reused by "+prev, http.StatusConflict)
		return
	}
	f.turns[req.ID] = r.URL.Path
	f.mu.Unlock()
	type result struct {
		CallID string `json:"call_id"`
		Status string `json:"status"`
	}
	out := struct {
		Status  string   `json:"status"`
		Results []result `json:"results"`
	}{Status: "completed"}
	for _, c := range req.Calls {
		out.Results = append(out.Results, result{c.ID, "ok"})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

func TestTurns(t *testing.T) {
	t.Parallel()
	f := &fakeTurnd{turns: map[string]string{}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	r, err := loadtest.Turns(t.Context(), srv.URL, 4, 200*time.Millisecond, 4, loadtest.EchoTurn(4))
	if err != nil {
		t.Fatal(err)
	}
	if r.Ops == 0 || r.Errors != 0 || r.PerSec <= 0 || r.P50 <= 0 || r.P99 < r.P50 || r.Max < r.P99 {
		t.Errorf("result %+v", r)
	}
	sessions := map[string]int{}
	for _, path := range f.turns {
		sessions[path]++
	}
	if len(sessions) != 4 {
		t.Errorf("turns came from %d sessions, want one per client (4): %v", len(sessions), sessions)
	}
	// Every client's warm-up turn is outside the window.
	if got, want := len(f.turns), r.Ops+4; got != want {
		t.Errorf("server saw %d turns, want %d measured + 4 warm-up", got, want)
	}
}

func TestTurnsFailing(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		handler http.Handler
		calls   int
		body    func(int) []byte
		want    string
	}{
		{"server error at warm-up", &fakeTurnd{fail: true}, 1, loadtest.EchoTurn(1), "answer 500"},
		{"a result missing", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprint(w, `{"status":"completed","results":[{"call_id":"a","status":"ok"}]}`)
		}), 2, loadtest.EchoTurn(2), "1 results for 2 calls"},
		{"a call failed", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprint(w, `{"status":"completed","results":[{"call_id":"a","status":"error"}]}`)
		}), 1, loadtest.EchoTurn(1), "call a answered error"},
		{"bodies of another count than the workload's", &fakeTurnd{turns: map[string]string{}}, 1, loadtest.EchoTurn(2),
			"request body has 2 calls, the workload 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(tt.handler)
			defer srv.Close()
			_, err := loadtest.Turns(t.Context(), srv.URL, 2, 100*time.Millisecond, tt.calls, tt.body)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want one saying %q", err, tt.want)
			}
		})
	}
}

func TestProc(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	rss, err := loadtest.RSS(os.Getpid())
	if err != nil || rss < 1<<20 {
		t.Errorf("RSS = %d, %v", rss, err)
	}
	peak, err := loadtest.PeakRSS(os.Getpid())
	// The kernel's RSS counters are cached per thread and summed when
	// read, and the peak is only raised at some events, so a peak read
	// after the RSS may come out a few pages under it (seen: 64 kB) while
	// the parallel tests allocate and the runtime returns pages.
	const slack = 4 << 20
	if err != nil || peak < rss-slack {
		t.Errorf("PeakRSS = %d, %v (RSS %d)", peak, err, rss)
	}
	if _, err := loadtest.ProcessCPU(os.Getpid()); err != nil {
		t.Error(err)
	}
	busy, total, err := loadtest.MachineCPU()
	if err != nil || total <= 0 || busy > total {
		t.Errorf("MachineCPU = %v, %v, %v", busy, total, err)
	}
	boot, err := loadtest.BootTime()
	if err != nil || boot.Year() < 2000 || !boot.Before(time.Now()) {
		t.Errorf("BootTime = %v, %v", boot, err)
	}
	self, err := loadtest.ReadProcessTimes(os.Getpid())
	// btime is to the second, and the clock may have been set since.
	if started := boot.Add(self.Started); err != nil || time.Since(started) < -5*time.Second || time.Since(started) > time.Hour {
		t.Errorf("this test process started at %v (%v)", started, err)
	}
}

// connectDB connects to DATABASE_URL, skipping t when it is not set; the
// connection closes when t ends.
func connectDB(t *testing.T) (dbURL string, conn *pgx.Conn) {
	t.Helper()
	dbURL = os.Getenv("DATABASE_URL")
	if dbURL == "" {
		t.Skip("DATABASE_URL is not set")
	}
	conn, err := pgx.Connect(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return dbURL, conn
}

func TestInsertBaseline(t *testing.T) {
	t.Parallel()
	dbURL, conn := connectDB(t)
	ctx := t.Context()
	before, err := loadtest.ReadPGStats(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	// Other packages' tests may run baselines of their own on the same
	// server at the same time, so only this run's schema is checked.
	scratch := "loadtest_" + loadtest.RandomID(6)
	r, err := loadtest.InsertBaselineIn(ctx, dbURL, scratch, 4, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if r.Ops == 0 || r.Errors != 0 || r.P50 <= 0 {
		t.Errorf("result %+v", r)
	}
	var left int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_namespace WHERE nspname = $1`, scratch).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("scratch schema %s left behind", scratch)
	}
	after, err := loadtest.ReadPGStats(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	if d := after.Sub(before); d.XactCommit < 0 || d.TupInserted < 0 {
		t.Errorf("counters went backwards: %+v", d)
	}
}

func TestQuickCheck(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		answer string
		calls  int
		want   bool
	}{
		{`{"id":"t","session_id":"s","status":"completed","results":[{"call_id":"a","status":"ok"},{"call_id":"b","status":"ok"}]}`, 2, true},
		{`{"id":"t","status":"completed","results":[]}`, 0, true},
		{`{"id":"t","status":"completed","results":[{"call_id":"a","status":"ok","output":"\"status\":\"error\""}]}`, 1, true},
		{`{"id":"t","status":"completed","results":[{"call_id":"a","status":"ok"}]}`, 2, false}, // a result missing
		{`{"id":"t","status":"completed","results":[{"call_id":"a","status":"ok"},{"call_id":"b","status":"ok"}]}`, 1, false},
		{`{"id":"t","status":"completed","results":[{"call_id":"a","status":"ok"},{"call_id":"b","status":"error"}]}`, 2, false},
		{`{"id":"t","status":"failed","results":[{"call_id":"a","status":"ok"}]}`, 1, false},
		{`{"id":"t","status":"running","results":[]}`, 0, false},
		{`{"id":"t","results":[]}`, 0, false},
		{``, 0, false},
		{`not json`, 0, false},
	} {
		if got := loadtest.QuickCheck([]byte(tc.answer), tc.calls); got != tc.want {
			t.Errorf("QuickCheck(%s, %d) = %v, want %v", tc.answer, tc.calls, got, tc.want)
		}
	}
}
