package metrics_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.uber.org/goleak"

	"github.com/turnd/turnd/api"
	"github.com/turnd/turnd/internal/pgtest"
	"github.com/turnd/turnd/internal/teststores"
	"github.com/turnd/turnd/metrics"
	"github.com/turnd/turnd/store/postgres"
	"github.com/turnd/turnd/tool"
	"github.com/turnd/turnd/turn"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// event is what the test waits for from the service's background loops.
type event string

// signalling passes every event on to the metrics and reports the ones the
// service produces on its background goroutines (the sweeper, the webhook
// loop), so that the test waits for them on a channel instead of polling.
type signalling struct {
	*metrics.Metrics
	events chan event
}

func (s signalling) Completion(r turn.CompletionResult) {
	s.Metrics.Completion(r)
	s.events <- event("completion " + r)
}

func (s signalling) WebhookAttempt(o turn.WebhookOutcome) {
	s.Metrics.WebhookAttempt(o)
	s.events <- event("webhook " + o)
}

func (s signalling) TurnSettled(st turn.Status, took time.Duration) {
	s.Metrics.TurnSettled(st, took)
	s.events <- event("settled " + st)
}

// rig is a whole turnd on loopback over an embedded store, with metrics.
type rig struct {
	t      *testing.T
	url    string
	svc    *turn.Service
	keys   chan string
	events chan event
}

