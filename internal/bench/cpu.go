package bench

import (
	"context"
	"fmt"
	"math"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/turnd/turnd/internal/loadtest"
)

// Where the time goes. Over each measured window — a slice of load after
// its warm-up, a baseline slice's inserts (pgbench's run, its connections'
// start included; the Go loop's after its warm-up) — the bench reads, from
// /proc, the CPU time used by turnd's process (when the bench started it),
// by the PostgreSQL server (its postmaster and every process under it,
// exited backends included, when its processes are visible on this
// machine), by the bench itself and the children it waited for (pgbench),
// and by the machine as a whole, busy and idle. Divided by the window's
// turns (or transactions) these say what one costs and who pays for it: a
// split that the ratio alone hides, and the one a new user sizing a
// machine needs (turnd's share and PostgreSQL's).

// CPUSplit is the machine's CPU time over the measured windows, per op (a
// completed turn, or a baseline transaction), in microseconds, by who
// spent it. Total is every core's time, busy or idle: about cores ÷ ops/s
// (for pgbench, its connections' start makes it a little more). The parts
// add up to about the total: each is read to 10ms, at moments a little
// apart, and the kernel charges part of its own work (the loopback
// network's) to the processes it runs for, so under load the processes may
// add up to a percent or two more than the machine's busy time, and
// OtherUS then reads 0.
type CPUSplit struct {
	TotalUS float64 `json:"total_us"`
	// TurndUS is turnd's process; null when the bench did not start it
	// (--url): it is then in OtherUS.
	TurndUS *float64 `json:"turnd_us"`
	// PostgresUS is the PostgreSQL server, every process of it (whatever
	// database they serve: autovacuum, the checkpointer and the WAL writer
	// included); null for SQLite or a server whose processes this machine
	// does not see.
	PostgresUS *float64 `json:"postgres_us"`
	// ClientUS is the bench's process (the load generator and its HTTP
	// tools; the baseline's Go loop; its own connections) and the
	// children it waited for (pgbench).
	ClientUS float64 `json:"client_us"`
	// OtherUS is every other process, the kernel's work that no process
	// is charged for, and, on a virtual machine, the time the host took
	// (steal).
	OtherUS float64 `json:"other_us"`
	// IdleUS is the cores' idle time (iowait included): when every turn in
	// flight waits, for a WAL flush, say.
	IdleUS float64 `json:"idle_us"`
}

// cpuMeter takes the readings of a run's CPU split. Readings it cannot
// take leave their part unknown; a machine without /proc gives no split.
type cpuMeter struct {
	turnd      int // turnd's pid, 0 when unknown
	postmaster int // PostgreSQL's postmaster's pid, 0 when unknown
}

