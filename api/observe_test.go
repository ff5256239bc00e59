package api_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/turnd/turnd/api"
	"github.com/turnd/turnd/internal/syncbuf"
	"github.com/turnd/turnd/metrics"
)

// readyStore knows no completion key and is always reachable.
type readyStore struct{ unknownKeysStore }

func (readyStore) Ping(context.Context) error { return nil }

// logBuffer collects JSON log records from any goroutine.
type logBuffer struct{ syncbuf.Buffer }

func (l *logBuffer) records(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

func debugLogger(w io.Writer) *slog.Logger {
	return slog.New(api.LogHandler(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug})))
}

// send does one request through the contract checker.
func send(t *testing.T, client *http.Client, method, path string, header ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, "http://turnd.test"+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

var generatedID = regexp.MustCompile(`^[A-Z2-7]{26}$`)

func TestRequestID(t *testing.T) {
	t.Parallel()
	h := newHandlerOver(t, readyStore{}, api.Config{})
	client := &http.Client{Transport: newContractChecker(t).Transport(inProcess(h))}
	for _, tt := range []struct {
		name, in string
		kept     bool
	}{
		{"uuid", "0b7c3f4e-9a55-4d0e-8d65-1f3b0c2a9e77", true},
		{"trace id", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", true},
		{"all allowed characters", "aZ09._~:@+=/-", true},
		{"128 characters", strings.Repeat("r", 128), true},
		{"absent", "", false},
		{"129 characters", strings.Repeat("r", 129), false},
		{"space", "req 1", false},
		{"quote", `req"1`, false},
		{"newline escape", "req%0A1", false},
		{"non-ASCII", "réq", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var header []string
			if tt.in != "" {
				header = []string{api.HeaderRequestID, tt.in}
			}
			got := send(t, client, http.MethodGet, "/healthz", header...).Header.Get(api.HeaderRequestID)
			switch {
			case tt.kept && got != tt.in:
				t.Errorf("X-Request-Id %q answered %q, want it kept", tt.in, got)
			case !tt.kept && !generatedID.MatchString(got):
				t.Errorf("X-Request-Id %q answered %q, want a generated id", tt.in, got)
			}
		})
	}
	a := send(t, client, http.MethodGet, "/healthz").Header.Get(api.HeaderRequestID)
	b := send(t, client, http.MethodGet, "/healthz").Header.Get(api.HeaderRequestID)
	if a == b {
		t.Errorf("two requests got the same generated id %q", a)
	}
}

// TestRequestLog: each request logs one "request" record with its method,
// route pattern, status, duration and id, and the id is on every record
// the request causes; no token, key or raw path is logged.
func TestRequestLog(t *testing.T) {
	t.Parallel()
	const (
		apiToken   = "api-token-3e1d7c"
		wrongToken = "wrong-token-9a8b7c"
		key        = "tdk1_SECRETKEY4f2a9b"
	)
	var logs logBuffer
	h := newHandlerOver(t, readyStore{}, api.Config{Tokens: []string{apiToken}, Logger: debugLogger(&logs)})
	client := &http.Client{Transport: newContractChecker(t).Transport(inProcess(h))}

	send(t, client, http.MethodPost, "/v1/complete/"+key, api.HeaderRequestID, "rid-complete", "Content-Type", "application/json")
	send(t, client, http.MethodGet, "/v1/tools", api.HeaderRequestID, "rid-wrong", "Authorization", "Bearer "+wrongToken)
	send(t, client, http.MethodGet, "/v1/tools", api.HeaderRequestID, "rid-tools", "Authorization", "Bearer "+apiToken)
	send(t, client, http.MethodGet, "/no/such/"+key, api.HeaderRequestID, "rid-none", "Authorization", "Bearer "+apiToken)

	want := map[string]struct {
		method, route string
		status        float64
	}{
		"rid-complete": {"POST", "/v1/complete/{key}", 400},
		"rid-wrong":    {"GET", "/v1/tools", 401},
		"rid-tools":    {"GET", "/v1/tools", 200},
		"rid-none":     {"GET", "unmatched", 404},
	}
	seen := map[string]int{}
	for _, rec := range logs.records(t) {
		id, _ := rec["request_id"].(string)
		if _, ok := want[id]; !ok {
			t.Errorf("a record without a known request id: %v", rec)
			continue
		}
		if rec["msg"] != "request" {
			continue
		}
		seen[id]++
		w := want[id]
		if rec["method"] != w.method || rec["route"] != w.route || rec["status"] != w.status {
			t.Errorf("request %s logged %v, want %s %s %v", id, rec, w.method, w.route, w.status)
		}
		// Seconds, not Go's integer nanoseconds: a 1 ms request logs 0.001.
		if d, ok := rec["duration_s"].(float64); !ok || d < 0 || d > 60 {
			t.Errorf("request %s: duration_s %v", id, rec["duration_s"])
		}
		if _, ok := rec["duration"]; ok {
			t.Errorf("request %s: logged a duration in nanoseconds too", id)
		}
	}
	for id := range want {
		if seen[id] != 1 {
			t.Errorf("request %s logged %d times, want once", id, seen[id])
		}
	}
	for _, secret := range []string{apiToken, wrongToken, key, "SECRETKEY"} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the log contains %q:\n%s", secret, logs.String())
		}
	}
}

