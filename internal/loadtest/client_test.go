package loadtest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnd/turnd/internal/loadtest"
)

// echoServer answers every request with its method, path, headers of
// interest and body, and counts the connections it accepted.
func echoServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &conns
}

func TestClientPosts(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("0123456789", 10_000) // chunked: more than the server buffers
	srv, conns := echoServer(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.URL.Query().Get("big") != "" {
			w.Header().Set("Content-Type", "text/plain")
			for i := 0; i < len(big); i += 4096 {
				_, _ = io.WriteString(w, big[i:min(i+4096, len(big))])
				w.(http.Flusher).Flush()
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "%s %s host=%s type=%s auth=%s prefer=%s len=%d body=%s",
			r.Method, r.URL.RequestURI(), r.Host, r.Header.Get("Content-Type"), r.Header.Get("Authorization"),
			r.Header.Get("Prefer"), r.ContentLength, body)
	})
	c, err := loadtest.NewClient(srv.URL+"/base/", loadtest.ClientOptions{Header: http.Header{"authorization": {"Bearer tok"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var buf []byte
	for i := range 5 {
		body := fmt.Sprintf(`{"i":%d}`, i)
		status, got, err := c.Post(t.Context(), "/v1/x?q=1", []byte(body), buf[:0], "Prefer", "wait=5")
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("POST /base/v1/x?q=1 host=%s type=application/json auth=Bearer tok prefer=wait=5 len=%d body=%s",
			strings.TrimPrefix(srv.URL, "http://"), len(body), body)
		if status != http.StatusCreated || string(got) != want {
			t.Errorf("post %d: %d %q, want 201 %q", i, status, got, want)
		}
		buf = got
	}
	status, got, err := c.Post(t.Context(), "/big?big=1", nil, []byte("kept:"))
	if err != nil || status != http.StatusOK || string(got) != "kept:"+big {
		t.Errorf("chunked answer: %d, %d bytes, %v; want 200 and the %d bytes after dst", status, len(got), err, len(big))
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d connections for sequential requests, want 1 kept alive", n)
	}
}

func TestClientReconnects(t *testing.T) {
	t.Parallel()
	var closeNext atomic.Bool
	srv, conns := echoServer(t, func(w http.ResponseWriter, r *http.Request) {
		if closeNext.Swap(false) {
			w.Header().Set("Connection", "close")
		}
		_, _ = io.Copy(w, r.Body)
	})
	c, err := loadtest.NewClient(srv.URL, loadtest.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	post := func(body string) {
		t.Helper()
		status, got, err := c.Post(t.Context(), "/", []byte(body), nil)
		if err != nil || status != http.StatusOK || string(got) != body {
			t.Fatalf("post %q: %d %q %v", body, status, got, err)
		}
	}
	post("a")
	// The server ends the connection with its answer: the next request
	// dials.
	closeNext.Store(true)
	post("b")
	post("c")
	if n := conns.Load(); n != 2 {
		t.Errorf("%d connections, want 2 (one closed by the server's answer)", n)
	}
	// The server closes the idle connection: the request written to it is
	// sent again on a new one.
	srv.CloseClientConnections()
	post("d")
	if n := conns.Load(); n != 3 {
		t.Errorf("%d connections, want 3 (the idle one closed by the server)", n)
	}
}

func TestClientFailures(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv, _ := echoServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/slow":
			select {
			case <-release:
			case <-r.Context().Done():
			}
		case "/large":
			_, _ = io.WriteString(w, strings.Repeat("x", 2000))
		case "/hangup":
			conn, _, _ := w.(http.Hijacker).Hijack()
			_ = conn.Close()
		default:
			_, _ = io.WriteString(w, "ok")
		}
	})
	defer close(release)
	c, err := loadtest.NewClient(srv.URL, loadtest.ClientOptions{Timeout: 200 * time.Millisecond, MaxBody: 1000})
	if err != nil {
		t.Fatal(err)
	}

	_, _, err = c.Post(t.Context(), "/slow", nil, nil)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("a request past the timeout: %v, want a timeout", err)
	}
	// A cancelled request ends then, long before a timeout of a minute.
	patient, err := loadtest.NewClient(srv.URL, loadtest.ClientOptions{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer patient.Close()
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	if _, _, err = patient.Post(ctx, "/slow", nil, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled request: %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("the cancelled request returned after %v", d)
	}
	if _, _, err = c.Post(t.Context(), "/large", nil, nil); err == nil || !strings.Contains(err.Error(), "exceeds 1000 bytes") {
		t.Errorf("an answer over MaxBody: %v", err)
	}
	if _, _, err = c.Post(t.Context(), "/hangup", nil, nil); err == nil {
		t.Error("a connection closed without an answer gave no error")
	}
	if _, _, err = c.Post(t.Context(), "/", nil, nil, "X-Odd"); err == nil {
		t.Error("an odd header list was accepted")
	}
	if _, _, err = c.Post(t.Context(), "/", nil, nil, "X-Bad", "a\r\nX-Injected: 1"); err == nil {
		t.Error("a header value with a line break was accepted")
	}
	// After all that, the client still works.
	if status, got, err := c.Post(t.Context(), "/", nil, nil); err != nil || status != http.StatusOK || string(got) != "ok" {
		t.Errorf("a request after the failures: %d %q %v", status, got, err)
	}
	c.Close()
	if _, _, err = c.Post(t.Context(), "/", nil, nil); err == nil {
		t.Error("a request after Close was accepted")
	}

	for _, u := range []string{"https://127.0.0.1:1", "http://", "http://h/p?q=1", "http://u:p@h", "://x", "ftp://h"} {
		if _, err := loadtest.NewClient(u, loadtest.ClientOptions{}); err == nil {
			t.Errorf("NewClient(%q) accepted it", u)
		}
	}
	if _, err := loadtest.NewClient("http://h", loadtest.ClientOptions{Header: http.Header{"X": {"a\nb"}}}); err == nil {
		t.Error("NewClient accepted a header value with a line break")
	}
	if _, _, err := mustClient(t, "http://127.0.0.1:1").Post(t.Context(), "/", nil, nil); err == nil {
		t.Error("a request to a closed port gave no error")
	}
}

func mustClient(t *testing.T, u string) *loadtest.Client {
	t.Helper()
	c, err := loadtest.NewClient(u, loadtest.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// TestClientAnswers feeds the client raw answers from a loopback listener.
func TestClientAnswers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		answer string
		status int
		body   string
		err    string
	}{
		{"length", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", 200, "hello", ""},
		{"lower-case names, LF only", "HTTP/1.1 201 Created\ncontent-length: 2\n\nok", 201, "ok", ""},
		{"chunked with extension and trailer", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\nA\r\n0123456789\r\n0\r\nX-Trailer: 1\r\n\r\n", 200, "abc0123456789", ""},
		{"to the end", "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil closed", 200, "until closed", ""},
		{"no content", "HTTP/1.1 204 No Content\r\n\r\n", 204, "", ""},
		{"HTTP/1.0", "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", 200, "ok", ""},
		{"not HTTP", "SSH-2.0-x\r\n\r\n", 0, "", "malformed status line"},
		{"bad code", "HTTP/1.1 2x0 OK\r\n\r\n", 0, "", "malformed status line"},
		{"bad length", "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", 200, "", "malformed Content-Length"},
		{"bad chunk", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 200, "", "malformed chunk size"},
		{"gzip", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", 200, "", "unsupported Transfer-Encoding"},
		{"header without colon", "HTTP/1.1 200 OK\r\nnonsense\r\n\r\n", 200, "", "malformed header line"},
		{"interim", "HTTP/1.1 100 Continue\r\n\r\n", 100, "", "unexpected interim answer"},
		{"short body", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", 200, "abc", "unexpected EOF"},
		{"over the limit", "HTTP/1.1 200 OK\r\nContent-Length: 2000\r\n\r\n", 200, "", "exceeds 1000 bytes"},
		{"chunks over the limit", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3E8\r\n" + strings.Repeat("x", 1000) + "\r\n1\r\nx\r\n0\r\n\r\n", 200, "", "exceeds 1000 bytes"},
		{"to the end over the limit", "HTTP/1.1 200 OK\r\n\r\n" + strings.Repeat("x", 1001), 200, "", "exceeds 1000 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			go func() {
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				defer conn.Close()
				buf := make([]byte, 4096)
				_, _ = conn.Read(buf) // the request
				_, _ = io.WriteString(conn, tt.answer)
			}()
			c, err := loadtest.NewClient("http://"+ln.Addr().String(), loadtest.ClientOptions{MaxBody: 1000, Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			status, got, err := c.Post(t.Context(), "/", []byte("{}"), nil)
			switch {
			case tt.err == "" && err != nil:
				t.Fatalf("error %v", err)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Fatalf("error %v, want one saying %q", err, tt.err)
			case tt.err == "" && (status != tt.status || string(got) != tt.body):
				t.Errorf("got %d %q, want %d %q", status, got, tt.status, tt.body)
			}
		})
	}
}

// TestClientDeadIdleConnections: when the server closed several kept
// connections, the retry dials instead of taking the next dead one.
func TestClientDeadIdleConnections(t *testing.T) {
	t.Parallel()
	hold := make(chan struct{})
	var inFlight atomic.Int64
	srv, _ := echoServer(t, func(w http.ResponseWriter, r *http.Request) {
		if inFlight.Add(1) == 1 && r.URL.Path == "/pair" {
			<-hold // keeps the first of two concurrent requests, so both conns stay
		}
		inFlight.Add(-1)
		_, _ = io.Copy(w, r.Body)
	})
	c := mustClient(t, srv.URL)
	done := make(chan error, 1)
	go func() { _, _, err := c.Post(t.Context(), "/pair", []byte("a"), nil); done <- err }()
	for inFlight.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	if _, _, err := c.Post(t.Context(), "/pair", []byte("b"), nil); err != nil {
		t.Fatal(err)
	}
	close(hold)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Two idle connections now; the server closes both.
	srv.CloseClientConnections()
	status, got, err := c.Post(t.Context(), "/", []byte("after"), nil)
	if err != nil || status != http.StatusOK || string(got) != "after" {
		t.Errorf("a post after the server closed the idle connections: %d %q %v", status, got, err)
	}
}

// rawServer answers each connection's first request with answer, then
// keeps reading (closeAfter false) or closes.
func rawServer(t *testing.T, answer string, closeAfter bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				buf := make([]byte, 512)
				_, _ = conn.Read(buf) // the request's start only
				_, _ = io.WriteString(conn, answer)
				if !closeAfter {
					_, _ = io.Copy(io.Discard, conn)
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

func TestClientAnswerEdges(t *testing.T) {
	t.Parallel()
	// The limit counts the body, not what dst held before it.
	c, err := loadtest.NewClient(rawServer(t, "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n0123456789abcdef", true), loadtest.ClientOptions{MaxBody: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, got, err := c.Post(t.Context(), "/", nil, []byte("prefix")); err == nil || !strings.Contains(err.Error(), "exceeds 10 bytes") {
		t.Errorf("an answer to the end over the limit after a prefix: %q, %v", got, err)
	}
	c2, err := loadtest.NewClient(rawServer(t, "HTTP/1.1 200 OK\r\nContent-Length: 9223372036854775807\r\n\r\n", true), loadtest.ClientOptions{MaxBody: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, _, err := c2.Post(t.Context(), "/", nil, []byte("x")); err == nil || !strings.Contains(err.Error(), "exceeds 10 bytes") {
		t.Errorf("a huge Content-Length after a prefix: %v", err)
	}
	// Bytes past the answer: the connection is not kept, so the next
	// request reads its own answer.
	extra := mustClient(t, rawServer(t, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 500 Stray\r\nContent-Length: 0\r\n\r\n", false))
	for i := range 2 {
		if status, got, err := extra.Post(t.Context(), "/", nil, nil); err != nil || status != 200 || string(got) != "ok" {
			t.Errorf("post %d to a server sending bytes past its answer: %d %q %v", i, status, got, err)
		}
	}
	// An answer sent before the body was read (413) and the connection
	// closed: the answer is the outcome, not the failed write.
	early := mustClient(t, rawServer(t, "HTTP/1.1 413 Request Entity Too Large\r\nContent-Length: 3\r\nConnection: close\r\n\r\nbig", true))
	status, got, err := early.Post(t.Context(), "/", bytes.Repeat([]byte("x"), 8<<20), nil)
	if err != nil || status != http.StatusRequestEntityTooLarge || string(got) != "big" {
		t.Errorf("an early 413: %d %q %v", status, got, err)
	}
}
