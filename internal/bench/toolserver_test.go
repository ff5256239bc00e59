package bench

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/turnd/turnd/tool"
)

func startTools(t *testing.T) *ToolServer {
	t.Helper()
	ts, err := StartToolServer("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ts.Close(); err != nil {
			t.Errorf("closing the tool server: %v", err)
		}
	})
	return ts
}

func postJSON(t *testing.T, url, body string) (int, http.Header, []byte) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

func TestToolServerAnswers(t *testing.T) {
	t.Parallel()
	ts := startTools(t)
	code, h, b := postJSON(t, ts.URL()+"/read", `{"call_id":"c","arguments":{"latency_us":0,"bytes":0}}`)
	if code != 200 || h.Get("Content-Type") != "application/json" || string(b) != `{"output":{"ok":true}}` {
		t.Errorf("small output: %d %s %s", code, h.Get("Content-Type"), b)
	}
	start := time.Now()
	code, h, b = postJSON(t, ts.URL()+"/write", `{"arguments":{"latency_us":20000,"bytes":1000}}`)
	if code != 200 || !strings.HasPrefix(h.Get("Content-Type"), "text/plain") || len(b) != 1000 || bytes.Count(b, []byte("\n")) != 1000/64 {
		t.Errorf("text output: %d %s, %d bytes, %d lines", code, h.Get("Content-Type"), len(b), bytes.Count(b, []byte("\n")))
	}
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Errorf("a 20ms latency answered in %v", d)
	}
	for _, bad := range []string{`{"arguments":{"latency_us":-1}}`, `{"arguments":{"bytes":1000000000}}`, `not json`, `{"arguments":{"latency_us":"soon"}}`} {
		code, _, b := postJSON(t, ts.URL()+"/read", bad)
		var e struct {
			Error struct{ Code, Message string }
		}
		if code != 400 || json.Unmarshal(b, &e) != nil || e.Error.Code == "" {
			t.Errorf("%s: %d %s, want 400 with a tool error", bad, code, b)
		}
	}
	code, _, b = postJSON(t, ts.URL()+"/deferred", `{"arguments":{"latency_us":0}}`)
	if code != 400 || !strings.Contains(string(b), "no_completion") {
		t.Errorf("deferred without a completion: %d %s", code, b)
	}
	if calls, _, _, _ := ts.Stats(); calls != 7 {
		t.Errorf("%d calls counted, want 7", calls)
	}
}

// TestToolServerDelivers checks a deferred call: pending at once, then the
// output POSTed to the completion URL after the delay.
func TestToolServerDelivers(t *testing.T) {
	t.Parallel()
	settled := make(chan error, 2)
	ts, err := startToolServer("", func(err error) { settled <- err })
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	type delivery struct {
		path string
		body []byte
		at   time.Time
	}
	got := make(chan delivery, 2)
	var status atomic.Int64
	status.Store(http.StatusOK)
	turnd := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- delivery{r.URL.Path, b, time.Now()}
		w.WriteHeader(int(status.Load()))
		_, _ = w.Write([]byte(`{"status":"accepted"}`))
	}))
	defer turnd.Close()
	start := time.Now()
	code, _, b := postJSON(t, ts.URL()+"/deferred",
		`{"arguments":{"latency_us":30000,"bytes":100},"completion":{"key":"ck_1","url":"`+turnd.URL+`/v1/complete/ck_1"}}`)
	if code != http.StatusAccepted || string(b) != `{"pending":{"deadline":"15m"}}` {
		t.Fatalf("pending answer: %d %s", code, b)
	}
	d := <-got
	if err := <-settled; err != nil {
		t.Errorf("the delivery failed: %v", err)
	}
	var out struct{ Output string }
	if d.path != "/v1/complete/ck_1" || json.Unmarshal(d.body, &out) != nil || len(out.Output) != 100 {
		t.Errorf("delivery to %s: %s", d.path, d.body)
	}
	if d.at.Sub(start) < 30*time.Millisecond {
		t.Errorf("delivered %v after the call, before the 30ms delay", d.at.Sub(start))
	}
	// A refused delivery is counted, with what turnd answered.
	status.Store(http.StatusGone)
	postJSON(t, ts.URL()+"/deferred", `{"arguments":{},"completion":{"url":"`+turnd.URL+`/v1/complete/ck_2"}}`)
	<-got
	if err := <-settled; err == nil || !strings.Contains(err.Error(), "410") {
		t.Errorf("a delivery answered 410: %v", err)
	}
	calls, delivered, failed, first := ts.Stats()
	if calls != 2 || delivered != 1 || failed != 1 || first == nil || !strings.Contains(first.Error(), "410") {
		t.Errorf("stats: %d calls, %d delivered, %d failed (%v)", calls, delivered, failed, first)
	}
}

