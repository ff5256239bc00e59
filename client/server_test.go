package client_test

// The tests run against a real `turnd serve`: the binary is built once,
// started on a free loopback port with the demo tools (examples/turnd.yaml)
// on the embedded SQLite store and, when DATABASE_URL is set, on a fresh
// PostgreSQL schema; it is killed in t.Cleanup. Waiting for the child is
// bounded polling: it is an external process, with no channel to wait on.

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turnd/turnd/client"
	"github.com/turnd/turnd/internal/pgtest"
	"github.com/turnd/turnd/internal/testnet"
	"github.com/turnd/turnd/internal/turndbin"
)

func TestMain(m *testing.M) { turndbin.Main(m) }

var build turndbin.Build

func turndBinary(t testing.TB) string {
	t.Helper()
	// TURND_TEST_BIN runs the tests against another build (an older
	// server, or a branch's).
	if bin := os.Getenv("TURND_TEST_BIN"); bin != "" {
		return bin
	}
	return build.Binary(t)
}

// server is a running `turnd serve`.
type server struct {
	URL string

	mu   sync.Mutex
	logs []map[string]any
	keys chan string // complete_url of each approval, as logged
}

type store string

const (
	sqlite   store = "sqlite"
	postgres store = "postgres"
)

// stores are the stores to test against: SQLite always, PostgreSQL when
// DATABASE_URL is set.
func stores() []store {
	if os.Getenv("DATABASE_URL") != "" {
		return []store{sqlite, postgres}
	}
	return []store{sqlite}
}

// startServer starts a turnd on st with extra environment.
func startServer(t testing.TB, st store, env ...string) *server {
	t.Helper()
	return startServerConfig(t, st, "../examples/turnd.yaml", env...)
}

// startServerConfig starts a turnd on st with the tool config at config.
func startServerConfig(t testing.TB, st store, config string, env ...string) *server {
	t.Helper()
	addr := testnet.ClosedAddr(t)
	args := []string{"serve", "--addr", addr, "--log-format", "json", "--config", config, "--demo"}
	childEnv := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	switch st {
	case postgres:
		childEnv = append(childEnv, "DATABASE_URL="+pgtest.URL(t))
	default:
		args = append(args, "--data", filepath.Join(t.TempDir(), "turnd.db"))
	}
	cmd := exec.Command(turndBinary(t), args...)
	cmd.Env = append(childEnv, env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &server{URL: "http://" + addr, keys: make(chan string, 64)}
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) != nil {
				continue
			}
			s.mu.Lock()
			s.logs = append(s.logs, m)
			s.mu.Unlock()
			if u, ok := m["complete_url"].(string); ok {
				s.keys <- u
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-read
		_ = cmd.Wait()
		if t.Failed() {
			s.mu.Lock()
			for _, l := range s.logs {
				t.Logf("turnd: %v", l)
			}
			s.mu.Unlock()
		}
	})
	c := newClient(t, s.URL)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ready(ctx)
		cancel()
		if err == nil {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("turnd on %s not ready within 30s: %v", st, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// completeURL waits (bounded) for the next approval's complete_url.
func (s *server) completeURL(t testing.TB) string {
	t.Helper()
	select {
	case u := <-s.keys:
		return u
	case <-time.After(30 * time.Second):
		t.Fatal("no approval was logged within 30s")
		return ""
	}
}

// newClient returns a client whose idle connections are closed in
// t.Cleanup (goleak checks for leftover connection goroutines).
func newClient(t testing.TB, url string, opts ...client.Option) *client.Client {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	c, err := client.New(url, append([]client.Option{client.WithHTTPClient(&http.Client{Transport: tr})}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func ctxFor(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func args(t testing.TB, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func hasPrefix(s, p string) bool { return strings.HasPrefix(s, p) }
