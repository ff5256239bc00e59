package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turnd/turnd/budget"
	"github.com/turnd/turnd/dispatch"
	"github.com/turnd/turnd/internal/testnet"
)

// testNow is the clock of the HTTP tests (for HTTP-date Retry-After).
var testNow = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// newServer starts a loopback tool server closed when the test ends.
func newServer(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// hang blocks a handler until the client is gone. The request body is read
// first: only then does the server notice a closed connection.
func hang(r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	<-r.Context().Done()
}

// httpSpec registers one HTTP tool "t" at url; extra is appended to its
// config entry (indented by four spaces).
func httpSpec(t *testing.T, url, extra string) *Spec {
	t.Helper()
	config := fmt.Sprintf("tools:\n  - name: t\n    http:\n      url: %q\n      headers: {X-Api-Key: '${TOKEN}', Accept: application/json}\n%s", url, extra)
	reg, err := Parse([]byte(config), Options{Env: testEnv, Now: func() time.Time { return testNow }})
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	t.Cleanup(reg.CloseIdleConnections)
	return lookup(t, reg, "t")
}

var testCall = CallContext{SessionID: "ses_1", TurnID: "turn_1"}

// invoke runs one attempt of call_1 with args.
func invoke(ctx context.Context, s *Spec, args string) dispatch.Outcome {
	ctx = WithCallContext(ctx, testCall)
	return s.Impl.Invoke(ctx, dispatch.Call{ID: "call_1", Name: s.Name, Arguments: json.RawMessage(args)}, nil)
}

// checkNoSecret fails the test if the outcome's error shows the secret.
func checkNoSecret(t *testing.T, o dispatch.Outcome) {
	t.Helper()
	if o.Err != nil && (strings.Contains(o.Err.Message, secret) || strings.Contains(o.Err.Code, secret)) {
		t.Errorf("error shows the secret: %+v", o.Err)
	}
}

func TestHTTPRequest(t *testing.T) {
	t.Parallel()
	type seen struct {
		method, path string
		header       http.Header
		body         map[string]any
	}
	got := make(chan seen, 1)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			t.Errorf("request body: %v", err)
		}
		got <- seen{r.Method, r.URL.RequestURI(), r.Header.Clone(), body}
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		io.WriteString(w, `{"output": {"hits": [1, 2]}}`)
	})
	s := httpSpec(t, srv.URL+"/search?v=1", "")

	for _, args := range []string{`{"q": "go"}`, `null`, ``} {
		out := invoke(t.Context(), s, args)
		if out.Status != dispatch.StatusOK || !out.JSON || string(out.Output) != `{"hits": [1, 2]}` {
			t.Fatalf("outcome = %+v (output %s)", out, out.Output)
		}
		r := <-got
		if r.method != http.MethodPost || r.path != "/search?v=1" {
			t.Errorf("request %s %s", r.method, r.path)
		}
		for k, want := range map[string]string{
			"Content-Type":    "application/json",
			"Idempotency-Key": "ses_1/turn_1/call_1",
			"X-Api-Key":       secret,
			"Accept":          "application/json", // configured, overrides the default
			"User-Agent":      "turnd",
		} {
			if v := r.header.Get(k); v != want {
				t.Errorf("header %s = %q, want %q", k, v, want)
			}
		}
		wantArgs := map[string]any{}
		if args == `{"q": "go"}` {
			wantArgs["q"] = "go"
		}
		want := map[string]any{
			"session_id": "ses_1", "turn_id": "turn_1", "call_id": "call_1", "name": "t",
			"arguments": wantArgs, "attempt": float64(1),
		}
		if fmt.Sprint(r.body) != fmt.Sprint(want) {
			t.Errorf("body = %v\nwant %v", r.body, want)
		}
	}
}