// TestLogHandlerOutsideRequests: records logged without a request's
// context carry no request_id; WithAttrs and WithGroup keep the wrapping.
func TestLogHandlerOutsideRequests(t *testing.T) {
	t.Parallel()
	var logs logBuffer
	log := debugLogger(&logs).With("component", "x").WithGroup("g")
	log.Info("plain", "k", 1)
	log.InfoContext(context.Background(), "no request")
	recs := logs.records(t)
	if len(recs) != 2 {
		t.Fatalf("%d records, want 2", len(recs))
	}
	for _, r := range recs {
		if _, ok := r["request_id"]; ok {
			t.Errorf("record outside a request has a request_id: %v", r)
		}
		if r["component"] != "x" {
			t.Errorf("record lost its attributes: %v", r)
		}
	}
}

func TestMetricsEndpoint(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, metrics.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const apiToken, metricsToken = "api-token", "metrics-token"
	for _, tt := range []struct {
		name   string
		cfg    api.Config
		header []string
		want   int
	}{
		{"not served", api.Config{}, nil, http.StatusNotFound},
		{"open", api.Config{Metrics: metrics.Handler(reg)}, nil, http.StatusOK},
		{"open, API tokens do not apply", api.Config{Tokens: []string{apiToken}, Metrics: metrics.Handler(reg)}, nil, http.StatusOK},
		{"token: none sent", api.Config{Metrics: metrics.Handler(reg), MetricsToken: metricsToken}, nil, http.StatusUnauthorized},
		{"token: the API token", api.Config{Tokens: []string{apiToken}, Metrics: metrics.Handler(reg), MetricsToken: metricsToken},
			[]string{"Authorization", "Bearer " + apiToken}, http.StatusUnauthorized},
		{"token: not bearer", api.Config{Metrics: metrics.Handler(reg), MetricsToken: metricsToken},
			[]string{"Authorization", "Basic " + metricsToken}, http.StatusUnauthorized},
		{"token: right", api.Config{Metrics: metrics.Handler(reg), MetricsToken: metricsToken},
			[]string{"Authorization", "Bearer " + metricsToken}, http.StatusOK},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.cfg.ObserveRequest = m.ObserveRequest
			h := newHandlerOver(t, readyStore{}, tt.cfg)
			client := &http.Client{Transport: newContractChecker(t).Transport(inProcess(h))}
			resp := send(t, client, http.MethodGet, "/metrics", tt.header...)
			if resp.StatusCode != tt.want {
				t.Errorf("GET /metrics: %d, want %d", resp.StatusCode, tt.want)
			}
			if tt.want == http.StatusOK && !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
				t.Errorf("Content-Type %q", resp.Header.Get("Content-Type"))
			}
		})
	}
}

func TestReadyzWhileDraining(t *testing.T) {
	t.Parallel()
	var draining atomic.Bool
	h := newHandlerOver(t, readyStore{}, api.Config{Draining: draining.Load})
	client := &http.Client{Transport: newContractChecker(t).Transport(inProcess(h))}
	if code := send(t, client, http.MethodGet, "/readyz").StatusCode; code != http.StatusOK {
		t.Fatalf("/readyz %d before draining, want 200", code)
	}
	draining.Store(true)
	resp := send(t, client, http.MethodGet, "/readyz")
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("/readyz while draining: %d, Retry-After %q; want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if code := send(t, client, http.MethodGet, "/healthz").StatusCode; code != http.StatusOK {
		t.Errorf("/healthz while draining: %d, want 200", code)
	}
	if code := send(t, client, http.MethodGet, "/v1/tools", "Authorization", "Bearer any").StatusCode; code != http.StatusOK {
		t.Errorf("/v1/tools while draining: %d, want 200 (requests are served until the server stops)", code)
	}
}
