package main

// Operations with the real binary: logs that keep every secret out, a
// SIGTERM that turns readiness off before the server stops, a webhook in
// flight at shutdown delivered after the restart, and the separate metrics
// listener with its token.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/turnd/turnd/completion"
)

// hookReceiver is a callback URL: it reports each webhook's id, and holds
// the first attempt open (until turnd gives up on it) when hold is set.
type hookReceiver struct {
	srv  *httptest.Server
	ids  chan string
	hold atomic.Bool
}

func newHookReceiver(t *testing.T, hold bool) *hookReceiver {
	t.Helper()
	h := &hookReceiver{ids: make(chan string, 16)}
	h.hold.Store(hold)
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		h.ids <- r.Header.Get(completion.HeaderID)
		if h.hold.Load() {
			<-r.Context().Done() // turnd cancels it at the end of its grace
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hookReceiver) next(t *testing.T) string {
	t.Helper()
	select {
	case id := <-h.ids:
		return id
	case <-time.After(settleTimeout):
		t.Fatal("no webhook arrived")
		return ""
	}
}

// TestLogsKeepSecrets runs a workload that uses every secret turnd holds,
// at debug level, and checks that none of them reaches the log: API tokens
// (right and wrong), the completion, signing and webhook secrets, the
// metrics token, a tool's headers, completion keys and signatures.
func TestLogsKeepSecrets(t *testing.T) {
	t.Parallel()
	const (
		apiToken       = "api-token-b6a1f0d2c9e8"
		wrongToken     = "wrong-token-77c0a5e1f3"
		completionSec  = "completion-secret-4c1e9b7a2d0f6e3a8b5c"
		signingSecret  = "signing-secret-0e9d8c7b6a5f4e3d2c1b0a9f"
		webhookSecret  = "webhook-secret-1a2b3c4d5e6f7a8b9c0d1e2f"
		metricsToken   = "metrics-token-5d4c3b2a1f0e"
		toolAuthHeader = "tool-header-secret-9f8e7d6c5b4a"
		toolKeyHeader  = "tool-apikey-secret-3a4b5c6d7e8f"
	)
	keys := make(chan string, 4)
	gotHeaders := make(chan string, 4)
	toolSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Completion struct{ Key string } `json:"completion"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		gotHeaders <- r.Header.Get("Authorization") + " " + r.Header.Get("X-Api-Key")
		keys <- req.Completion.Key
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, `{"pending": {}}`)
	}))
	t.Cleanup(toolSrv.Close)
	hooks := newHookReceiver(t, false)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "tools.yaml")
	yaml := fmt.Sprintf(`builtin: [echo]
tools:
  - name: defer
    effect: read
    deferred: true
    http:
      url: %s/defer?token=${TOOL_QUERY_SECRET}
      timeout: 30s
      headers: {Authorization: "Bearer ${TOOL_AUTH}", X-Api-Key: %s}
  - name: down
    effect: read
    http:
      url: http://127.0.0.1:1/nothing?token=${TOOL_QUERY_SECRET}
      timeout: 2s
      headers: {Authorization: "Bearer ${TOOL_AUTH}"}
    retry: {max_attempts: 1}
`, toolSrv.URL, toolKeyHeader)
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	const toolQuerySecret = "tool-query-secret-6e5d4c3b2a19"
	p := startTurnd(t, procOptions{
		args: []string{"--config", cfg, "--data", filepath.Join(dir, "turnd.db"), "--log-level", "debug"},
		env: []string{
			"TURND_API_TOKENS=" + apiToken, "TURND_COMPLETION_KEY_SECRET=" + completionSec,
			"TURND_COMPLETION_SIGNING_SECRET=" + signingSecret, "TURND_WEBHOOK_SIGNING_SECRET=" + webhookSecret,
			"TURND_METRICS_TOKEN=" + metricsToken, "TOOL_AUTH=" + toolAuthHeader, "TOOL_QUERY_SECRET=" + toolQuerySecret,
		},
	})
	auth := []string{"Authorization", "Bearer " + apiToken}
	p.must(http.StatusCreated, http.MethodPost, "/v1/sessions", fmt.Sprintf(`{"id":"s","callback_url":%q}`, hooks.srv.URL+"/hook"), auth...)
	resp, data := p.do(http.MethodPost, "/v1/sessions/s/turns", `{"id":"t","calls":[{"id":"c","name":"defer","arguments":{}}]}`, auth...)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST turn: %d %s", resp.StatusCode, data)
	}
	var key string
	select {
	case key = <-keys:
	case <-time.After(settleTimeout):
		t.Fatal("the deferred tool was not called")
	}
	if h := <-gotHeaders; h != "Bearer "+toolAuthHeader+" "+toolKeyHeader {
		t.Fatalf("the tool got headers %q", h)
	}

	signer, err := completion.NewSigner(signingSecret)
	if err != nil {
		t.Fatal(err)
	}
	body := `{"output":{"answer":42}}`
	signed := func(id string) []string {
		h := []string{}
		for k, v := range signer.Headers(id, time.Now(), []byte(body)) {
			h = append(h, k, v)
		}
		return h
	}
	good := signed("msg_good")
	forged := []string{completion.HeaderID, "msg_forged", completion.HeaderTimestamp, fmt.Sprint(time.Now().Unix()),
		completion.HeaderSignature, "v1,Zm9yZ2VkLXNpZ25hdHVyZS1mb3JnZWQtc2lnbmF0dXJlIQ=="}
	p.must(http.StatusUnauthorized, http.MethodPost, "/v1/complete/"+key, body)
	p.must(http.StatusUnauthorized, http.MethodPost, "/v1/complete/"+key, body, forged...)
	p.must(http.StatusNotFound, http.MethodPost, "/v1/complete/"+key[:len(key)-3]+"xyz", body, signed("msg_other")...)
	p.must(http.StatusOK, http.MethodPost, "/v1/complete/"+key, body, good...)
	p.must(http.StatusOK, http.MethodPost, "/v1/complete/"+key, body, signed("msg_again")...)
	p.must(http.StatusUnauthorized, http.MethodGet, "/v1/tools", nil, "Authorization", "Bearer "+wrongToken)
	p.must(http.StatusOK, http.MethodGet, "/v1/sessions/s/turns/t", nil, auth...)
	// A tool that cannot be reached: its error must not repeat its URL.
	down := decode[turnJSON](t, p.must(http.StatusOK, http.MethodPost, "/v1/sessions/s/turns",
		`{"id":"t2","calls":[{"id":"d","name":"down","arguments":{}}]}`, auth...))
	if r := down.result(t, "d"); r.Status != "error" || r.Error == nil || strings.Contains(r.Error.Message, toolQuerySecret) {
		t.Errorf("the unreachable tool's result: %+v", r)
	}
	p.must(http.StatusUnauthorized, http.MethodGet, "/metrics", nil)
	p.must(http.StatusUnauthorized, http.MethodGet, "/metrics", nil, auth...)
	scrape := p.must(http.StatusOK, http.MethodGet, "/metrics", nil, "Authorization", "Bearer "+metricsToken)
	hooks.next(t) // the settled turn's webhook, signed with the webhook secret
	p.signal(syscall.SIGTERM)
	if code := p.waitExit(); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}

	logs := p.stderr.String()
	secrets := map[string]string{
		"API token": apiToken, "wrong API token": wrongToken, "completion secret": completionSec,
		"completion signing secret": signingSecret, "webhook secret": webhookSecret, "metrics token": metricsToken,
		"tool Authorization header": toolAuthHeader, "tool X-Api-Key header": toolKeyHeader,
		"tool URL query secret": toolQuerySecret, "completion key": key,
		"delivery signature": good[slicesIndex(good, completion.HeaderSignature)+1],
	}
	for what, s := range secrets {
		if strings.Contains(logs, s) {
			t.Errorf("the log contains the %s", what)
		}
		if strings.Contains(string(scrape), s) {
			t.Errorf("the metrics contain the %s", what)
		}
	}
	// Every request was logged once, by route pattern, with its id.
	requests := 0
	for _, rec := range p.logLines() {
		if rec["msg"] != "request" {
			continue
		}
		if rec["route"] == "/readyz" {
			continue // the harness's readiness polls
		}
		requests++
		if id, _ := rec["request_id"].(string); id == "" {
			t.Errorf("request record without request_id: %v", rec)
		}
		if r, _ := rec["route"].(string); !strings.HasPrefix(r, "/") || strings.Contains(r, key[:8]) {
			t.Errorf("request record with route %q", r)
		}
	}
	if requests != 13 {
		t.Errorf("%d request records, want 13 (one per request):\n%s", requests, logs)
	}
}

func slicesIndex(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// waitStatus polls path until it answers want (bounded).
func (p *proc) waitStatus(path string, want int) {
	p.t.Helper()
	poll(p.t, readyTimeout, func() error {
		if err := p.answers(path, want); err != nil {
			return fmt.Errorf("%s %s did not answer %d within %v (last: %v)", p.name, path, want, readyTimeout, err)
		}
		return nil
	})
}

// TestShutdownDrainsReadinessFirst: after SIGTERM /readyz answers 503
// while turns are still taken and answered; then the server stops, the
// running turn having finished within the grace.
func TestShutdownDrainsReadinessFirst(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	args := []string{"--config", exampleConfig, "--data", filepath.Join(dir, "turnd.db"), "--shutdown-delay", "5s", "--shutdown-grace", "20s"}
	p := startTurnd(t, procOptions{name: "first", args: args})
	p.must(http.StatusAccepted, http.MethodPost, "/v1/sessions/s/turns",
		`{"id":"long","calls":[{"id":"z","name":"sleep","arguments":{"ms":1500}}]}`, "Prefer", "respond-async")
	p.signal(syscall.SIGTERM)
	p.waitStatus("/readyz", http.StatusServiceUnavailable)
	// Still serving while the load balancer takes the replica out.
	p.must(http.StatusOK, http.MethodGet, "/healthz", nil)
	tj := decode[turnJSON](p.t, p.must(http.StatusOK, http.MethodPost, "/v1/sessions/s/turns",
		`{"id":"during-drain","calls":[{"id":"e","name":"echo","arguments":{"x":1}}]}`))
	if tj.Status != "completed" {
		t.Errorf("a turn posted while draining is %s", tj.Status)
	}
	if code := p.waitExit(); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	logs := p.stderr.String()
	if i, j := strings.Index(logs, `"shutting down"`), strings.Index(logs, `"stopped"`); i < 0 || j < i {
		t.Errorf("no orderly shutdown in the log:\n%s", logs)
	}

	q := startTurnd(t, procOptions{name: "restarted", args: args})
	got, data := q.getTurn("s", "long")
	if got.Status != "completed" {
		t.Errorf("the turn running at SIGTERM is %s after the restart: %s", got.Status, data)
	}
}

// TestShutdownKeepsWebhookInFlight: a webhook attempt still in flight
// when the grace ends is cancelled and recorded for a retry, and the next
// process delivers it (the same webhook id).
func TestShutdownKeepsWebhookInFlight(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	args := []string{"--config", exampleConfig, "--data", filepath.Join(dir, "turnd.db"), "--shutdown-grace", "500ms"}
	holding := newHookReceiver(t, true)
	p := startTurnd(t, procOptions{name: "first", args: args})
	p.must(http.StatusCreated, http.MethodPost, "/v1/sessions", fmt.Sprintf(`{"id":"s","callback_url":%q}`, holding.srv.URL))
	p.must(http.StatusOK, http.MethodPost, "/v1/sessions/s/turns", `{"id":"t","calls":[{"id":"n","name":"now","arguments":{}}]}`)
	first := holding.next(t)
	p.signal(syscall.SIGTERM)
	if code := p.waitExit(); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	if logs := p.stderr.String(); strings.Contains(logs, "recording a webhook attempt failed") {
		t.Fatalf("the interrupted attempt was not recorded:\n%s", logs)
	}
	holding.hold.Store(false)

	q := startTurnd(t, procOptions{name: "restarted", args: args})
	if again := holding.next(t); again != first {
		t.Errorf("the restarted process delivered webhook %q, want the interrupted %q", again, first)
	}
	_ = q
}

// TestMetricsListener: with --metrics-addr, /metrics moves to its own
// listener, guarded by the metrics token read from a file.
func TestMetricsListener(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "metrics-token")
	if err := os.WriteFile(tokenFile, []byte("scrape-me\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	maddr := freeAddr(t)
	p := startTurnd(t, procOptions{
		args: []string{"--config", exampleConfig, "--data", filepath.Join(dir, "turnd.db"), "--metrics-addr", maddr},
		env:  []string{"TURND_METRICS_TOKEN_FILE=" + tokenFile},
	})
	p.must(http.StatusOK, http.MethodPost, "/v1/sessions/s/turns", `{"id":"t","calls":[{"id":"e","name":"echo","arguments":{}}]}`)
	p.must(http.StatusNotFound, http.MethodGet, "/metrics", nil, "Authorization", "Bearer scrape-me")

	get := func(path, token string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, "http://"+maddr+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := httpClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return resp.StatusCode, b.String()
	}
	if code, _ := get("/metrics", ""); code != http.StatusUnauthorized {
		t.Errorf("metrics listener without a token: %d, want 401", code)
	}
	if code, _ := get("/metrics", "wrong"); code != http.StatusUnauthorized {
		t.Errorf("metrics listener with a wrong token: %d, want 401", code)
	}
	if code, _ := get("/v1/tools", "scrape-me"); code != http.StatusNotFound {
		t.Errorf("metrics listener serves /v1/tools: %d, want 404", code)
	}
	code, body := get("/metrics", "scrape-me")
	if code != http.StatusOK {
		t.Fatalf("metrics listener with the token: %d", code)
	}
	for _, want := range []string{
		`turnd_calls_total{outcome="ok",tool="echo"} 1`, "turnd_pending_calls 0",
		"go_goroutines", "process_resident_memory_bytes",
		`turnd_http_requests_total{code="200",method="POST",route="/v1/sessions/{session_id}/turns"} 1`,
		`turnd_build_info{goversion="` + runtime.Version() + `",revision="`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the scrape lacks %s", want)
		}
	}
	// serve sets the collector's target, unless GOGC chose one.
	if os.Getenv("GOGC") == "" && !strings.Contains(body, fmt.Sprintf("go_gc_gogc_percent %d\n", serveGCPercent)) {
		t.Errorf("the scrape lacks go_gc_gogc_percent %d", serveGCPercent)
	}
}

// TestMetricsAddressTaken: a metrics address that cannot be listened on
// stops the start with an error naming it.
func TestMetricsAddressTaken(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dir := t.TempDir()
	code, _, stderr := runTurnd(t, childEnv(), "serve", "--addr", freeAddr(t), "--data", filepath.Join(dir, "turnd.db"),
		"--metrics-addr", ln.Addr().String())
	if code != 1 || !strings.Contains(stderr, "listening on the metrics address "+ln.Addr().String()) {
		t.Errorf("exit code %d, stderr:\n%s", code, stderr)
	}
}