func TestHTTPAnswers(t *testing.T) {
	t.Parallel()
	type answer struct {
		status int
		ctype  string
		header map[string]string
		body   string
	}
	type want struct {
		status     dispatch.Status
		output     string
		json       bool
		code       string
		msg        string // substring of the error message
		retryable  bool
		retryAfter time.Duration
	}
	tests := []struct {
		name    string
		answer  answer
		keepCap int64 // set on ctx (without a projector) when positive
		want    want
	}{
		{"json output", answer{200, "application/json", nil, `{"output": "hi"}`}, 0,
			want{status: dispatch.StatusOK, output: `"hi"`, json: true}},
		{"json null output", answer{200, "application/json", nil, `{"output": null}`}, 0,
			want{status: dispatch.StatusOK, output: `null`, json: true}},
		{"+json", answer{201, "application/vnd.turnd+json", nil, `{"output": [1], "meta": {}}`}, 0,
			want{status: dispatch.StatusOK, output: `[1]`, json: true}},
		{"json error", answer{200, "application/json", nil, `{"error": {"code": "no_such_doc", "message": "doc 7 is gone"}}`}, 0,
			want{status: dispatch.StatusError, code: "no_such_doc", msg: "doc 7 is gone"}},
		{"json error without code", answer{200, "application/json", nil, `{"error": {"message": "nope"}}`}, 0,
			want{status: dispatch.StatusError, code: CodeToolError, msg: "nope"}},
		{"json error malformed", answer{200, "application/json", nil, `{"error": "nope"}`}, 0,
			want{status: dispatch.StatusError, code: CodeInvalidToolResponse, msg: `"error" is not {"code"`}},
		{"json both", answer{200, "application/json", nil, `{"output": 1, "error": {"code": "x"}}`}, 0,
			want{status: dispatch.StatusError, code: CodeInvalidToolResponse, msg: `both "output" and "error"`}},
		{"json neither", answer{200, "application/json", nil, `{"result": 1}`}, 0,
			want{status: dispatch.StatusError, code: CodeInvalidToolResponse, msg: `neither "output" nor "error"`}},
		{"json invalid", answer{200, "application/json", nil, `{"output": `}, 0,
			want{status: dispatch.StatusError, code: CodeInvalidToolResponse, msg: "not a JSON object"}},
		{"json array", answer{200, "application/json", nil, `[1]`}, 0,
			want{status: dispatch.StatusError, code: CodeInvalidToolResponse, msg: "not a JSON object"}},
		{"json too large", answer{200, "application/json", nil, `{"output": "` + strings.Repeat("x", 100) + `"}`}, 64,
			want{status: dispatch.StatusError, code: CodeOutputTooLarge, msg: "exceeds 64 bytes"}},
		{"json at the cap", answer{200, "application/json", nil, `{"output":"` + strings.Repeat("x", 50) + `"}`}, 64,
			want{status: dispatch.StatusOK, output: `"` + strings.Repeat("x", 50) + `"`, json: true}},
		{"text without projector", answer{200, "text/plain; charset=utf-8", nil, "line 1\nline 2\n"}, 0,
			want{status: dispatch.StatusOK, output: "line 1\nline 2\n"}},
		{"text too large without projector", answer{200, "text/plain", nil, strings.Repeat("x", 100)}, 64,
			want{status: dispatch.StatusError, code: CodeOutputTooLarge, msg: "exceeds 64 bytes"}},
		{"unsupported type", answer{200, "application/octet-stream", nil, "\x00\x01"}, 0,
			want{status: dispatch.StatusError, code: CodeInvalidToolResponse, msg: `unsupported content type "application/octet-stream"`}},
		{"no content type", answer{204, "", nil, ""}, 0,
			want{status: dispatch.StatusError, code: CodeInvalidToolResponse, msg: `unsupported content type "none"`}},
		{"404 text", answer{404, "text/plain", nil, "no route\nfor  you"}, 0,
			want{status: dispatch.StatusError, code: CodeToolRejected, msg: "the tool rejected the call: HTTP 404 Not Found: no route for you"}},
		{"400 json error", answer{400, "application/json", nil, `{"error": {"code": "bad_query", "message": "q is empty"}}`}, 0,
			want{status: dispatch.StatusError, code: "bad_query", msg: "q is empty"}},
		{"422 other json", answer{422, "application/json", nil, `{"detail": "x"}`}, 0,
			want{status: dispatch.StatusError, code: CodeToolRejected, msg: "HTTP 422 Unprocessable Entity"}},
		{"401", answer{401, "", nil, ""}, 0,
			want{status: dispatch.StatusError, code: CodeToolRejected, msg: "HTTP 401 Unauthorized"}},
		{"302 not followed", answer{302, "", map[string]string{"Location": "/elsewhere"}, ""}, 0,
			want{status: dispatch.StatusError, code: CodeToolRejected, msg: "redirect (HTTP 302 Found)"}},
		{"408", answer{408, "text/plain", nil, "slow"}, 0,
			want{status: dispatch.StatusError, code: CodeToolUnavailable, msg: "the tool answered HTTP 408 Request Timeout", retryable: true}},
		{"429 retry-after seconds", answer{429, "", map[string]string{"Retry-After": "7"}, ""}, 0,
			want{status: dispatch.StatusError, code: CodeToolUnavailable, msg: "HTTP 429 Too Many Requests", retryable: true, retryAfter: 7 * time.Second}},
		{"503 retry-after date", answer{503, "", map[string]string{"Retry-After": testNow.Add(90 * time.Second).Format(http.TimeFormat)}, ""}, 0,
			want{status: dispatch.StatusError, code: CodeToolUnavailable, msg: "HTTP 503 Service Unavailable", retryable: true, retryAfter: 90 * time.Second}},
		{"500 bad retry-after", answer{500, "", map[string]string{"Retry-After": "soon"}, ""}, 0,
			want{status: dispatch.StatusError, code: CodeToolUnavailable, msg: "HTTP 500 Internal Server Error", retryable: true}},
		{"502 json body is not the tool's error", answer{502, "application/json", nil, `{"error": {"code": "x"}}`}, 0,
			want{status: dispatch.StatusError, code: CodeToolUnavailable, msg: "HTTP 502 Bad Gateway", retryable: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/" {
					t.Errorf("the tool followed a redirect to %s", r.URL.Path)
				}
				for k, v := range tt.answer.header {
					w.Header().Set(k, v)
				}
				if tt.answer.ctype != "" {
					w.Header().Set("Content-Type", tt.answer.ctype)
				}
				w.WriteHeader(tt.answer.status)
				io.WriteString(w, tt.answer.body)
			})
			s := httpSpec(t, srv.URL+"/", "")
			ctx := t.Context()
			if tt.keepCap > 0 {
				ctx = WithProjector(ctx, nil, tt.keepCap)
			}
			out := invoke(ctx, s, `{}`)
			checkNoSecret(t, out)
			w := tt.want
			if out.Status != w.status {
				t.Fatalf("status = %s (%+v), want %s", out.Status, out.Err, w.status)
			}
			if w.status == dispatch.StatusOK {
				if string(out.Output) != w.output || out.JSON != w.json || out.Err != nil {
					t.Errorf("output = %q json=%v, want %q json=%v", out.Output, out.JSON, w.output, w.json)
				}
				return
			}
			e := out.Err
			if e == nil || e.Code != w.code || !strings.Contains(e.Message, w.msg) || e.Retryable != w.retryable || e.RetryAfter != w.retryAfter {
				t.Errorf("error = %+v\nwant code %q, message containing %q, retryable %v, retry after %v", e, w.code, w.msg, w.retryable, w.retryAfter)
			}
		})
	}
}

