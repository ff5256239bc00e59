package api_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/turnd/turnd/api"
	"github.com/turnd/turnd/internal/teststores"
)

// quickStart is the configuration `turnd serve` gives a loopback server
// without tokens: only loopback Host names are served.
func quickStart(c *api.Config) { c.RestrictHosts = true; c.AllowedHosts = []string{"turnd.internal"} }

func problemCode(t *testing.T, resp *http.Response) string {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q, want application/problem+json", ct)
	}
	var p struct {
		Code   string `json:"code"`
		Status int    `json:"status"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
		t.Fatal(err)
	}
	if p.Status != resp.StatusCode {
		t.Fatalf("problem status %d, HTTP status %d", p.Status, resp.StatusCode)
	}
	return p.Code
}

// TestCrossSiteWritesRefused: what a web page can make a browser send to a
// loopback turnd without tokens (a simple cross-site POST, a rebound Host,
// a foreign Origin) is refused before any route runs.
func TestCrossSiteWritesRefused(t *testing.T) {
	t.Parallel()
	s := newStack(t, teststores.Kinds[0].Open, stackOptions{config: quickStart})
	self := s.url // http://127.0.0.1:port
	port := self[strings.LastIndex(self, ":")+1:]
	turn := `{"calls":[{"id":"a","name":"echo","arguments":{"x":1}}]}`
	for _, tc := range []struct {
		name   string
		method string
		path   string
		body   string
		header []string
		status int
		code   string
	}{
		{"text/plain POST", "POST", "/v1/sessions/x1/turns", turn, []string{"Content-Type", "text/plain"}, 415, "unsupported_media_type"},
		{"form POST", "POST", "/v1/sessions/x2/turns", "a=b", []string{"Content-Type", "application/x-www-form-urlencoded"}, 415, "unsupported_media_type"},
		{"multipart POST", "POST", "/v1/sessions", "--b--", []string{"Content-Type", "multipart/form-data; boundary=b"}, 415, "unsupported_media_type"},
		{"no Content-Type with a body", "POST", "/v1/sessions/x3/turns", turn, []string{"Content-Type", ""}, 415, "unsupported_media_type"},
		{"a charset other than UTF-8", "POST", "/v1/sessions/x4/turns", turn, []string{"Content-Type", "application/json; charset=iso-8859-1"}, 415, "unsupported_media_type"},
		{"event stream elsewhere", "POST", "/v1/sessions", `{}`, []string{"Content-Type", "text/event-stream"}, 415, "unsupported_media_type"},
		{"rebound Host", "POST", "/v1/sessions/x5/turns", turn, []string{"Host", "attacker.example:" + port}, 403, "host_not_allowed"},
		{"rebound Host, GET", "GET", "/v1/tools", "", []string{"Host", "attacker.example"}, 403, "host_not_allowed"},
		{"rebound Host with its own Origin", "POST", "/v1/sessions/x6/turns", turn, []string{"Host", "attacker.example:" + port, "Origin", "http://attacker.example:" + port}, 403, "host_not_allowed"},
		{"foreign Origin", "POST", "/v1/sessions/x7/turns", turn, []string{"Origin", "http://evil.example"}, 403, "origin_not_allowed"},
		{"foreign Origin, GET", "GET", "/v1/tools", "", []string{"Origin", "https://evil.example"}, 403, "origin_not_allowed"},
		{"null Origin", "POST", "/v1/sessions/x8/turns", turn, []string{"Origin", "null"}, 403, "origin_not_allowed"},
		{"the server's own origin on another port", "POST", "/v1/sessions/x9/turns", turn, []string{"Origin", "http://127.0.0.1:1"}, 403, "origin_not_allowed"},

		{"JSON", "POST", "/v1/sessions/ok1/turns", turn, nil, 200, ""},
		{"JSON in UTF-8", "POST", "/v1/sessions/ok2/turns", turn, []string{"Content-Type", "application/json; charset=UTF-8"}, 200, ""},
		{"a streamed type on turns", "POST", "/v1/sessions/ok4/turns", "data: x\n\n", []string{"Content-Type", "text/event-stream"}, 400, "invalid_query"}, // a stream without its format
		{"NDJSON on turns", "POST", "/v1/sessions/ok5/turns", "{}\n{}\n", []string{"Content-Type", "application/x-ndjson"}, 422, "invalid_request"},        // a call without an id
		{"the server's own origin", "POST", "/v1/sessions/ok6/turns", turn, []string{"Origin", self}, 200, ""},
		{"the server's own origin, text/plain", "POST", "/v1/sessions/x10/turns", turn, []string{"Origin", self, "Content-Type", "text/plain"}, 415, "unsupported_media_type"},
		{"localhost", "GET", "/v1/tools", "", []string{"Host", "localhost:" + port}, 200, ""},
		{"localhost without a port", "GET", "/v1/tools", "", []string{"Host", "LOCALHOST"}, 200, ""},
		{"another loopback address", "GET", "/v1/tools", "", []string{"Host", "127.3.2.1:" + port}, 200, ""},
		{"IPv6 loopback", "GET", "/v1/tools", "", []string{"Host", "[::1]:" + port}, 200, ""},
		{"an allowed host", "GET", "/v1/tools", "", []string{"Host", "Turnd.Internal:8080"}, 200, ""},
		{"a completion in any type", "POST", "/v1/complete/ck_nope", "whatever", []string{"Content-Type", "text/plain"}, 400, "malformed_json"},
		{"a POST without a body", "POST", "/v1/sessions/nope/turns/t/cancel", "", nil, 404, "not_found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, s.url+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer any")
			if tc.body != "" {
				req.Body = io.NopCloser(strings.NewReader(tc.body))
				req.ContentLength = int64(len(tc.body))
				req.Header.Set("Content-Type", "application/json")
			}
			for i := 0; i+1 < len(tc.header); i += 2 {
				if tc.header[i] == "Host" {
					req.Host = tc.header[i+1]
				} else if tc.header[i+1] == "" {
					req.Header.Del(tc.header[i])
				} else {
					req.Header.Set(tc.header[i], tc.header[i+1])
				}
			}
			resp, err := s.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tc.status {
				b, _ := io.ReadAll(resp.Body)
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, b)
			}
			if tc.code != "" {
				if got := problemCode(t, resp); got != tc.code {
					t.Fatalf("code %q, want %q", got, tc.code)
				}
			}
			if tc.status >= 400 && resp.Header.Get("Access-Control-Allow-Origin") != "" {
				t.Fatalf("a refused request got a CORS grant: %v", resp.Header)
			}
		})
	}
	for _, id := range []string{"x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8", "x9", "x10"} {
		if r := s.do("GET", "/v1/sessions/"+id, nil); r.status != 404 {
			t.Errorf("a refused request created session %s: %d", id, r.status)
		}
	}
}

// TestCORSPreflight runs a browser's preflight and actual request against a
// real server on loopback, for a listed origin and for another.
func TestCORSPreflight(t *testing.T) {
	t.Parallel()
	const app, evil = "https://app.example", "https://evil.example"
	s := newStack(t, teststores.Kinds[0].Open, stackOptions{
		tokens: []string{"a-token-of-enough-length-for-this-test"},
		config: func(c *api.Config) { c.CORSOrigins = []string{app + "/", "http://localhost:5173"} },
	})
	preflight := func(origin, method, headers string) *http.Response {
		t.Helper()
		req, err := http.NewRequest("OPTIONS", s.url+"/v1/sessions/s/turns", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", method)
		req.Header.Set("Access-Control-Request-Headers", headers)
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	const requested = "authorization,content-type,idempotency-key,last-event-id,prefer"
	ok := preflight(app, "POST", requested)
	if ok.StatusCode != http.StatusNoContent {
		t.Fatalf("preflight of a listed origin: %d", ok.StatusCode)
	}
	h := ok.Header
	if got := h.Get("Access-Control-Allow-Origin"); got != app {
		t.Fatalf("Access-Control-Allow-Origin %q, want %q", got, app)
	}
	if !strings.Contains(h.Get("Access-Control-Allow-Methods"), "POST") {
		t.Fatalf("Access-Control-Allow-Methods %q", h.Get("Access-Control-Allow-Methods"))
	}
	allowed := strings.ToLower(h.Get("Access-Control-Allow-Headers"))
	for _, name := range strings.Split(requested, ",") {
		if !strings.Contains(allowed, name) {
			t.Errorf("Access-Control-Allow-Headers %q lacks %s", allowed, name)
		}
	}
	if h.Get("Access-Control-Max-Age") == "" || !strings.Contains(strings.Join(h.Values("Vary"), ","), "Origin") {
		t.Errorf("no Max-Age or Vary: Origin: %v", h)
	}

	// The actual request of the listed origin: served, its headers readable.
	r := s.do("POST", "/v1/sessions/s/turns", `{"id":"t","calls":[{"id":"a","name":"echo","arguments":{}}]}`, "Origin", app)
	if r.status != 200 || r.header.Get("Access-Control-Allow-Origin") != app {
		t.Fatalf("actual request: %d %v %s", r.status, r.header, r.body)
	}
	exposed := r.header.Get("Access-Control-Expose-Headers")
	for _, name := range []string{"Turnd-Turn-Status", "Turnd-Replayed", "Turnd-Follow-Up", "Turnd-Placeholders", "Location", "Retry-After", "X-Request-Id", "Preference-Applied"} {
		if !strings.Contains(exposed, name) {
			t.Errorf("Access-Control-Expose-Headers %q lacks %s", exposed, name)
		}
	}

	// Another origin: no grant, and its request is refused.
	bad := preflight(evil, "POST", requested)
	if bad.StatusCode != http.StatusForbidden || problemCode(t, bad) != "origin_not_allowed" {
		t.Fatalf("preflight of another origin: %d", bad.StatusCode)
	}
	for _, name := range []string{"Access-Control-Allow-Origin", "Access-Control-Allow-Methods", "Access-Control-Allow-Headers"} {
		if v := bad.Header.Get(name); v != "" {
			t.Errorf("another origin's preflight got %s: %q", name, v)
		}
	}
	r = s.do("POST", "/v1/sessions/s2/turns", `{"calls":[{"id":"a","name":"echo","arguments":{}}]}`, "Origin", evil)
	if r.status != 403 || r.code(t) != "origin_not_allowed" || r.header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("another origin's request: %d %v %s", r.status, r.header, r.body)
	}
	if r := s.do("GET", "/v1/sessions/s2", nil); r.status != 404 {
		t.Fatalf("another origin's request created a session: %d", r.status)
	}
}

// TestProblemsFromTheHTTPMachinery: answers net/http or http.ServeContent
// would write in plain text are problems.
func TestProblemsFromTheHTTPMachinery(t *testing.T) {
	t.Parallel()
	s := newStack(t, teststores.Kinds[0].Open, stackOptions{})
	t.Run("431", func(t *testing.T) {
		r := s.do("GET", "/v1/tools", nil, "X-Big", strings.Repeat("x", 70<<10))
		if r.status != 431 || r.code(t) != "headers_too_large" || r.header.Get("Content-Type") != "application/problem+json" {
			t.Fatalf("%d %v %s", r.status, r.header, r.body)
		}
	})
	t.Run("416", func(t *testing.T) {
		r := s.do("POST", "/v1/sessions", `{"id":"o","budget":{"limit":64}}`)
		if r.status != 201 {
			t.Fatalf("%d %s", r.status, r.body)
		}
		r = s.do("POST", "/v1/sessions/o/turns", `{"calls":[{"id":"a","name":"echo","arguments":{"x":"`+strings.Repeat("y", 300)+`"}}]}`)
		var tr wireTurn
		r.json(t, &tr)
		if len(tr.Results) != 1 || tr.Results[0].OutputID == nil {
			t.Fatalf("no output kept: %s", r.body)
		}
		r = s.do("GET", "/v1/outputs/"+*tr.Results[0].OutputID, nil, "Range", "bytes=100000-")
		if r.status != 416 || r.code(t) != "range_not_satisfiable" || r.header.Get("Content-Type") != "application/problem+json" || !strings.HasPrefix(r.header.Get("Content-Range"), "bytes */") {
			t.Fatalf("%d %v %s", r.status, r.header, r.body)
		}
	})
}

// TestSlowBody: a body that stops arriving before the server's read
// deadline answers 408, as a problem.
func TestSlowBody(t *testing.T) {
	t.Parallel()
	s := newStack(t, teststores.Kinds[0].Open, stackOptions{readTimeout: 300 * time.Millisecond})
	u, err := url.Parse(s.url)
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/v1/sessions/s/turns", "/v1/sessions", "/v1/sessions/s/turns?format=openai.chat", "/v1/complete/ck_x"} {
		t.Run(path, func(t *testing.T) {
			conn, err := net.Dial("tcp", u.Host)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			// Content-Length promises 100 bytes; 10 come, then nothing.
			_, err = io.WriteString(conn, "POST "+path+" HTTP/1.1\r\nHost: "+u.Host+"\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"calls\":[")
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusRequestTimeout || problemCode(t, resp) != "request_timeout" {
				t.Fatalf("status %d", resp.StatusCode)
			}
		})
	}
}

// TestCallbackURLBlocked: a session cannot point its webhooks at the cloud's
// metadata service or link-local addresses.
func TestCallbackURLBlocked(t *testing.T) {
	t.Parallel()
	s := newStack(t, teststores.Kinds[0].Open, stackOptions{})
	for i, u := range []string{"http://169.254.169.254/latest/meta-data/", "http://[fd00:ec2::254]/", "http://metadata.google.internal/", "http://[fe80::1%25eth0]:8080/", "http://0.0.0.0:8080/"} {
		id := "cb" + string(rune('a'+i))
		r := s.do("POST", "/v1/sessions", map[string]any{"id": id, "callback_url": u})
		if r.status != 422 || r.code(t) != "invalid_request" || !strings.Contains(string(r.body), "callback_url") {
			t.Errorf("%s: %d %s", u, r.status, r.body)
		}
	}
}