// TestToolServerHolds: a held call answers pending and hands its key to
// the bench that expects its turn, delivering nothing itself; a held call
// of a turn nobody expects is refused.
func TestToolServerHolds(t *testing.T) {
	t.Parallel()
	ts := startTools(t)
	keys, forget := ts.expect("s1", "c")
	code, _, b := postJSON(t, ts.URL()+"/deferred",
		`{"session_id":"s1","turn_id":"c","arguments":{"hold":true},"completion":{"key":"ck_1","url":"http://127.0.0.1:9/v1/complete/ck_1"}}`)
	if code != http.StatusAccepted || string(b) != `{"pending":{"deadline":"15m"}}` {
		t.Fatalf("pending answer: %d %s", code, b)
	}
	select {
	case k := <-keys:
		if k != "ck_1" {
			t.Errorf("key %q", k)
		}
	default:
		t.Fatal("the key was not handed over before the pending answer")
	}
	forget()
	code, _, b = postJSON(t, ts.URL()+"/deferred",
		`{"session_id":"s1","turn_id":"c","arguments":{"hold":true},"completion":{"key":"ck_2","url":"http://127.0.0.1:9/v1/complete/ck_2"}}`)
	if code != http.StatusBadRequest || !strings.Contains(string(b), "not_expected") {
		t.Errorf("a held call nobody expects: %d %s", code, b)
	}
	if _, delivered, failed, _ := ts.Stats(); delivered != 0 || failed != 0 {
		t.Errorf("held calls delivered: %d delivered, %d failed", delivered, failed)
	}
}

func TestToolServerCloseAbandonsWaitingDeliveries(t *testing.T) {
	t.Parallel()
	ts, err := StartToolServer("")
	if err != nil {
		t.Fatal(err)
	}
	code, _, _ := postJSON(t, ts.URL()+"/deferred", `{"arguments":{"latency_us":600000000},"completion":{"url":"http://127.0.0.1:9/v1/complete/k"}}`)
	if code != http.StatusAccepted {
		t.Fatalf("pending answer %d", code)
	}
	done := make(chan error)
	go func() { done <- ts.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close waited for a delivery due in 10 minutes")
	}
	if _, delivered, failed, _ := ts.Stats(); delivered != 0 || failed != 0 {
		t.Errorf("an abandoned delivery counted: %d delivered, %d failed", delivered, failed)
	}
}

func TestToolConfigParses(t *testing.T) {
	t.Parallel()
	var cfg struct {
		Tools []struct {
			Name, Effect string
			Deferred     bool
			HTTP         struct{ URL string }
		}
		Builtin []string
	}
	if err := yaml.Unmarshal(ToolConfig("http://127.0.0.1:9100/"), &cfg); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{ToolRead: "read /read", ToolWrite: "write /write", ToolDeferred: "write /deferred", ToolWriteKeyed: "write /write"}
	for _, tl := range cfg.Tools {
		if got := tl.Effect + " " + strings.TrimPrefix(tl.HTTP.URL, "http://127.0.0.1:9100"); got != want[tl.Name] || tl.Deferred != (tl.Name == ToolDeferred) {
			t.Errorf("tool %s: %s deferred %v", tl.Name, got, tl.Deferred)
		}
		delete(want, tl.Name)
	}
	if len(want) > 0 || strings.Join(cfg.Builtin, ",") != "echo,sleep" {
		t.Errorf("missing tools %v, builtins %v", want, cfg.Builtin)
	}
}

// TestToolConfigLoads: the bench's tool config passes turnd's own loader,
// bench_write_keyed with its resource.
func TestToolConfigLoads(t *testing.T) {
	t.Parallel()
	reg, err := tool.Parse(ToolConfig("http://127.0.0.1:9100/"), tool.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.CloseIdleConnections()
	s, ok := reg.Lookup(ToolWriteKeyed)
	if !ok {
		t.Fatalf("no %s", ToolWriteKeyed)
	}
	got, err := s.Resources([]byte(`{"resource":"res-3","latency_us":20000}`))
	if err != nil || len(got) != 1 || got[0] != "bench:res-3" {
		t.Fatalf("resources %q %v", got, err)
	}
}
