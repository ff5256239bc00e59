package chaos

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Build builds the turnd binary into dir and returns its path. The binary
// is built without the race detector: the experiments measure the
// process's memory and load it hard.
func Build(ctx context.Context, dir string) (string, error) {
	path := filepath.Join(dir, "turnd")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", path, "github.com/turnd/turnd/cmd/turnd")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("chaos: go build: %v\n%s", err, out)
	}
	return path, nil
}

// readyTimeout bounds how long a starting turnd may take to answer /readyz.
const readyTimeout = 60 * time.Second

// Turnd is one `turnd serve` on a loopback address, which it keeps over
// restarts: a client of a killed process reaches the restarted one.
type Turnd struct {
	Name string
	Addr string // host:port
	Base string // http://host:port
	bin  string
	args []string
	env  []string
	log  *tailBuffer

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	peak   int64 // the highest VmHWM (kB) read from any of its lives
	starts int
}

// NewTurnd describes a turnd of binary bin on a free loopback port with
// the serve flags args (after --addr and --log-format). env is added to
// an environment without TURND_* and DATABASE_URL*.
func NewTurnd(name, bin string, args, env []string) (*Turnd, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	return &Turnd{
		Name: name, Addr: addr, Base: "http://" + addr,
		bin: bin, args: args, env: childEnv(env), log: &tailBuffer{max: 1 << 20},
	}, nil
}

func childEnv(extra []string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "TURND_") || strings.HasPrefix(k, "DATABASE_URL") || k == "GOMEMLIMIT" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// Start starts the process and waits (bounded) until /readyz answers 200.
func (p *Turnd) Start(ctx context.Context) error {
	p.mu.Lock()
	if p.cmd != nil && !p.exitedLocked() {
		p.mu.Unlock()
		return fmt.Errorf("chaos: %s is already running", p.Name)
	}
	args := append([]string{"serve", "--addr", p.Addr, "--log-format", "json"}, p.args...)
	cmd := exec.Command(p.bin, args...)
	cmd.Env = p.env
	cmd.Stdout, cmd.Stderr = p.log, p.log
	if err := cmd.Start(); err != nil {
		p.mu.Unlock()
		return fmt.Errorf("chaos: starting %s: %w", p.Name, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	p.cmd, p.exited = cmd, exited
	p.starts++
	p.mu.Unlock()
	return p.waitReady(ctx, exited)
}

func (p *Turnd) exitedLocked() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

func (p *Turnd) waitReady(ctx context.Context, exited chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.Base+"/readyz", nil)
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-exited:
			return fmt.Errorf("chaos: %s exited before it was ready:\n%s", p.Name, p.log.Tail(4096))
		case <-ctx.Done():
			return fmt.Errorf("chaos: %s not ready within %v (last: %v)", p.Name, readyTimeout, err)
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// Alive reports whether the process runs.
func (p *Turnd) Alive() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil && !p.exitedLocked()
}

// Pid returns the running process's id, 0 when none runs.
func (p *Turnd) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.exitedLocked() {
		return 0
	}
	return p.cmd.Process.Pid
}

// Starts returns how many times the process was started.
func (p *Turnd) Starts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starts
}

// PeakRSS returns the highest resident set (VmHWM, bytes) of any life of
// the process so far, the running one included.
func (p *Turnd) PeakRSS() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.samplePeakLocked()
	return p.peak * 1024
}

func (p *Turnd) samplePeakLocked() {
	if p.cmd == nil || p.exitedLocked() {
		return
	}
	if kb, err := vmHWM(p.cmd.Process.Pid); err == nil && kb > p.peak {
		p.peak = kb
	}
}

// vmHWM reads a process's peak resident set size in kB from
// /proc/PID/status (Linux).
func vmHWM(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			return strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		}
	}
	return 0, fmt.Errorf("chaos: no VmHWM in /proc/%d/status", pid)
}

// Kill sends SIGKILL (after reading the process's peak memory) and waits
// for the process to end: a crash, with no shutdown at all.
func (p *Turnd) Kill() error { return p.signalAndWait(syscall.SIGKILL, 20*time.Second) }

// Stop sends SIGTERM and waits (bounded) for the process to end.
func (p *Turnd) Stop() error { return p.signalAndWait(syscall.SIGTERM, 60*time.Second) }

func (p *Turnd) signalAndWait(sig syscall.Signal, bound time.Duration) error {
	p.mu.Lock()
	if p.cmd == nil || p.exitedLocked() {
		p.mu.Unlock()
		return nil
	}
	p.samplePeakLocked()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if err := cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("chaos: signalling %s: %w", p.Name, err)
	}
	select {
	case <-exited:
		return nil
	case <-time.After(bound):
		_ = cmd.Process.Kill()
		<-exited
		return fmt.Errorf("chaos: %s did not exit within %v of %v", p.Name, bound, sig)
	}
}

// Log returns the last bytes of the process's output (all its lives).
func (p *Turnd) Log(n int) string { return p.log.Tail(n) }

// tailBuffer keeps the last max bytes (or a little more) written to it:
// a long run logs more than a test should hold.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > 2*t.max {
		t.b = append(t.b[:0:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

// Tail returns the last n bytes written, from a line start when it can.
func (t *tailBuffer) Tail(n int) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.b
	if len(b) > n {
		b = b[len(b)-n:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return string(b)
}

// Count returns how many times s occurs in the kept output.
func (t *tailBuffer) Count(s string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return bytes.Count(t.b, []byte(s))
}
