package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// long is CHAOS_LONG=1 (`make chaos`): long loops instead of short ones.
var long = os.Getenv("CHAOS_LONG") != ""

// size picks an experiment's figure for the mode.
func size[T any](inShort, inLong T) T {
	if long {
		return inLong
	}
	return inShort
}

// rssBound is the most resident memory a turnd may reach in an
// experiment; poisonRSSBound in the one whose tool sends 1 GiB, of which
// turnd keeps up to 64 MiB (the full output it stores) at GOGC=400: not
// the body whole, nor half of it.
const (
	rssBound       = 256 << 20
	poisonRSSBound = 512 << 20
)

var (
	tmpDir string

	buildOnce sync.Once
	binPath   string
	buildErr  error

	clusterOnce sync.Once
	cluster     *Cluster
	clusterErr  error

	// pgLock is held shared by experiments that use the cluster and
	// exclusively by the one that stops it.
	pgLock sync.RWMutex

	client = NewClient(2 * time.Minute)
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "turnd-chaos-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	tmpDir = dir
	code := m.Run()
	if cluster != nil {
		if err := cluster.Remove(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.RemoveAll(dir)
	client.CloseIdle()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// binary builds turnd once, on first use.
func binary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		binPath, buildErr = Build(ctx, tmpDir)
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// database returns the URL of a new database of the test's own on the
// suite's cluster, started on first use; it skips the test when the
// PostgreSQL server binaries are not installed.
func database(t *testing.T) string {
	t.Helper()
	clusterOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cluster, clusterErr = StartCluster(ctx, tmpDir)
	})
	if errors.Is(clusterErr, ErrNoPostgres) {
		t.Skip("chaos: the PostgreSQL server binaries are not installed (initdb, pg_ctl); install postgresql to run the chaos suite")
	}
	if clusterErr != nil {
		t.Fatal(clusterErr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name := "c_" + strings.ToLower(regexp.MustCompile(`[^a-zA-Z0-9]+`).ReplaceAllString(t.Name(), "_"))
	u, err := cluster.CreateDatabase(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// rig is one experiment's tool server and the flags of its turnds.
type rig struct {
	t    *testing.T
	ts   *ToolServer
	args []string
	rec  *Recorder
	all  []*Turnd
	rss  int64 // the bound on each turnd's peak RSS
}

// newRig starts a tool server and writes its config; args are added to
// every turnd's flags.
func newRig(t *testing.T, args ...string) *rig {
	t.Helper()
	ts := NewToolServer()
	path := filepath.Join(t.TempDir(), "tools.yaml")
	if err := os.WriteFile(path, []byte(ts.Config()), 0o600); err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, ts: ts, rec: NewRecorder(), rss: rssBound,
		args: append([]string{"--config", path, "--log-level", "warn"}, args...)}
	t.Cleanup(func() {
		for _, p := range r.all {
			if err := p.Kill(); err != nil {
				t.Error(err)
			}
			if t.Failed() {
				t.Logf("%s's last output:\n%s", p.Name, p.Log(8<<10))
			}
		}
		ts.Close()
	})
	return r
}

// pgRig is a rig whose turnds use a database of the test's own (args are
// added to their flags), holding pgLock shared until the test has ended.
func pgRig(t *testing.T, args ...string) *rig {
	t.Helper()
	pgLock.RLock()
	t.Cleanup(pgLock.RUnlock)
	return newRig(t, append([]string{"--database-url", database(t)}, args...)...)
}

// start starts a turnd of the rig.
func (r *rig) start(name string, env ...string) *Turnd {
	r.t.Helper()
	p, err := NewTurnd(name, binary(r.t), r.args, env)
	if err != nil {
		r.t.Fatal(err)
	}
	r.all = append(r.all, p)
	if err := p.Start(context.Background()); err != nil {
		r.t.Fatal(err)
	}
	return p
}

// check runs Check against p and fails the test on every violation, on
// unexpected load answers, and on a turnd over rssBound.
func (r *rig) check(p *Turnd, opt CheckOptions) Report {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep := Check(ctx, client, p.Base, r.rec, r.ts, opt)
	for _, v := range rep.Violations {
		r.t.Error(v)
	}
	r.checkRSS()
	return rep
}

func (r *rig) checkRSS() {
	r.t.Helper()
	for _, p := range r.all {
		if rss := p.PeakRSS(); rss > r.rss {
			r.t.Errorf("%s: peak RSS %d MiB, over the bound of %d MiB", p.Name, rss>>20, r.rss>>20)
		} else {
			r.t.Logf("%s: peak RSS %d MiB over %d start(s)", p.Name, rss>>20, p.Starts())
		}
	}
}

// loadFailed fails the test on answers of the load that no retry explains.
func loadFailed(t *testing.T, st LoadStats) {
	t.Helper()
	for _, u := range st.Unexpected {
		t.Errorf("load: %s", u)
	}
}

// tally collects an experiment's violations by kind, to report each kind
// once with its count and a few examples instead of a line per call.
type tally struct {
	mu    sync.Mutex
	kinds []string
	by    map[string][]string
	n     map[string]int
}

func (ta *tally) add(kind, format string, args ...any) {
	ta.mu.Lock()
	defer ta.mu.Unlock()
	if ta.by == nil {
		ta.by, ta.n = map[string][]string{}, map[string]int{}
	}
	if ta.n[kind] == 0 {
		ta.kinds = append(ta.kinds, kind)
	}
	ta.n[kind]++
	if len(ta.by[kind]) < 3 {
		ta.by[kind] = append(ta.by[kind], fmt.Sprintf(format, args...))
	}
}

// report fails t once per kind of violation.
func (ta *tally) report(t *testing.T) {
	t.Helper()
	ta.mu.Lock()
	defer ta.mu.Unlock()
	for _, k := range ta.kinds {
		t.Errorf("%s: %d times, such as:\n  %s", k, ta.n[k], strings.Join(ta.by[k], "\n  "))
	}
}