// openPostgres opens a store on url, a schema pgtest.URL made and migrated.
func openPostgres(t *testing.T, url string) turn.Store {
	t.Helper()
	st, err := postgres.Open(context.Background(), url, postgres.Options{MaxConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st
}

func newRig(t *testing.T, st turn.Store) *rig {
	t.Helper()
	keys := make(chan string, 16)
	tools := http.NewServeMux()
	tools.HandleFunc("POST /deferred", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Completion struct{ Key string } `json:"completion"`
			Arguments  json.RawMessage      `json:"arguments"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		keys <- req.Completion.Key
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprintf(w, `{"pending": %s}`, req.Arguments)
	})
	tools.HandleFunc("POST /hook", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	toolSrv := httptest.NewServer(tools)
	t.Cleanup(toolSrv.Close)
	reg, err := tool.Parse([]byte(fmt.Sprintf(`builtin: [echo]
tools:
  - name: deferred
    effect: write
    deferred: true
    http: {url: "%s/deferred", timeout: 5s}
`, toolSrv.URL)), tool.Options{})
	if err != nil {
		t.Fatal(err)
	}

	promReg := prometheus.NewRegistry()
	m, err := metrics.New(promReg, metrics.Options{PendingCount: st.PendingCount, PendingTTL: -1})
	if err != nil {
		t.Fatal(err)
	}
	events := make(chan event, 64)
	svc, err := turn.New(turn.Config{
		Store:         m.Store(st),
		Observer:      signalling{m, events},
		Tools:         func() *tool.Registry { return reg },
		SweepInterval: 5 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.New(api.Config{Service: svc, Metrics: metrics.Handler(promReg), ObserveRequest: m.ObserveRequest}))
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = svc.Shutdown(ctx)
	})
	return &rig{t: t, url: srv.URL, svc: svc, keys: keys, events: events}
}

// do sends a JSON request and returns the status and body.
func (r *rig) do(method, path, body string) (int, []byte) {
	r.t.Helper()
	req, err := http.NewRequest(method, r.url+path, strings.NewReader(body))
	if err != nil {
		r.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		r.t.Fatal(err)
	}
	return resp.StatusCode, data
}

func (r *rig) must(want int, method, path, body string) []byte {
	r.t.Helper()
	code, data := r.do(method, path, body)
	if code != want {
		r.t.Fatalf("%s %s: %d, want %d: %s", method, path, code, want, data)
	}
	return data
}

// wait waits (bounded) for the events, in any order; others are dropped.
func (r *rig) wait(want ...event) {
	r.t.Helper()
	timeout := time.After(30 * time.Second)
	for len(want) > 0 {
		select {
		case e := <-r.events:
			if i := slices.Index(want, e); i >= 0 {
				want = slices.Delete(want, i, i+1)
			}
		case <-timeout:
			r.t.Fatalf("still waiting for %v", want)
		}
	}
}

func (r *rig) key() string {
	r.t.Helper()
	select {
	case k := <-r.keys:
		return k
	case <-time.After(30 * time.Second):
		r.t.Fatal("the deferred tool was not called")
		return ""
	}
}

// scrape reads /metrics: the raw text and its families.
func (r *rig) scrape() (string, map[string]*dto.MetricFamily) {
	r.t.Helper()
	data := r.must(http.StatusOK, http.MethodGet, "/metrics", "")
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(data))
	if err != nil {
		r.t.Fatalf("parsing the scrape: %v\n%s", err, data)
	}
	return string(data), mfs
}

// sample finds the metric of family name with exactly labels (name=value
// pairs); nil when there is none.
func sample(mfs map[string]*dto.MetricFamily, name string, labels ...string) *dto.Metric {
	mf := mfs[name]
	if mf == nil {
		return nil
	}
	for _, m := range mf.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		if len(got) != len(labels)/2 {
			continue
		}
		match := true
		for i := 0; i+1 < len(labels); i += 2 {
			if got[labels[i]] != labels[i+1] {
				match = false
			}
		}
		if match {
			return m
		}
	}
	return nil
}

// value is a counter's or gauge's value, or a histogram's count; -1 when
// the series is missing.
func value(mfs map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	m := sample(mfs, name, labels...)
	switch {
	case m == nil:
		return -1
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return -1
}

// TestScrapeAfterWorkload drives turns, deferred calls and deliveries of
// every kind through the HTTP API and checks what /metrics then says.
func TestScrapeAfterWorkload(t *testing.T) {
	t.Parallel()
	teststores.Each(t, func(t *testing.T, open func(testing.TB) turn.Store) {
		scrapeAfterWorkload(t, newRig(t, open(t)))
	})
}

// TestPendingAcrossReplicas: turnd_pending_calls counts the calls parked
// by any replica on the shared database, and a replica that parked nothing
// (a fresh process) reports them too.
func TestPendingAcrossReplicas(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	a, b := newRig(t, openPostgres(t, url)), newRig(t, openPostgres(t, url))
	pending := func(r *rig) float64 {
		t.Helper()
		_, mfs := r.scrape()
		return value(mfs, metrics.PendingCalls)
	}
	if pa, pb := pending(a), pending(b); pa != 0 || pb != 0 {
		t.Fatalf("pending %v and %v before any turn, want 0", pa, pb)
	}
	a.must(http.StatusAccepted, http.MethodPost, "/v1/sessions/s/turns", `{"id":"t","mode":"concurrent","calls":[
		{"id":"p","name":"deferred","arguments":{}},{"id":"q","name":"deferred","arguments":{}},{"id":"r","name":"deferred","arguments":{}}]}`)
	k1 := a.key()
	a.key()
	a.key()
	if pa, pb := pending(a), pending(b); pa != 3 || pb != 3 {
		t.Errorf("pending %v on the replica that parked, %v on the other; want 3 on both", pa, pb)
	}
	b.must(http.StatusOK, http.MethodPost, "/v1/complete/"+k1, `{"output":"done"}`)
	if pa, pb := pending(a), pending(b); pa != 2 || pb != 2 {
		t.Errorf("pending %v and %v after a delivery to the other replica; want 2 on both", pa, pb)
	}
}

func scrapeAfterWorkload(t *testing.T, r *rig) {
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(hook.Close)

	// Turn t1: four echo calls (one with an output over the 16 KiB budget)
	// and one call of a tool that does not exist; its session has a
	// callback URL, so its settlement is delivered as a webhook.
	r.must(http.StatusCreated, http.MethodPost, "/v1/sessions", fmt.Sprintf(`{"id":"s1","callback_url":%q}`, hook.URL))
	big := strings.Repeat("x", 40000)
	r.must(http.StatusOK, http.MethodPost, "/v1/sessions/s1/turns", fmt.Sprintf(`{"id":"t1","calls":[
		{"id":"a","name":"echo","arguments":{"v":1}},
		{"id":"b","name":"echo","arguments":{"v":2}},
		{"id":"c","name":"no-such-tool-1f2e","arguments":{}},
		{"id":"d","name":"echo","arguments":{"v":3}},
		{"id":"e","name":"echo","arguments":{"big":%q}}]}`, big))
	r.wait("webhook delivered")

	// Turn t2 parks two calls.
	r.must(http.StatusAccepted, http.MethodPost, "/v1/sessions/s2/turns", `{"id":"t2","mode":"concurrent","calls":[
		{"id":"p","name":"deferred","arguments":{}},{"id":"q","name":"deferred","arguments":{}}]}`)
	k1, k2 := r.key(), r.key()
	_, mfs := r.scrape()
	if v := value(mfs, metrics.PendingCalls); v != 2 {
		t.Errorf("%s = %v with two calls parked, want 2", metrics.PendingCalls, v)
	}

	// Deliveries: accepted, the same again, another payload, an unknown key.
	r.must(http.StatusOK, http.MethodPost, "/v1/complete/"+k1, `{"output":"one"}`)
	r.must(http.StatusOK, http.MethodPost, "/v1/complete/"+k1, `{"output":"one"}`)
	r.must(http.StatusConflict, http.MethodPost, "/v1/complete/"+k1, `{"output":"other"}`)
	r.must(http.StatusNotFound, http.MethodPost, "/v1/complete/"+k1[:len(k1)-4]+"AAAA", `{"output":"x"}`)
	_, mfs = r.scrape()
	if v := value(mfs, metrics.PendingCalls); v != 1 {
		t.Errorf("%s = %v after one of two completed, want 1", metrics.PendingCalls, v)
	}

	// Turn t3's call times out; a delivery after that is late.
	// No heartbeat comes within 10ms of the park.
	// The answer is 202 (waiting), or 200 when the sweeper was faster.
	if code, data := r.do(http.MethodPost, "/v1/sessions/s2/turns", `{"id":"t3","calls":[{"id":"r","name":"deferred","arguments":{"heartbeat_timeout":"10ms"}}]}`); code != http.StatusAccepted && code != http.StatusOK {
		t.Fatalf("POST t3: %d %s", code, data)
	}
	k3 := r.key()
	r.wait("completion timed_out", "settled completed")
	r.must(http.StatusGone, http.MethodPost, "/v1/complete/"+k3, `{"output":"too late"}`)

	// Turn t4 is cancelled while its call is parked.
	r.must(http.StatusAccepted, http.MethodPost, "/v1/sessions/s2/turns", `{"id":"t4","calls":[{"id":"u","name":"deferred","arguments":{}}]}`)
	k4 := r.key()
	r.must(http.StatusOK, http.MethodPost, "/v1/sessions/s2/turns/t4/cancel", "")

	// The last delivery completes t2.
	r.must(http.StatusOK, http.MethodPost, "/v1/complete/"+k2, `{"output":"two"}`)

	text, mfs := r.scrape()
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{metrics.CallsTotal, []string{"tool", "echo", "outcome", "ok"}, 4},
		{metrics.CallsTotal, []string{"tool", turn.UnknownTool, "outcome", "refused"}, 1},
		{metrics.CallsTotal, []string{"tool", "deferred", "outcome", "pending"}, 4},
		{metrics.DispatchDuration, []string{"tool", "echo", "outcome", "ok"}, 4},
		{metrics.DispatchDuration, []string{"tool", turn.UnknownTool, "outcome", "refused"}, 1},
		{metrics.DispatchDuration, []string{"tool", "deferred", "outcome", "pending"}, 4},
		{metrics.AttemptDuration, []string{"tool", "echo", "outcome", "ok"}, 4},
		{metrics.AttemptDuration, []string{"tool", "deferred", "outcome", "pending"}, 4},
		{metrics.CallsInFlight, []string{"tool", "echo"}, 0},
		{metrics.CallsInFlight, []string{"tool", "deferred"}, 0},
		{metrics.WaveSize, nil, 4},
		{metrics.TurnsTotal, []string{"status", "completed"}, 3},
		{metrics.TurnsTotal, []string{"status", "cancelled"}, 1},
		{metrics.TurnsTotal, []string{"status", "failed"}, 0},
		{metrics.TurnDuration, []string{"status", "completed"}, 3},
		{metrics.CompletionsTotal, []string{"result", "accepted"}, 2},
		{metrics.CompletionsTotal, []string{"result", "duplicate"}, 1},
		{metrics.CompletionsTotal, []string{"result", "conflict"}, 1},
		{metrics.CompletionsTotal, []string{"result", "unknown"}, 1},
		{metrics.CompletionsTotal, []string{"result", "late"}, 1},
		{metrics.CompletionsTotal, []string{"result", "timed_out"}, 1},
		{metrics.CompletionsTotal, []string{"result", "cancelled"}, 1},
		{metrics.PendingCalls, nil, 0},
		{metrics.TruncationsTotal, []string{"unit", "bytes"}, 1},
		{metrics.WebhooksTotal, []string{"result", "delivered"}, 1},
		{metrics.WebhooksTotal, []string{"result", "dead"}, 0},
		{metrics.HTTPRequestsTotal, []string{"method", "POST", "route", "/v1/complete/{key}", "code", "200"}, 3},
		{metrics.HTTPRequestsTotal, []string{"method", "POST", "route", "/v1/complete/{key}", "code", "409"}, 1},
		{metrics.HTTPRequestsTotal, []string{"method", "POST", "route", "/v1/complete/{key}", "code", "404"}, 1},
		{metrics.HTTPRequestsTotal, []string{"method", "POST", "route", "/v1/complete/{key}", "code", "410"}, 1},
		{metrics.HTTPRequestDuration, []string{"method", "POST", "route", "/v1/sessions/{session_id}/turns/{turn_id}/cancel", "code", "200"}, 1},
	} {
		if got := value(mfs, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	// Each of the four turns is written first either whole (a turn of reads
	// only, run before it is recorded) or as received.
	if rec, recv := value(mfs, metrics.StoreDuration, "op", "record_turn"), value(mfs, metrics.StoreDuration, "op", "receive_turn"); rec+recv != 4 || recv < 1 {
		t.Errorf("turns written: %v whole and %v as received, want 4 in all with at least one received", rec, recv)
	}
	// Four turns posted: t1 answered 200, t2 and t4 202, t3 either.
	ok := value(mfs, metrics.HTTPRequestsTotal, "method", "POST", "route", "/v1/sessions/{session_id}/turns", "code", "200")
	accepted := value(mfs, metrics.HTTPRequestsTotal, "method", "POST", "route", "/v1/sessions/{session_id}/turns", "code", "202")
	if ok < 1 || accepted < 2 || ok+accepted != 4 {
		t.Errorf("POST turns counted %v times 200 and %v times 202, want 4 in all", ok, accepted)
	}
	// The dispatch histogram's sum is a time; every call took less than
	// the test did.
	if m := sample(mfs, metrics.DispatchDuration, "tool", "echo", "outcome", "ok"); m != nil {
		if s := m.Histogram.GetSampleSum(); s <= 0 || s > 60 {
			t.Errorf("%s sum %v s for four echo calls", metrics.DispatchDuration, s)
		}
	}
	if m := sample(mfs, metrics.WaveSize); m != nil && m.Histogram.GetSampleSum() != 5+2+1+1 {
		t.Errorf("%s sum %v, want 9 calls in four waves", metrics.WaveSize, m.Histogram.GetSampleSum())
	}
	if v := value(mfs, metrics.DroppedBytesTotal); v < 40000-16384 || v > 40100 {
		t.Errorf("%s = %v for one 40 kB output cut to 16 KiB", metrics.DroppedBytesTotal, v)
	}
	// No key, raw path or model-written tool name is a label.
	for _, secret := range []string{k1, k2, k3, k4, "no-such-tool-1f2e", "/v1/sessions/s1"} {
		if strings.Contains(text, secret) {
			t.Errorf("the scrape contains %q", secret)
		}
	}
	// Every family the scrape has is one Names lists.
	names := metrics.Names()
	for name := range mfs {
		if !slices.Contains(names, name) {
			t.Errorf("the scrape has %s, which Names does not list", name)
		}
	}

	t.Run("promtool", func(t *testing.T) {
		path, err := exec.LookPath("promtool")
		if err != nil {
			t.Skip("promtool is not on PATH (Debian: apt-get install prometheus); the exposition is not checked by it")
		}
		cmd := exec.Command(path, "check", "metrics")
		cmd.Stdin = strings.NewReader(text)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool check metrics: %v\n%s", err, out)
		}
	})
}
