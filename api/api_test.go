package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/turnd/turnd/api"
	"github.com/turnd/turnd/completion"
	"github.com/turnd/turnd/internal/teststores"
	"github.com/turnd/turnd/tool"
	"github.com/turnd/turnd/turn"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// stack is a whole turnd on loopback: a real HTTP server over the service
// over a real store, with the builtin tools and HTTP tools served by a
// tool server of the test's own.
type stack struct {
	t      testing.TB
	url    string
	client *http.Client
	store  turn.Store
	svc    *turn.Service
	tools  *toolServer
	token  string
}

type stackOptions struct {
	tokens        []string
	signingSecret string // requires signed deliveries when set
	yaml          string // extra tool entries, with {{TOOLS}} replaced by the tool server's URL
	config        func(*api.Config)
	readTimeout   time.Duration // the server's ReadTimeout, when set
	observer      turn.Observer // the service's, when set
}

// toolServer is an HTTP tool endpoint: /search answers a JSON output,
// /big streams a large text body, /flaky always answers 503.
type toolServer struct {
	srv      *httptest.Server
	searches atomic.Int64
	flaky    atomic.Int64
	// keys receives the completion (key, url) of each /deferred call.
	keys chan [2]string
}

func newToolServer(t testing.TB) *toolServer {
	ts := &toolServer{keys: make(chan [2]string, 16)}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /deferred", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Completion struct{ Key, URL string } `json:"completion"`
			Arguments  json.RawMessage           `json:"arguments"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		ts.keys <- [2]string{req.Completion.Key, req.Completion.URL}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprintf(w, `{"pending": %s}`, req.Arguments)
	})
	mux.HandleFunc("POST /search", func(w http.ResponseWriter, r *http.Request) {
		ts.searches.Add(1)
		var req struct {
			Arguments struct {
				Q string `json:"q"`
			} `json:"arguments"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"output": {"hits": [%q], "key": %q}}`, req.Arguments.Q, r.Header.Get("Idempotency-Key"))
	})
	mux.HandleFunc("POST /big", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		line := strings.Repeat("x", 99) + "\n"
		for range 20000 { // 2 MB
			_, _ = io.WriteString(w, line)
		}
	})
	mux.HandleFunc("POST /flaky", func(w http.ResponseWriter, _ *http.Request) {
		ts.flaky.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	ts.srv = httptest.NewServer(mux)
	t.Cleanup(ts.srv.Close)
	return ts
}

func newStack(t *testing.T, open func(testing.TB) turn.Store, o stackOptions) *stack {
	t.Helper()
	return stackOn(t, open(t), o)
}

// eachStack runs test on a stack of default options over each store.
func eachStack(t *testing.T, test func(t *testing.T, s *stack)) {
	t.Helper()
	teststores.Each(t, func(t *testing.T, open func(testing.TB) turn.Store) {
		test(t, newStack(t, open, stackOptions{}))
	})
}

// eachBenchStack runs bench on a stack of default options over each
// store, as a sub-benchmark named by the store.
func eachBenchStack(b *testing.B, bench func(b *testing.B, s *stack)) {
	for _, o := range teststores.Kinds {
		b.Run(o.Name, func(b *testing.B) { bench(b, stackOn(b, o.Open(b), stackOptions{})) })
	}
}

// stackOn is newStack over an open store st, for benchmarks too.
func stackOn(t testing.TB, st turn.Store, o stackOptions) *stack {
	t.Helper()
	ts := newToolServer(t)
	cfg := `builtin: [echo, sleep, now]
tools:
  - name: search
    description: Search the docs
    effect: read
    input_schema: {type: object, properties: {q: {type: string}}, required: [q]}
    http: {url: "{{TOOLS}}/search", timeout: 5s}
  - name: big
    effect: read
    http: {url: "{{TOOLS}}/big", timeout: 5s}
  - name: flaky
    effect: read
    http: {url: "{{TOOLS}}/flaky", timeout: 5s}
    retry: {max_attempts: 3, initial_interval: 1ms, max_interval: 2ms, multiplier: 2}
  - name: deferred
    effect: write
    deferred: true
    http: {url: "{{TOOLS}}/deferred", timeout: 5s}
  - name: down
    effect: write
    http: {url: "http://127.0.0.1:1/nothing", timeout: 1s}
    retry: {max_attempts: 2, initial_interval: 1ms, max_interval: 1ms, multiplier: 1}