// textServer answers body as text/plain in chunks, flushing each, so that
// the client reads it in many pieces.
func textServer(t *testing.T, body []byte) *httptest.Server {
	t.Helper()
	return newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		for rest := body; len(rest) > 0; {
			n := min(len(rest), 1000)
			w.Write(rest[:n])
			w.(http.Flusher).Flush()
			rest = rest[n:]
		}
	})
}

func newProjector(t testing.TB, limit int) *budget.Projector {
	t.Helper()
	p, err := budget.New(budget.Config{Limit: limit})
	if err != nil {
		t.Fatalf("budget.New: %v", err)
	}
	return p
}

func TestHTTPTextProjected(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	for i := range 500 {
		fmt.Fprintf(&b, "line %d of the tool's text output\n", i)
	}
	body := b.Bytes()
	tests := []struct {
		name     string
		keep     int64
		complete bool
	}{
		{"over the keep cap", 1000, false},
		{"under the keep cap", int64(len(body)) + 1, true},
		{"at the keep cap", int64(len(body)), true},
		{"no keep cap: the default", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := httpSpec(t, textServer(t, body).URL, "")
			p := newProjector(t, 200)
			out := invoke(WithProjector(t.Context(), p, tt.keep), s, `{}`)
			if out.Status != dispatch.StatusOK || out.Output != nil {
				t.Fatalf("outcome = %+v", out)
			}
			pr, ok := out.Detail.(*Projected)
			if !ok {
				t.Fatalf("Detail = %T, want *Projected", out.Detail)
			}
			// The stream saw every byte, so its result is the one the whole
			// body projects to.
			ref := p.NewStream()
			ref.Write(body)
			if want := ref.Result(); fmt.Sprint(pr.Result) != fmt.Sprint(want) {
				t.Errorf("Result = %+v\nwant %+v", pr.Result, want)
			}
			if whole := p.Project(body); fmt.Sprint(pr.Result) != fmt.Sprint(whole) {
				t.Errorf("Result = %+v\nwant Project(body) = %+v", pr.Result, whole)
			}
			if r := pr.Result; !r.Truncated || r.OriginalBytes != int64(len(body)) || r.OriginalLines != 500 ||
				r.DroppedBytes <= 0 || r.DroppedBytes >= r.OriginalBytes {
				t.Errorf("Result = %+v; want truncated, %d bytes, 500 lines", r, len(body))
			}
			wantFull := body
			if tt.keep > 0 && tt.keep < int64(len(body)) {
				wantFull = body[:tt.keep]
			}
			if !bytes.Equal(pr.Full, wantFull) || pr.Complete != tt.complete {
				t.Errorf("Full has %d bytes, Complete %v; want %d, %v", len(pr.Full), pr.Complete, len(wantFull), tt.complete)
			}
			if pr.ContentType != "text/plain; charset=utf-8" {
				t.Errorf("ContentType = %q", pr.ContentType)
			}
		})
	}
}

