package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/turnd/turnd/internal/loadtest"
)

// ServerConfig says how StartServer starts a turnd.
type ServerConfig struct {
	// Binary is the turnd executable (os.Executable for `turnd bench`).
	Binary string
	// Dir is a directory for the tool config, the log and the SQLite file.
	Dir string
	// DatabaseURL selects PostgreSQL; empty uses SQLite in Dir.
	DatabaseURL string
	// ToolConfig is the tool config YAML.
	ToolConfig []byte
	// Env is the child's environment before turnd's own settings; nil
	// takes this process's, without its TURND_* and DATABASE_URL* (they
	// would override what the bench sets up).
	Env []string
}

// Server is a `turnd serve` child process on a loopback port.
type Server struct {
	URL     string
	LogPath string
	cmd     *exec.Cmd
	done    chan error // the child's exit
}

// readyTimeout bounds waiting for a started turnd to answer /readyz
// (migrations included).
const readyTimeout = 60 * time.Second

// StartServer starts `turnd serve` as a child process on a free loopback
// port, without API tokens, logging warnings and errors (JSON) to
// server.log in Dir, and waits until it answers GET /readyz.
func StartServer(ctx context.Context, c ServerConfig) (*Server, error) {
	addr, err := freeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(c.Dir, "tools.yaml")
	if err := os.WriteFile(cfgPath, c.ToolConfig, 0o600); err != nil {
		return nil, fmt.Errorf("writing the tool config: %w", err)
	}
	logPath := filepath.Join(c.Dir, "server.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("creating the server log: %w", err)
	}
	defer logf.Close() // the child has its own descriptor
	env := c.Env
	if env == nil {
		env = ChildEnv()
	}
	env = append(env[:len(env):len(env)],
		"TURND_ADDR="+addr, "TURND_CONFIG="+cfgPath, "TURND_LOG_FORMAT=json", "TURND_LOG_LEVEL=warn")
	if c.DatabaseURL != "" {
		env = append(env, "DATABASE_URL="+c.DatabaseURL)
	} else {
		env = append(env, "TURND_DATA="+filepath.Join(c.Dir, "turnd.db"))
	}
	cmd := exec.Command(c.Binary, "serve")
	cmd.Env = env
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.Dir = c.Dir
	// A group of its own: a Ctrl-C at the terminal reaches the bench only,
	// which reports what it measured and then stops turnd itself.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s serve: %w", c.Binary, err)
	}
	s := &Server{URL: "http://" + addr, LogPath: logPath, cmd: cmd, done: make(chan error, 1)}
	go func() { s.done <- cmd.Wait() }()
	if err := s.waitReady(ctx); err != nil {
		_ = s.Stop()
		return nil, fmt.Errorf("%w\n%s", err, s.LogTail(20))
	}
	return s, nil
}

// ChildEnv is this process's environment without TURND_* and
// DATABASE_URL*.
func ChildEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "TURND_") || strings.HasPrefix(k, "DATABASE_URL") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// waitReady polls GET /readyz (the child is another process: there is
// nothing to wait on but its answers) until it answers 200, the child
// exits, or readyTimeout passes.
func (s *Server) waitReady(ctx context.Context) error {
	client := &http.Client{Timeout: 2 * time.Second}
	defer client.CloseIdleConnections()
	deadline := time.Now().Add(readyTimeout)
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/readyz", nil)
		if resp, err := client.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("turnd did not become ready within %v", readyTimeout)
		}
		select {
		case err := <-s.done:
			s.done <- err
			return fmt.Errorf("turnd exited before it was ready: %v", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// PID is the child's process id.
func (s *Server) PID() int { return s.cmd.Process.Pid }

// Stop sends SIGTERM and waits up to 30s for the child to exit, then
// kills it.
func (s *Server) Stop() error {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(30 * time.Second)
	defer t.Stop()
	select {
	case err := <-s.done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return fmt.Errorf("turnd exited with %v", ee)
		}
		return err
	case <-t.C:
		_ = s.cmd.Process.Kill()
		<-s.done
		return errors.New("turnd did not stop within 30s of SIGTERM and was killed")
	}
}

// LogTail returns the last n lines of the server's log.
func (s *Server) LogTail(n int) string {
	f, err := os.Open(s.LogPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// ProcRSS reads the child's current and peak RSS from /proc.
func (s *Server) ProcRSS() (rss, peak int64, err error) {
	if rss, err = loadtest.RSS(s.PID()); err != nil {
		return 0, 0, err
	}
	peak, err = loadtest.PeakRSS(s.PID())
	return rss, peak, err
}

func freeLoopbackAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("finding a free loopback port: %w", err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr, nil
}

// MetricsRSS reads process_resident_memory_bytes from turnd's Prometheus
// endpoint at base+"/metrics". ok is false when there is no such endpoint
// or metric.
func MetricsRSS(ctx context.Context, base, token string) (rss int64, ok bool) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+"/metrics", nil)
	if err != nil {
		return 0, false
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	client := &http.Client{}
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, false
	}
	return parseMetricsRSS(io.LimitReader(resp.Body, 8<<20))
}

// parseMetricsRSS finds the process_resident_memory_bytes sample in a
// Prometheus text exposition.
func parseMetricsRSS(r io.Reader) (int64, bool) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "process_resident_memory_bytes")
		if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		if i := strings.LastIndexByte(rest, '}'); i >= 0 {
			rest = rest[i+1:]
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil || v < 0 {
			continue
		}
		return int64(v), true
	}
	return 0, false
}
