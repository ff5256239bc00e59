package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5"

	"github.com/turnd/turnd/internal/bench"
)

// ErrNoPostgres is returned by StartCluster when the PostgreSQL server
// binaries are not installed.
var ErrNoPostgres = errors.New("chaos: the PostgreSQL server binaries (initdb, pg_ctl) are not installed")

// Cluster is a throwaway PostgreSQL cluster in a directory of its own,
// listening on one loopback port for its whole life, so that it can be
// stopped (fast or immediate) and started again under the same URL.
type Cluster struct {
	// URL reaches the cluster's postgres database as its superuser.
	URL  string
	bin  string
	dir  string
	port int
	cred *syscall.Credential // the postgres user's, when run as root
}

// StartCluster makes a cluster with initdb in a new directory under parent
// and starts it. As root it runs the server as the postgres user, which
// initdb requires.
func StartCluster(ctx context.Context, parent string) (*Cluster, error) {
	bin, ok := bench.PostgresBinDir()
	if !ok {
		return nil, ErrNoPostgres
	}
	dir, err := os.MkdirTemp(parent, "pg-")
	if err != nil {
		return nil, fmt.Errorf("chaos: cluster: %w", err)
	}
	c := &Cluster{bin: bin, dir: dir}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(dir)
			return nil, errors.New("chaos: cluster: running as root and there is no postgres user to run the server as")
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		for _, d := range []string{parent, dir} {
			if err := os.Chmod(d, 0o755); err != nil {
				os.RemoveAll(dir)
				return nil, fmt.Errorf("chaos: cluster: %w", err)
			}
		}
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("chaos: cluster: %w", err)
		}
	}
	if out, err := c.command(ctx, "initdb", "-D", c.data(), "-A", "trust", "-U", "turnd", "-E", "UTF8", "--no-locale").CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("chaos: initdb: %v\n%s", err, out)
	}
	// The port was free a moment ago; another process may take it before
	// the server binds it, so a start that cannot bind tries another.
	for attempt := 1; ; attempt++ {
		if c.port, err = freePort(); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		err = c.Start(ctx)
		if err == nil {
			break
		}
		if attempt == 3 || !strings.Contains(err.Error(), "Address already in use") {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	c.URL = fmt.Sprintf("postgres://turnd@127.0.0.1:%d/postgres?sslmode=disable", c.port)
	return c, nil
}

func (c *Cluster) data() string { return filepath.Join(c.dir, "data") }

func (c *Cluster) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, name), args...)
	cmd.Dir = c.dir
	// A process group of its own: a Ctrl-C of the test does not reach
	// the server before the test stops it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: c.cred}
	return cmd
}

// Start starts the (stopped) cluster on its port and waits until it
// accepts connections. fsync is off: the experiments crash the server,
// never the machine, and a stop -m immediate still makes the next start
// replay the WAL.
func (c *Cluster) Start(ctx context.Context) error {
	logPath := filepath.Join(c.dir, "server.log")
	opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c max_connections=200 -c fsync=off", c.port, c.dir)
	out, err := c.command(ctx, "pg_ctl", "-D", c.data(), "-l", logPath, "-w", "-t", "60", "start", "-o", opts).CombinedOutput()
	if err != nil {
		log, _ := os.ReadFile(logPath)
		if len(log) > 4096 {
			log = log[len(log)-4096:]
		}
		return fmt.Errorf("chaos: pg_ctl start: %v\n%s\n%s", err, out, log)
	}
	return nil
}

// Stop stops the cluster with pg_ctl's mode: "fast" (clients are
// disconnected, a checkpoint is written) or "immediate" (the server is
// killed; the next start recovers from the WAL).
func (c *Cluster) Stop(ctx context.Context, mode string) error {
	out, err := c.command(ctx, "pg_ctl", "-D", c.data(), "-m", mode, "-w", "-t", "60", "stop").CombinedOutput()
	if err != nil {
		return fmt.Errorf("chaos: pg_ctl stop -m %s: %v\n%s", mode, err, out)
	}
	return nil
}

// Remove stops the cluster at once, if it runs, and removes its directory.
func (c *Cluster) Remove() error {
	// A cluster already stopped makes pg_ctl fail; only the removal counts.
	_ = c.command(context.Background(), "pg_ctl", "-D", c.data(), "-m", "immediate", "-w", "stop").Run()
	if err := os.RemoveAll(c.dir); err != nil {
		return fmt.Errorf("chaos: removing the cluster: %w", err)
	}
	return nil
}

// CreateDatabase creates a database of the given name and returns its URL.
// Each experiment has its own, so that each turnd migrates a fresh schema.
func (c *Cluster) CreateDatabase(ctx context.Context, name string) (string, error) {
	conn, err := pgx.Connect(ctx, c.URL)
	if err != nil {
		return "", fmt.Errorf("chaos: creating database %s: %w", name, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("chaos: creating database %s: %w", name, err)
	}
	return fmt.Sprintf("postgres://turnd@127.0.0.1:%d/%s?sslmode=disable", c.port, name), nil
}

// freePort returns a loopback port that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("chaos: finding a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
