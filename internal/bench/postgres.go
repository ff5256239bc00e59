package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Postgres is a throwaway PostgreSQL cluster: made by initdb in a
// directory of its own, listening on a free loopback port, removed by
// Stop. It is what scripts/pg.sh makes for the tests, started from Go.
type Postgres struct {
	URL     string
	Version string // of the server binaries, such as "17.2"
	bin     string
	dir     string
	cred    *syscall.Credential // the postgres user's, when run as root
}

// PostgresBinDir returns the directory of the PostgreSQL server binaries:
// that of pg_ctl on the PATH (followed through links, to the version's own
// directory, which holds its initdb and pgbench), else the newest
// /usr/lib/postgresql/*/bin (Debian's layout). ok is false when there are
// none.
func PostgresBinDir() (string, bool) {
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		if _, err := exec.LookPath(filepath.Join(filepath.Dir(p), "initdb")); err == nil {
			return filepath.Dir(p), true
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return vb - va
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, true
		}
	}
	return "", false
}

// StartPostgres makes and starts a cluster in a new directory under
// parent with the server binaries in bin. As root it runs them as the
// postgres user (initdb refuses root). The cluster has the defaults that
// matter here: synchronous_commit on, fsync on. With statements it
// preloads pg_stat_statements, when the installation has it.
func StartPostgres(ctx context.Context, bin, parent string, statements bool) (*Postgres, error) {
	dir, err := os.MkdirTemp(parent, "pg-")
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	p := &Postgres{bin: bin, dir: dir}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(dir)
			return nil, errors.New("postgres: running as root, and there is no postgres user to run initdb as")
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		p.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		// The postgres user must reach the directory: parent is ours.
		for _, d := range []string{parent, dir} {
			if err := os.Chmod(d, 0o755); err != nil {
				os.RemoveAll(dir)
				return nil, fmt.Errorf("postgres: %w", err)
			}
		}
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("postgres: %w", err)
		}
	}
	if out, err := p.command(ctx, "postgres", "--version").CombinedOutput(); err == nil {
		// "postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)"
		if f := strings.Fields(string(out)); len(f) >= 3 {
			p.Version = f[2]
		}
	}
	data := filepath.Join(dir, "data")
	if out, err := p.command(ctx, "initdb", "-D", data, "-A", "trust", "-U", "turnd", "-E", "UTF8", "--no-locale").CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("postgres: initdb: %v\n%s", err, out)
	}
	// The port was free a moment ago; another process may take it before
	// the server binds it, so a failed start is tried again on another.
	var port string
	for attempt := 1; ; attempt++ {
		addr, err := freeLoopbackAddr()
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		port = addr[strings.LastIndexByte(addr, ':')+1:]
		opts := "-c listen_addresses=127.0.0.1 -p " + port + " -k " + dir + " -c max_connections=300 -c shared_buffers=128MB"
		if statements && HasStatementsLibrary(bin) {
			opts += " -c shared_preload_libraries=pg_stat_statements"
		}
		logPath := filepath.Join(dir, "server.log")
		start := p.command(ctx, "pg_ctl", "-D", data, "-l", logPath, "-w", "-t", "60", "start", "-o", opts)
		out, err := start.CombinedOutput()
		if err == nil {
			break
		}
		log, _ := os.ReadFile(logPath)
		if attempt < 3 && strings.Contains(string(log), "Address already in use") {
			continue
		}
		os.RemoveAll(dir)
		return nil, fmt.Errorf("postgres: pg_ctl start: %v\n%s\n%s", err, out, log)
	}
	p.URL = "postgres://turnd@127.0.0.1:" + port + "/postgres?sslmode=disable"
	return p, nil
}

func (p *Postgres) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(p.bin, name), args...)
	cmd.Dir = p.dir
	// A process group of its own, as for turnd (StartServer); as root, the
	// postgres user.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: p.cred}
	return cmd
}

// Stop stops the cluster at once (its data is thrown away) and removes
// its directory.
func (p *Postgres) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := p.command(ctx, "pg_ctl", "-D", filepath.Join(p.dir, "data"), "-m", "immediate", "-w", "stop").CombinedOutput()
	if rerr := os.RemoveAll(p.dir); rerr != nil {
		err = errors.Join(err, rerr)
	}
	if err != nil {
		return fmt.Errorf("postgres: stopping: %v\n%s", err, out)
	}
	return nil
}

// HasStatementsLibrary reports whether the installation whose server
// binaries are in bin has pg_stat_statements' library: in the directory
// its pg_config names (--pkglibdir), else in that of Debian's layout
// (bin/../lib) or of a build from source (bin/../lib/postgresql).
// Preloading a library that is not there stops the server from starting.
func HasStatementsLibrary(bin string) bool {
	dirs := []string{filepath.Join(filepath.Dir(bin), "lib"), filepath.Join(filepath.Dir(bin), "lib", "postgresql")}
	if out, err := exec.Command(filepath.Join(bin, "pg_config"), "--pkglibdir").Output(); err == nil {
		dirs = append([]string{strings.TrimSpace(string(out))}, dirs...)
	}
	for _, dir := range dirs {
		for _, ext := range []string{".so", ".dylib"} {
			if _, err := os.Stat(filepath.Join(dir, "pg_stat_statements"+ext)); err == nil {
				return true
			}
		}
	}
	return false
}
