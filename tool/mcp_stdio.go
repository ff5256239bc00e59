package tool

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const (
	// mcpStopGrace is how long a stdio MCP server has to exit after turnd
	// closes its stdin, and again after SIGTERM, before it is killed.
	mcpStopGrace = 3 * time.Second

	// mcpStderrLine caps one forwarded line of a server's stderr; the rest
	// of the line is dropped.
	mcpStderrLine = 4 << 10

	// mcpPipeDrain bounds the wait for a server's stderr to close after it
	// exits and its process group is killed (a process that left the group
	// may still hold it).
	mcpPipeDrain = time.Second
)

// key identifies the process: a reload that changes none of it keeps the
// running one.
func (c *stdioCommand) key() string {
	var b strings.Builder
	b.WriteString("stdio\x00")
	for _, a := range c.argv {
		b.WriteString(a + "\x00")
	}
	b.WriteString("\x01")
	for _, e := range c.env {
		b.WriteString(e + "\x00")
	}
	b.WriteString("\x01" + c.dir)
	return b.String()
}

// name is the program's base name: fit for logs (the arguments and the
// environment may hold secrets).
func (c *stdioCommand) name() string {
	return "stdio:" + filepath.Base(c.argv[0])
}

// processTransport runs a stdio MCP server as a child process through the
// SDK's CommandTransport, which closes its stdin and then signals it to
// stop. Around it: the child leads a process group of its own, which is
// killed when the connection closes, so that no process it started
// outlives it; its stderr goes to the log at debug level.
type processTransport struct {
	cmd   *stdioCommand
	log   *slog.Logger
	grace time.Duration

	conn *processConn // the one Connect made
}

// Connect starts the process.
func (t *processTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	cmd := exec.Command(t.cmd.argv[0], t.cmd.argv[1:]...)
	cmd.Env = t.cmd.env
	if cmd.Env == nil {
		cmd.Env = []string{} // nil would mean turnd's whole environment
	}
	cmd.Dir = t.cmd.dir
	cmd.SysProcAttr = childProcAttr()
	// A pipe of turnd's own, not an io.Writer: Wait would wait for every
	// process holding its write end (what the server started, too).
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = pw
	inner := &mcp.CommandTransport{Command: cmd, TerminateDuration: t.grace}
	conn, err := inner.Connect(ctx)
	pw.Close() // the child has its copy
	if err != nil {
		pr.Close()
		if cmd.Process != nil {
			killGroup(cmd)
		}
		return nil, err
	}
	stderr := &stderrLog{log: t.log, done: make(chan struct{})}
	go stderr.read(pr)
	t.log.Info("MCP server process started", "pid", cmd.Process.Pid)
	t.conn = &processConn{Connection: conn, cmd: cmd, stderr: stderr, pipe: pr}
	return t.conn, nil
}

// processConn is the connection to one child process.
type processConn struct {
	mcp.Connection
	cmd    *exec.Cmd
	stderr *stderrLog
	pipe   *os.File // the read end of its stderr
	once   sync.Once
	status string // how the process ended; set once Close has returned
}

// Close stops the process (the SDK's Close: stdin closed, then SIGTERM,
// then SIGKILL) and then kills what is left of its process group. The SDK
// also calls it when the process exits by itself.
func (c *processConn) Close() error {
	err := c.Connection.Close()
	c.once.Do(func() {
		killGroup(c.cmd)
		// The pipe ends when the last process holding it does; one that
		// left the group (setsid) is not waited for long.
		t := time.NewTimer(mcpPipeDrain)
		select {
		case <-c.stderr.done:
		case <-t.C:
			c.pipe.Close()
			<-c.stderr.done
		}
		t.Stop()
		c.stderr.flush()
		c.status = exitStatus(err)
	})
	return err
}

// exitStatus describes how a process ended from the error of the SDK's
// Close, which is Wait's.
func exitStatus(err error) string {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return "exit status 0"
	case errors.As(err, &ee):
		return ee.ProcessState.String()
	}
	return err.Error()
}

// stderrLog writes each line a server prints on stderr to the log at debug
// level.
type stderrLog struct {
	log  *slog.Logger
	done chan struct{} // closed when read returns

	mu  sync.Mutex
	buf []byte
	cut bool // the current line was cut at mcpStderrLine
}

func (w *stderrLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if room := mcpStderrLine - len(w.buf); len(chunk) > room {
			chunk, w.cut = chunk[:room], true
		}
		w.buf = append(w.buf, chunk...)
		if i < 0 {
			break
		}
		w.emit()
		p = p[i+1:]
	}
	return n, nil
}

// emit logs the line held (w.mu held).
func (w *stderrLog) emit() {
	line := strings.ToValidUTF8(strings.TrimRight(string(w.buf), "\r"), string(utf8.RuneError))
	if w.cut {
		line += "…"
	}
	w.log.Debug("MCP server stderr", "line", line)
	w.buf, w.cut = w.buf[:0], false
}

// read copies r to the log until r ends, then closes it.
func (w *stderrLog) read(r *os.File) {
	defer close(w.done)
	_, _ = io.Copy(w, r)
	r.Close()
}

// flush logs an unfinished last line.
func (w *stderrLog) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.emit()
	}
}

// describeRestart says when a process that exited runs again.
func describeRestart(at time.Time, now time.Time) string {
	if d := at.Sub(now); d > 0 {
		return fmt.Sprintf("turnd starts it again in %s", d.Round(time.Millisecond))
	}
	return "turnd starts it again after a backoff"
}