// bigTextServer answers size bytes of generated text lines without holding
// them: one 64 KiB block, written over and over.
func bigTextServer(t testing.TB, size int64) *httptest.Server {
	block := bytes.Repeat([]byte("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde\n"), 1024)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
		for rest := size; rest > 0; {
			n := min(rest, int64(len(block)))
			if _, err := w.Write(block[:n]); err != nil {
				return
			}
			rest -= n
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestHTTPTextMemory streams 32 MiB through the tool: what it allocates
// must stay far below the body's size. Not parallel, so that nothing else
// allocates meanwhile.
func TestHTTPTextMemory(t *testing.T) {
	const size, keep = 32 << 20, 1 << 20
	s := httpSpec(t, bigTextServer(t, size).URL, "")
	ctx := WithProjector(t.Context(), newProjector(t, 4096), keep)
	invoke(ctx, s, `{}`) // warm up: connection, buffers

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	out := invoke(ctx, s, `{}`)
	runtime.ReadMemStats(&after)

	pr, ok := out.Detail.(*Projected)
	if !ok {
		t.Fatalf("outcome = %+v", out)
	}
	if pr.Result.OriginalBytes != size || pr.Result.OriginalLines != size/64 || len(pr.Full) != keep || pr.Complete {
		t.Errorf("OriginalBytes %d, OriginalLines %d, Full %d bytes, Complete %v", pr.Result.OriginalBytes, pr.Result.OriginalLines, len(pr.Full), pr.Complete)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > size/4 {
		t.Errorf("allocated %d MiB for a %d MiB body", alloc>>20, size>>20)
	} else {
		t.Logf("allocated %.1f MiB for a %d MiB body (keep cap %d MiB)", float64(alloc)/(1<<20), size>>20, keep>>20)
	}
}

// BenchmarkHTTPTextStream streams a 256 MiB text answer through the
// projector: B/op stays near the keep cap, not the body size.
func BenchmarkHTTPTextStream(b *testing.B) {
	const size, keep = 256 << 20, 1 << 20
	srv := bigTextServer(b, size)
	reg, err := Parse(fmt.Appendf(nil, "tools: [{name: t, http: {url: %q}}]", srv.URL), Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(reg.CloseIdleConnections)
	s, _ := reg.Lookup("t")
	ctx := WithProjector(b.Context(), newProjector(b, 4096), keep)
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		out := invoke(ctx, s, `{}`)
		if pr, ok := out.Detail.(*Projected); !ok || pr.Result.OriginalBytes != size {
			b.Fatalf("outcome = %+v", out)
		}
	}
}

func TestHTTPConnectionRefused(t *testing.T) {
	t.Parallel()
	addr := testnet.ClosedAddr(t)
	s := httpSpec(t, "http://"+addr+"/?token=${TOKEN}", "")
	out := invoke(t.Context(), s, `{}`)
	checkNoSecret(t, out)
	if out.Status != dispatch.StatusError || !out.Err.Retryable || out.Err.Code != CodeToolUnavailable {
		t.Fatalf("outcome = %+v %+v", out, out.Err)
	}
	if !strings.Contains(out.Err.Message, "connection refused") || strings.Contains(out.Err.Message, "token=") {
		t.Errorf("message = %q", out.Err.Message)
	}
}

func TestHTTPTimeout(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		handler http.HandlerFunc
	}{
		{"no answer", func(w http.ResponseWriter, r *http.Request) {
			hang(r)
		}},
		{"stalled body", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			io.WriteString(w, "partial")
			w.(http.Flusher).Flush()
			hang(r)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := httpSpec(t, newServer(t, tt.handler).URL, "")
			s.Impl.(*httpTool).timeout = 50 * time.Millisecond
			ctx := WithProjector(t.Context(), newProjector(t, 100), 100)
			out := invoke(ctx, s, `{}`)
			if out.Status != dispatch.StatusError || out.Err.Code != CodeToolUnavailable || !out.Err.Retryable || !out.Err.TimedOut ||
				out.Err.Message != "the tool did not answer within 50ms" {
				t.Fatalf("outcome = %+v %+v", out, out.Err)
			}
		})
	}
}

func TestHTTPCancel(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		body bool // the cancel comes while the body streams
	}{{"waiting for the answer", false}, {"reading the body", true}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			started := make(chan struct{})
			var once sync.Once
			srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				if tt.body {
					w.Header().Set("Content-Type", "text/plain")
					io.WriteString(w, "partial")
					w.(http.Flusher).Flush()
				}
				once.Do(func() { close(started) })
				hang(r)
			})
			s := httpSpec(t, srv.URL, "")
			s.Impl.(*httpTool).timeout = time.Hour
			ctx, cancel := context.WithCancel(WithProjector(t.Context(), newProjector(t, 100), 100))
			done := make(chan dispatch.Outcome)
			go func() { done <- invoke(ctx, s, `{}`) }()
			<-started
			cancel()
			out := <-done
			if out.Status != dispatch.StatusCancelled || out.Err == nil || out.Err.Code != dispatch.CodeCancelled {
				t.Fatalf("outcome = %+v %+v", out, out.Err)
			}
		})
	}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"0", 0},
		{" 12 ", 12 * time.Second},
		{"-3", 0},
		{"1.5", 0},
		{"99999999999999999999", maxRetryAfter},
		{testNow.Add(time.Minute).Format(http.TimeFormat), time.Minute},
		{testNow.Add(-time.Minute).Format(http.TimeFormat), 0},
		{testNow.Add(100 * time.Hour).Format(http.TimeFormat), maxRetryAfter},
		{"Sun, 06 Nov 1994 08:49:37 GMT", 0},
		{"tomorrow", 0},
	}
	for _, tt := range tests {
		if got := parseRetryAfter(tt.in, testNow); got != tt.want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestCallContext(t *testing.T) {
	t.Parallel()
	if _, ok := CallContextFrom(t.Context()); ok {
		t.Error("CallContextFrom found a context that was never set")
	}
	cc, ok := CallContextFrom(WithCallContext(t.Context(), testCall))
	if !ok || cc.SessionID != testCall.SessionID || cc.TurnID != testCall.TurnID || cc.CompleteURL != nil {
		t.Errorf("CallContextFrom = %+v, %v", cc, ok)
	}
	if got := cc.completeURL("ck_a"); got != "/v1/complete/ck_a" {
		t.Errorf("default complete URL = %q", got)
	}
	cc.CompleteURL = func(key string) string { return "https://turnd.example/v1/complete/" + key }
	if got := cc.completeURL("ck_a"); got != "https://turnd.example/v1/complete/ck_a" {
		t.Errorf("complete URL = %q", got)
	}
}

// waveHost admits every call to one tool and collects the accounting.
type waveHost struct {
	spec *Spec
	got  []dispatch.Accounted
}

func (h *waveHost) Admit(_ context.Context, call dispatch.Call) dispatch.Admission {
	return dispatch.Admission{Verdict: dispatch.Run, Tool: h.spec.Impl, Effect: h.spec.Effect, Retry: h.spec.Retry}
}

func (h *waveHost) Account(_ context.Context, a dispatch.Accounted) error {
	h.got = append(h.got, a)
	return nil
}

// TestHTTPRetryThroughDispatch runs the tool in a dispatch wave: retries
// carry the next attempt number and the same Idempotency-Key, and a call
// that runs out of attempts ends with the last retryable error.
func TestHTTPRetryThroughDispatch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		failures int // answers 503 before answering 200
		status   dispatch.Status
	}{
		{"recovers", 2, dispatch.StatusOK},
		{"runs out", 3, dispatch.StatusError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var (
				mu       sync.Mutex
				keys     []string
				attempts []int
			)
			srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				var req request
				if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
					t.Errorf("request body: %v", err)
				}
				mu.Lock()
				keys = append(keys, r.Header.Get("Idempotency-Key"))
				attempts = append(attempts, req.Attempt)
				n := len(attempts)
				mu.Unlock()
				if n <= tt.failures {
					w.Header().Set("Retry-After", "0")
					w.WriteHeader(http.StatusServiceUnavailable)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, `{"output": {"ok": true}}`)
			})
			s := httpSpec(t, srv.URL, "    retry: {max_attempts: 3, initial_interval: 1ms, max_interval: 1ms, jitter: 0}\n")
			h := &waveHost{spec: s}
			ctx := WithCallContext(t.Context(), testCall)
			wave := dispatch.Wave{Calls: []dispatch.Call{{ID: "call_1", Name: "t", Arguments: json.RawMessage(`{}`)}}}
			if _, err := wave.Run(ctx, h); err != nil {
				t.Fatal(err)
			}
			if len(h.got) != 1 {
				t.Fatalf("accounted %d calls", len(h.got))
			}
			a := h.got[0]
			if a.Outcome.Status != tt.status || a.Attempts != 3 {
				t.Errorf("outcome %+v %+v after %d attempts", a.Outcome, a.Outcome.Err, a.Attempts)
			}
			if tt.status == dispatch.StatusError && (a.Outcome.Err.Code != CodeToolUnavailable || !a.Outcome.Err.Retryable) {
				t.Errorf("final error = %+v", a.Outcome.Err)
			}
			if fmt.Sprint(attempts) != "[1 2 3]" || fmt.Sprint(keys) != "[ses_1/turn_1/call_1 ses_1/turn_1/call_1 ses_1/turn_1/call_1]" {
				t.Errorf("attempts %v, keys %v", attempts, keys)
			}
		})
	}
}
