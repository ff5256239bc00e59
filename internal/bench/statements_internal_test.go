package bench

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/turnd/turnd/internal/loadtest"
)

// The meter adds what grew over each window, a statement first seen in a
// window counted from zero, and orders the statements by execution time
// per operation.
func TestStatementCosts(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	m := &statementMeter{conn: &pgx.Conn{}, sums: map[int64]*statementSum{}}
	m.add(&statementWindow{
		opened: statementReading{1: {query: "SELECT a", calls: 10, rows: 10, exec: 5 * ms}, 2: {query: "UPDATE b", calls: 1, exec: ms}},
		closed: statementReading{1: {query: "SELECT a", calls: 30, rows: 30, exec: 9 * ms}, 2: {query: "UPDATE b", calls: 1, exec: ms},
			3: {query: "INSERT  c\n\t VALUES ($1)", calls: 5, rows: 5, exec: 20 * ms}},
	}, 100)
	m.add(&statementWindow{
		opened: statementReading{1: {query: "SELECT a", calls: 30, rows: 30, exec: 9 * ms}, 3: {query: "INSERT  c\n\t VALUES ($1)", calls: 5, rows: 5, exec: 20 * ms}},
		closed: statementReading{1: {query: "SELECT a", calls: 50, rows: 50, exec: 15 * ms}, 3: {query: "INSERT  c\n\t VALUES ($1)", calls: 10, rows: 10, exec: 30 * ms}},
	}, 100)
	got, note := m.costs(5)
	if note != "" {
		t.Fatalf("note %q", note)
	}
	// 200 ops: c ran 10 times for 30ms (from zero in the first window,
	// where it was first seen), a 40 times for 10ms; b did not run.
	want := []StatementCost{
		{Query: "INSERT c VALUES ($1)", ExecUSPerOp: 150, CallsPerOp: 0.05, Rows: 10},
		{Query: "SELECT a", ExecUSPerOp: 50, CallsPerOp: 0.2, Rows: 40},
	}
	if len(got) != len(want) {
		t.Fatalf("costs %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("cost %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if got, _ := m.costs(1); len(got) != 1 || got[0].Query != "INSERT c VALUES ($1)" {
		t.Errorf("the costliest one: %+v", got)
	}

	// Counters that went back in a window (pg_stat_statements reset, or
	// the statement evicted and seen again) count from zero.
	m.add(&statementWindow{
		opened: statementReading{1: {query: "SELECT a", calls: 50, rows: 50, exec: 15 * ms}},
		closed: statementReading{1: {query: "SELECT a", calls: 8, rows: 8, exec: 2 * ms}},
	}, 100)
	if got, _ := m.costs(5); len(got) != 2 || got[1] != (StatementCost{Query: "SELECT a", ExecUSPerOp: 40, CallsPerOp: 0.16, Rows: 48}) {
		t.Errorf("after a reset: %+v", got)
	}

	// A window whose edge could not be read spoils the sums: no costs, a
	// note. A meter that reads nothing says why; one whose windows ran no
	// operation too.
	m.add(&statementWindow{opened: statementReading{}}, 10)
	if got, note := m.costs(5); got != nil || !strings.Contains(note, "edge of a window") {
		t.Errorf("after a broken window: %+v, %q", got, note)
	}
	off := &statementMeter{note: "PostgreSQL's statements not measured: x"}
	off.add(&statementWindow{}, 10)
	if got, note := off.costs(5); got != nil || note != off.note {
		t.Errorf("a meter without a connection: %+v, %q", got, note)
	}
	idle := &statementMeter{conn: &pgx.Conn{}, sums: map[int64]*statementSum{}}
	idle.add(&statementWindow{opened: statementReading{}, closed: statementReading{}}, 0)
	if got, note := idle.costs(5); got != nil || !strings.Contains(note, "no operation") {
		t.Errorf("no operation: %+v, %q", got, note)
	}
	// Operations, but no statement seen (a role that cannot see turnd's).
	idle.add(&statementWindow{opened: statementReading{}, closed: statementReading{}}, 10)
	if got, note := idle.costs(5); got != nil || !strings.Contains(note, "pg_read_all_stats") {
		t.Errorf("no statement seen: %+v, %q", got, note)
	}
}

func TestFoldQuery(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"SELECT  1\n\tFROM x ", "SELECT 1 FROM x"},
		{"SELECT 'éééééééééé'", "SELECT 'ééééééé…"},
		{"SELECT 'éééééé'", "SELECT 'éééééé'"},
		{"", ""},
	} {
		if got := foldQuery(tc.in, 16); got != tc.want {
			t.Errorf("foldQuery(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// On the bench's own cluster, started to preload pg_stat_statements, the
// meter creates the extension and counts what ran in its windows; a
// cluster that does not preload it, or a database without the extension
// that the bench may not change, gives a note instead, and the meter
// reads nothing.
func TestStatementMeterOnPostgres(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts PostgreSQL clusters")
	}
	bin, ok := PostgresBinDir()
	if !ok {
		t.Skip("no PostgreSQL server binaries")
	}
	if !HasStatementsLibrary(bin) {
		if os.Getenv("CI") != "" {
			t.Fatalf("PostgreSQL at %s has no pg_stat_statements library", bin)
		}
		t.Skip("this PostgreSQL has no pg_stat_statements library")
	}
	ctx := context.Background()
	// The clusters' parent: one the postgres user can reach when this runs
	// as root (a test's TempDir is under a directory only its owner can).
	parent, err := os.MkdirTemp("", "turnd-statements-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(parent) })
	start := func(statements bool) *Postgres {
		pg, err := StartPostgres(ctx, bin, parent, statements)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := pg.Stop(); err != nil {
				t.Error(err)
			}
		})
		return pg
	}
	pg := start(true)

	// Not the bench's database: the extension is not created for it.
	if m := openStatementMeter(ctx, pg.URL, false); m.conn != nil || !strings.Contains(m.note, "CREATE EXTENSION") {
		t.Errorf("without create: conn %v, note %q", m.conn != nil, m.note)
	}
	m := openStatementMeter(ctx, pg.URL, true)
	defer m.close(ctx)
	if m.conn == nil {
		t.Fatalf("the meter reads nothing: %s", m.note)
	}
	conn, err := pgx.Connect(ctx, pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE TABLE meter_probe (n int)`); err != nil {
		t.Fatal(err)
	}
	insert := func(n int) {
		for i := range n {
			if _, err := conn.Exec(ctx, `INSERT INTO meter_probe VALUES ($1)`, i); err != nil {
				t.Fatal(err)
			}
		}
	}
	insert(3) // before any window: not counted
	for i := range 2 {
		// The second window's run is stopped before it closes (an
		// interrupt cancels its context): the closing reading is still
		// taken.
		rctx, stop := context.WithCancel(ctx)
		wctx, w := m.watch(rctx)
		closeWindow := loadtest.OpenWindow(wctx)
		insert(7)
		if i == 1 {
			stop()
		}
		closeWindow()
		stop()
		m.add(w, 7)
	}
	insert(4) // after the windows: not counted
	costs, note := m.costs(statementLimit)
	if note != "" {
		t.Fatalf("note %q", note)
	}
	var found bool
	for _, c := range costs {
		if strings.HasPrefix(c.Query, "INSERT INTO meter_probe") {
			found = true
			if c.CallsPerOp != 1 || c.Rows != 14 || c.ExecUSPerOp <= 0 {
				t.Errorf("the probe's insert: %+v, want 1 call per op, 14 rows", c)
			}
		}
		if strings.Contains(c.Query, "pg_stat_statements") {
			t.Errorf("the meter counted its own reading: %+v", c)
		}
	}
	if !found {
		t.Errorf("the probe's insert is not among %+v", costs)
	}

	// A cluster that does not preload it.
	off := openStatementMeter(ctx, start(false).URL, true)
	defer off.close(ctx)
	if off.conn != nil || !strings.Contains(off.note, "shared_preload_libraries") {
		t.Errorf("without the library preloaded: conn %v, note %q", off.conn != nil, off.note)
	}
	if wctx, _ := off.watch(ctx); wctx != ctx {
		t.Error("a meter that reads nothing put a window hook on the context")
	}
}