` + o.yaml
	cfg = strings.ReplaceAll(cfg, "{{TOOLS}}", ts.srv.URL)
	reg, err := tool.Parse([]byte(cfg), tool.Options{})
	if err != nil {
		t.Fatalf("tool config: %v", err)
	}
	svc, err := turn.New(turn.Config{Store: st, Tools: func() *tool.Registry { return reg }, Observer: o.observer})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	acfg := api.Config{Service: svc, Tokens: o.tokens}
	if o.signingSecret != "" {
		signer, err := completion.NewSigner(o.signingSecret)
		if err != nil {
			t.Fatal(err)
		}
		acfg.CompletionSigner = signer
	}
	if o.config != nil {
		o.config(&acfg)
	}
	srv := httptest.NewUnstartedServer(api.New(acfg))
	srv.Config.ReadTimeout = o.readTimeout
	srv.Start()
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = svc.Shutdown(ctx)
	})
	cc := newContractChecker(t)
	transport := &http.Transport{}
	t.Cleanup(transport.CloseIdleConnections)
	s := &stack{t: t, url: srv.URL, client: &http.Client{Transport: cc.Transport(transport)}, store: st, svc: svc, tools: ts, token: "any"}
	if len(o.tokens) > 0 {
		s.token = o.tokens[0]
	}
	return s
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decoding %s: %v", r.body, err)
	}
}

func (r response) code(t *testing.T) string {
	t.Helper()
	var p struct {
		Code string `json:"code"`
	}
	r.json(t, &p)
	return p.Code
}

func (s *stack) do(method, path string, body any, header ...string) response {
	s.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			s.t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, s.url+path, rd)
	if err != nil {
		s.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := s.client.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: data}
}

type wireResult struct {
	CallID        string          `json:"call_id"`
	Name          string          `json:"name"`
	Status        string          `json:"status"`
	Output        json.RawMessage `json:"output"`
	Error         *struct{ Code, Message string }
	Truncated     bool    `json:"truncated"`
	OriginalBytes int64   `json:"original_bytes"`
	OutputID      *string `json:"output_id"`
	Attempts      int     `json:"attempts"`
	ReplayedFrom  *string `json:"replayed_from"`
}

type wireTurn struct {
	ID      string       `json:"id"`
	Status  string       `json:"status"`
	Results []wireResult `json:"results"`
}

func summary(t wireTurn) string {
	var parts []string
	for _, r := range t.Results {
		s := r.CallID + "=" + r.Status
		if r.Error != nil {
			s += "(" + r.Error.Code + ")"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}

func TestQuickStartTurn(t *testing.T) {
	t.Parallel()
	eachStack(t, func(t *testing.T, s *stack) {
		if r := s.do("POST", "/v1/sessions", `{"id":"demo","budget":{"limit":64}}`); r.status != 201 {
			t.Fatalf("create session: %d %s", r.status, r.body)
		}
		body := `{"id":"turn-1","calls":[
			{"id":"c1","name":"now","arguments":{}},
			{"id":"c2","name":"sleep","arguments":{"ms":20}},
			{"id":"c3","name":"echo","arguments":{"text":"` + strings.Repeat("x", 300) + `"}},
			{"id":"c4","name":"search","arguments":{"q":"pgx"}}]}`
		r := s.do("POST", "/v1/sessions/demo/turns", body)
		if r.status != 200 {
			t.Fatalf("post turn: %d %s", r.status, r.body)
		}
		var tr wireTurn
		r.json(t, &tr)
		if tr.Status != "completed" || summary(tr) != "c1=ok c2=ok c3=ok c4=ok" {
			t.Fatalf("turn %s: %s", tr.Status, summary(tr))
		}
		c3 := tr.Results[2]
		if !c3.Truncated || c3.OutputID == nil || c3.OriginalBytes <= 300 {
			t.Fatalf("c3 not budgeted: %+v", c3)
		}
		if !strings.Contains(string(c3.Output), "truncated...") {
			t.Fatalf("c3 output has no marker: %s", c3.Output)
		}
		var hits struct {
			Hits []string `json:"hits"`
			Key  string   `json:"key"`
		}
		if err := json.Unmarshal(tr.Results[3].Output, &hits); err != nil || hits.Hits[0] != "pgx" || hits.Key != "demo/turn-1/c4" {
			t.Fatalf("search output %s (%v)", tr.Results[3].Output, err)
		}
		full := s.do("GET", "/v1/outputs/"+*c3.OutputID, nil)
		if full.status != 200 || !strings.Contains(string(full.body), strings.Repeat("x", 300)) {
			t.Fatalf("full output: %d %s", full.status, full.body)
		}
		part := s.do("GET", "/v1/outputs/"+*c3.OutputID, nil, "Range", "bytes=0-4")
		if part.status != 206 || len(part.body) != 5 {
			t.Fatalf("range: %d %q", part.status, part.body)
		}
		// The same turn again: replayed, nothing runs.
		again := s.do("POST", "/v1/sessions/demo/turns", body)
		var tr2 wireTurn
		again.json(t, &tr2)
		if again.status != 200 || again.header.Get("Turnd-Replayed") != "true" || summary(tr2) != summary(tr) {
			t.Fatalf("replay: %d %s %s", again.status, again.header.Get("Turnd-Replayed"), summary(tr2))
		}
		if n := s.tools.searches.Load(); n != 1 {
			t.Fatalf("search ran %d times, want 1", n)
		}
		conflict := s.do("POST", "/v1/sessions/demo/turns", `{"id":"turn-1","calls":[{"id":"c1","name":"now"}]}`)
		if conflict.status != 409 || conflict.code(t) != "turn_conflict" {
			t.Fatalf("conflict: %d %s", conflict.status, conflict.body)
		}
		got := s.do("GET", "/v1/sessions/demo/turns/turn-1", nil)
		var tr3 wireTurn
		got.json(t, &tr3)
		if got.status != 200 || summary(tr3) != summary(tr) {
			t.Fatalf("get turn: %d %s", got.status, got.body)
		}
		// The ledger, page by page, is gap-free and in call order.
		var kinds []string
		after := int64(0)
		for {
			page := s.do("GET", fmt.Sprintf("/v1/sessions/demo/ledger?after=%d&limit=3", after), nil)
			var l struct {
				Lines []struct {
					Seq    int64   `json:"seq"`
					Kind   string  `json:"kind"`
					CallID *string `json:"call_id"`
				} `json:"lines"`
				NextAfter int64 `json:"next_after"`
			}
			page.json(t, &l)
			if len(l.Lines) == 0 {
				break
			}
			for _, line := range l.Lines {
				if line.Seq != after+1 {
					t.Fatalf("ledger seq %d after %d", line.Seq, after)
				}
				after = line.Seq
				k := line.Kind
				if line.CallID != nil {
					k += ":" + *line.CallID
				}
				kinds = append(kinds, k)
			}
			if l.NextAfter != after {
				t.Fatalf("next_after %d, want %d", l.NextAfter, after)
			}
		}
		want := "turn_received call_admitted:c1 call_answered:c1 call_admitted:c2 call_answered:c2 call_admitted:c3 call_answered:c3 call_admitted:c4 call_answered:c4 turn_settled"
		if strings.Join(kinds, " ") != want {
			t.Fatalf("ledger\n got %s\nwant %s", strings.Join(kinds, " "), want)
		}
	})
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	eachStack(t, func(t *testing.T, s *stack) {
		many := make([]map[string]any, 129)
		for i := range many {
			many[i] = map[string]any{"id": fmt.Sprint(i), "name": "echo"}
		}
		for _, tc := range []struct {
			name   string
			method string
			path   string
			body   any
			status int
			code   string
		}{
			{"malformed json", "POST", "/v1/sessions/s/turns", `{"calls": [`, 400, "malformed_json"},
			{"empty body", "POST", "/v1/sessions/s/turns", ``, 400, "malformed_json"},
			{"trailing data", "POST", "/v1/sessions/s/turns", `{"calls": []} {}`, 400, "malformed_json"},
			{"wrong type", "POST", "/v1/sessions/s/turns", `{"calls": "echo"}`, 400, "malformed_json"},
			{"no calls", "POST", "/v1/sessions/s/turns", `{}`, 422, "invalid_request"},
			{"call without id", "POST", "/v1/sessions/s/turns", `{"calls":[{"name":"echo"}]}`, 422, "invalid_request"},
			{"call without name", "POST", "/v1/sessions/s/turns", `{"calls":[{"id":"a"}]}`, 422, "invalid_request"},
			{"too many calls", "POST", "/v1/sessions/s/turns", map[string]any{"calls": many}, 422, "too_many_calls"},
			{"bad mode", "POST", "/v1/sessions/s/turns", `{"calls":[],"mode":"parallel"}`, 422, "invalid_request"},
			{"body too large", "POST", "/v1/sessions/s/turns", `{"calls":[{"id":"a","name":"echo","arguments":{"x":"` + strings.Repeat("y", 5<<20) + `"}}]}`, 413, "body_too_large"},
			{"unknown session", "GET", "/v1/sessions/nope", nil, 404, "not_found"},
			{"unknown turn", "GET", "/v1/sessions/nope/turns/t", nil, 404, "not_found"},
			{"unknown output", "GET", "/v1/outputs/out_nope", nil, 404, "not_found"},
			{"ledger of unknown session", "GET", "/v1/sessions/nope/ledger", nil, 404, "not_found"},
			{"bad ledger limit", "GET", "/v1/sessions/nope/ledger?limit=0", nil, 400, "invalid_query"},
			{"unknown route", "GET", "/v1/nothing", nil, 404, "not_found"},
			{"wrong method", "DELETE", "/v1/sessions/s", nil, 405, "method_not_allowed"},
			{"unknown tool in session", "POST", "/v1/sessions", `{"tools":["nope"]}`, 422, "invalid_request"},
			{"bad budget", "POST", "/v1/sessions", `{"budget":{"mode":"furlongs"}}`, 422, "invalid_request"},
			{"unknown window", "POST", "/v1/sessions", `{"budget":{"window":"errorz"}}`, 422, "invalid_request"},
			{"negative turn limit", "POST", "/v1/sessions", `{"budget":{"turn_limit":-1}}`, 422, "invalid_request"},
			{"empty pattern", "POST", "/v1/sessions", `{"budget":{"window":"errors","patterns":["FAIL",""]}}`, 422, "invalid_request"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := s.do(tc.method, tc.path, tc.body)
				if r.status != tc.status {
					t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
				}
				if tc.code != "" && r.code(t) != tc.code {
					t.Fatalf("code %q, want %q", r.code(t), tc.code)
				}
			})
		}
		// None of them left a session or a turn behind.
		if r := s.do("GET", "/v1/sessions/s", nil); r.status != 404 {
			t.Fatalf("a refused request created session s: %d", r.status)
		}
	})
}

func TestRefusedCallsAreResults(t *testing.T) {
	t.Parallel()
	eachStack(t, func(t *testing.T, s *stack) {
		if r := s.do("POST", "/v1/sessions", `{"id":"narrow","tools":["echo","search"]}`); r.status != 201 {
			t.Fatalf("%d %s", r.status, r.body)
		}
		r := s.do("POST", "/v1/sessions/narrow/turns", `{"unknown_field": 1, "calls":[
			{"id":"1","name":"nope"},
			{"id":"2","name":"now"},
			{"id":"3","name":"search","arguments":{"q":7}},
			{"id":"4","name":"echo","arguments":{"a":1},"extra":true},
			{"id":"4","name":"echo"}]}`)
		var tr wireTurn
		r.json(t, &tr)
		want := "1=refused(unknown_tool) 2=refused(tool_not_granted) 3=refused(invalid_arguments) 4=ok 4=refused(duplicate_call_id)"
		if r.status != 200 || summary(tr) != want {
			t.Fatalf("%d\n got %s\nwant %s", r.status, summary(tr), want)
		}
		if !strings.Contains(tr.Results[2].Error.Message, "string") {
			t.Fatalf("schema message does not say what is wrong: %q", tr.Results[2].Error.Message)
		}
	})
}

func TestToolFailures(t *testing.T) {
	t.Parallel()
	eachStack(t, func(t *testing.T, s *stack) {
		r := s.do("POST", "/v1/sessions/s/turns", `{"calls":[{"id":"a","name":"flaky"},{"id":"b","name":"down"},{"id":"c","name":"big"}]}`)
		var tr wireTurn
		r.json(t, &tr)
		if r.status != 200 || summary(tr) != "a=error(tool_unavailable) b=error(tool_unavailable) c=ok" {
			t.Fatalf("%d %s", r.status, summary(tr))
		}
		if tr.Results[0].Attempts != 3 || s.tools.flaky.Load() != 3 || tr.Results[1].Attempts != 2 {
			t.Fatalf("attempts %d (server saw %d), %d", tr.Results[0].Attempts, s.tools.flaky.Load(), tr.Results[1].Attempts)
		}
		big := tr.Results[2]
		if !big.Truncated || big.OriginalBytes != 2_000_000 || big.OutputID == nil {
			t.Fatalf("big: %+v", big)
		}
		full := s.do("GET", "/v1/outputs/"+*big.OutputID, nil)
		if len(full.body) != 2_000_000 {
			t.Fatalf("full output %d bytes", len(full.body))
		}
	})
}

func TestAuthAndAsync(t *testing.T) {
	t.Parallel()
	teststores.Each(t, func(t *testing.T, open func(testing.TB) turn.Store) {
		s := newStack(t, open, stackOptions{tokens: []string{"secret-1", "secret-2"}})
		s.token = "wrong"
		if r := s.do("GET", "/v1/tools", nil); r.status != 401 || r.code(t) != "unauthorized" || r.header.Get("WWW-Authenticate") == "" {
			t.Fatalf("wrong token: %d %s", r.status, r.body)
		}
		if r := s.do("GET", "/healthz", nil); r.status != 200 {
			t.Fatalf("healthz needs no token: %d", r.status)
		}
		s.token = "secret-2"
		r := s.do("GET", "/v1/tools", nil)
		var tools struct {
			Tools []struct{ Name, Effect string } `json:"tools"`
		}
		r.json(t, &tools)
		if r.status != 200 || len(tools.Tools) != 8 {
			t.Fatalf("tools: %d %s", r.status, r.body)
		}
		a := s.do("POST", "/v1/sessions/s/turns", `{"id":"t","calls":[{"id":"a","name":"sleep","arguments":{"ms":30}}]}`, "Prefer", "respond-async")
		if a.status != 202 || a.header.Get("Preference-Applied") != "respond-async" || a.header.Get("Location") != "/v1/sessions/s/turns/t" {
			t.Fatalf("async: %d %v %s", a.status, a.header, a.body)
		}
		if _, err := s.svc.Await(context.Background(), turn.TurnKey{SessionID: "s", TurnID: "t"}); err != nil {
			t.Fatal(err)
		}
		g := s.do("GET", "/v1/sessions/s/turns/t", nil)
		var tr wireTurn
		g.json(t, &tr)
		if tr.Status != "completed" || summary(tr) != "a=ok" {
			t.Fatalf("after async: %s %s", tr.Status, summary(tr))
		}
		if r := s.do("GET", "/readyz", nil); r.status != 200 {
			t.Fatalf("readyz %d", r.status)
		}
	})
}

func TestRecordedCallIDsReplayAcrossTurns(t *testing.T) {
	t.Parallel()
	eachStack(t, func(t *testing.T, s *stack) {
		s.do("POST", "/v1/sessions/s/turns", `{"id":"t1","calls":[{"id":"a","name":"search","arguments":{"q":"x"}}]}`)
		r := s.do("POST", "/v1/sessions/s/turns", `{"id":"t2","calls":[{"id":"a","name":"search","arguments":{"q":"x"}},{"id":"b","name":"search","arguments":{"q":"y"}}]}`)
		var tr wireTurn
		r.json(t, &tr)
		if summary(tr) != "a=ok b=ok" || tr.Results[0].ReplayedFrom == nil || *tr.Results[0].ReplayedFrom != "t1" {
			t.Fatalf("%s %+v", summary(tr), tr.Results[0])
		}
		if n := s.tools.searches.Load(); n != 2 {
			t.Fatalf("search ran %d times, want 2", n)
		}
	})
}