// newCPUMeter makes a meter for a turnd of pid server (0: not started by
// the bench) on the PostgreSQL at dbURL ("" for none), whose postmaster it
// looks for on this machine.
func newCPUMeter(ctx context.Context, server int, dbURL string) *cpuMeter {
	m := &cpuMeter{turnd: server}
	if dbURL == "" {
		return m
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return m // the baseline reports the connection's trouble
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if pid, ok, err := loadtest.Postmaster(ctx, conn); err == nil && ok {
		m.postmaster = pid
	}
	return m
}

// cpuReading is the CPU time used so far by each part of a run.
type cpuReading struct {
	ok                  bool // the machine's and this process's times were read
	cpuTimes                 // so far
	turndOK, postgresOK bool // those parts were read
}

// cpuTimes are CPU times of the parts of a run.
type cpuTimes struct {
	busy, total     time.Duration // the machine, all cores
	client          time.Duration // this process and its reaped children
	turnd, postgres time.Duration
}

func (t cpuTimes) plus(o cpuTimes) cpuTimes {
	return cpuTimes{t.busy + o.busy, t.total + o.total, t.client + o.client, t.turnd + o.turnd, t.postgres + o.postgres}
}

func (t cpuTimes) minus(o cpuTimes) cpuTimes {
	return cpuTimes{t.busy - o.busy, t.total - o.total, t.client - o.client, t.turnd - o.turnd, t.postgres - o.postgres}
}

func (m *cpuMeter) read() cpuReading {
	var r cpuReading
	var err error
	if r.busy, r.total, err = loadtest.MachineCPU(); err != nil {
		return cpuReading{}
	}
	self, err := loadtest.ReadProcessTimes(os.Getpid())
	if err != nil {
		return cpuReading{}
	}
	r.ok, r.client = true, self.Self+self.Children
	if m.turnd != 0 {
		if t, err := loadtest.ReadProcessTimes(m.turnd); err == nil {
			r.turnd, r.turndOK = t.Self, true
		}
	}
	if m.postmaster != 0 {
		if t, err := loadtest.TreeCPU(m.postmaster); err == nil {
			r.postgres, r.postgresOK = t, true
		}
	}
	return r
}

// cpuWindow holds the readings at the edges of one measured window.
type cpuWindow struct{ opened, closed cpuReading }

// watch returns ctx with a window hook (loadtest.WithWindow) that takes
// m's readings into the returned window, for one run on it.
func (m *cpuMeter) watch(ctx context.Context) (context.Context, *cpuWindow) {
	w := &cpuWindow{}
	return loadtest.WithWindow(ctx, func() func() {
		w.opened = m.read()
		return func() { w.closed = m.read() }
	}), w
}

// cpuTally adds up the CPU used over windows, and their ops.
type cpuTally struct {
	ops int
	cpuTimes
	// noTurnd, noPostgres: that part was not read at both edges of some
	// window.
	noTurnd, noPostgres bool
	// broken: a window lacked the machine's times, or turnd exited in it
	// (the bench then reaped it: its whole life's CPU would count as the
	// bench's).
	broken bool
}

// add counts the window from a to b, in which ops ops completed.
func (t *cpuTally) add(a, b cpuReading, ops int) {
	if !a.ok || !b.ok || (a.turndOK && !b.turndOK) {
		t.merge(cpuTally{broken: true})
		return
	}
	t.merge(cpuTally{ops: ops, cpuTimes: b.minus(a.cpuTimes),
		noTurnd: !(a.turndOK && b.turndOK), noPostgres: !(a.postgresOK && b.postgresOK)})
}

// merge adds o's windows to t's.
func (t *cpuTally) merge(o cpuTally) {
	t.ops += o.ops
	t.cpuTimes = t.plus(o.cpuTimes)
	t.noTurnd = t.noTurnd || o.noTurnd
	t.noPostgres = t.noPostgres || o.noPostgres
	t.broken = t.broken || o.broken
}

// split is the tally per op; nil when a window could not be read or no op
// completed. A part is known only when it was read in every window.
func (t cpuTally) split() *CPUSplit {
	if t.broken || t.ops <= 0 || t.total <= 0 {
		return nil
	}
	per := func(d time.Duration) float64 {
		return math.Round(float64(d.Microseconds())/float64(t.ops)*10) / 10
	}
	s := &CPUSplit{TotalUS: per(t.total), ClientUS: per(t.client), IdleUS: per(t.total - t.busy)}
	rest := t.busy - t.client
	if !t.noTurnd {
		v := per(t.turnd)
		s.TurndUS, rest = &v, rest-t.turnd
	}
	if !t.noPostgres {
		v := per(t.postgres)
		s.PostgresUS, rest = &v, rest-t.postgres
	}
	// The parts are read at slightly different moments, each to 10ms,
	// and the kernel charges some of its own work to them: what is left
	// for the others may come out below zero.
	s.OtherUS = per(max(rest, 0))
	return s
}

// text is s on one line, the client named client: "263.1µs of machine
// time: turnd 96.0, PostgreSQL 91.2, bench 25.9, other 8.1, idle 41.9".
func (s CPUSplit) text(client string) string {
	parts := []string{}
	if s.TurndUS != nil {
		parts = append(parts, fmt.Sprintf("turnd %.1f", *s.TurndUS))
	}
	if s.PostgresUS != nil {
		parts = append(parts, fmt.Sprintf("PostgreSQL %.1f", *s.PostgresUS))
	}
	parts = append(parts, fmt.Sprintf("%s %.1f", client, s.ClientUS), fmt.Sprintf("other %.1f", s.OtherUS), fmt.Sprintf("idle %.1f", s.IdleUS))
	return fmt.Sprintf("%.1fµs of machine time: %s", s.TotalUS, strings.Join(parts, ", "))
}
