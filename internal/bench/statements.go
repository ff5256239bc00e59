package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/turnd/turnd/internal/loadtest"
)

// The statements' share of a run: PostgreSQL's pg_stat_statements, read at
// the edges of the load's windows, gives each of turnd's statements its
// execution time per operation. On a shared machine a run's rate moves by
// a tenth from run to run; a statement's time per operation moves by a few
// percent, so it shows what a change to a statement or to the schema did
// where the rate cannot (BENCHMARKS.md, "completions: what is left").

// StatementCost is one statement's part of the load's windows.
type StatementCost struct {
	// Query is the statement's text as pg_stat_statements normalises it
	// ($1 for constants), whitespace folded, cut at 200 characters.
	Query string `json:"query"`
	// ExecUSPerOp is its execution time (wall time in the executor, so it
	// grows when the cores are short) per completed operation, and
	// CallsPerOp how often it ran per operation.
	ExecUSPerOp float64 `json:"exec_us_per_op"`
	CallsPerOp  float64 `json:"calls_per_op"`
	// Rows is how many rows it returned or changed in all.
	Rows int64 `json:"rows"`
}

// statementLimit is how many statements a report lists, the costliest
// first.
const statementLimit = 6

// statementMeter reads pg_stat_statements for turnd's database.
type statementMeter struct {
	conn *pgx.Conn // nil when the statements cannot be read (note says why)
	note string
	sums map[int64]*statementSum // by queryid, over the windows so far
	ops  int
	// broken: a window's edge could not be read; its statements are not
	// in sums, and the report says so.
	broken bool
}

// statementSum is one statement's counters, or their growth over windows.
type statementSum struct {
	query       string
	calls, rows int64
	exec        time.Duration
}

// statementReading is pg_stat_statements at one edge of a window, by
// queryid; nil when it could not be read.
type statementReading map[int64]statementSum

// openStatementMeter connects to turnd's database at dbURL and makes sure
// pg_stat_statements can be read there; with create (the bench's own
// cluster) it creates the extension, which it never does in a database
// that is not the bench's. Without it (the library not preloaded, the
// extension not created or not installed) the meter reads nothing and its
// note says why.
func openStatementMeter(ctx context.Context, dbURL string, create bool) *statementMeter {
	m := &statementMeter{sums: map[int64]*statementSum{}}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		m.note = "no connection to turnd's database: " + err.Error()
		return m
	}
	var loaded, created bool
	err = conn.QueryRow(ctx, sqlStatementsReady).Scan(&loaded, &created)
	switch {
	case err != nil:
	case !loaded:
		err = errors.New("pg_stat_statements is not in the server's shared_preload_libraries")
	case !created && create:
		_, err = conn.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`)
	case !created:
		err = errors.New("the pg_stat_statements extension is not created in turnd's database (CREATE EXTENSION pg_stat_statements)")
	}
	if err == nil {
		_, err = m.readWith(ctx, conn)
	}
	if err != nil {
		conn.Close(context.WithoutCancel(ctx))
		m.note = "PostgreSQL's statements not measured: " + err.Error()
		return m
	}
	m.conn = conn
	return m
}

func (m *statementMeter) close(ctx context.Context) {
	if m.conn != nil {
		m.conn.Close(context.WithoutCancel(ctx))
	}
}

// sqlStatementsReady tells whether the server preloads pg_stat_statements
// and whether this database has the extension.
const sqlStatementsReady = `SELECT 'pg_stat_statements' = ANY (regexp_split_to_array(current_setting('shared_preload_libraries'), '\s*,\s*')),
    EXISTS (SELECT FROM pg_extension WHERE extname = 'pg_stat_statements')`

// sqlStatements reads the counters of the statements run in this
// database, but the meter's own.
const sqlStatements = `SELECT queryid, query, calls, rows, total_exec_time
FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
    AND queryid IS NOT NULL AND query NOT LIKE '%pg_stat_statements%'`

func (m *statementMeter) readWith(ctx context.Context, conn *pgx.Conn) (statementReading, error) {
	rows, err := conn.Query(ctx, sqlStatements)
	if err != nil {
		return nil, err
	}
	r := statementReading{}
	var (
		id     int64
		s      statementSum
		execMS float64
	)
	_, err = pgx.ForEachRow(rows, []any{&id, &s.query, &s.calls, &s.rows, &execMS}, func() error {
		s.exec = time.Duration(execMS * float64(time.Millisecond))
		r[id] = s
		return nil
	})
	return r, err
}

// read takes a reading; nil when the meter reads nothing or the reading
// failed.
func (m *statementMeter) read(ctx context.Context) statementReading {
	if m.conn == nil {
		return nil
	}
	r, err := m.readWith(ctx, m.conn)
	if err != nil {
		return nil
	}
	return r
}

// watch returns ctx with a window hook (loadtest.WithWindow) that reads
// the statements as the window opens and adds what grew when it closes;
// ops returns the operations the window completed, asked once it closed.
// Its readings wrap those of a hook already on ctx, so that they are not
// inside that hook's window.
func (m *statementMeter) watch(ctx context.Context) (context.Context, *statementWindow) {
	w := &statementWindow{}
	if m.conn == nil {
		return ctx, w
	}
	return loadtest.WithWindow(ctx, func() func() {
		w.opened = m.read(ctx)
		return func() { w.closed = m.read(ctx) }
	}), w
}

// statementWindow holds the readings at the edges of one window.
type statementWindow struct{ opened, closed statementReading }

// add counts w, in which ops operations completed.
func (m *statementMeter) add(w *statementWindow, ops int) {
	if m.conn == nil {
		return
	}
	if w.opened == nil || w.closed == nil {
		m.broken = true
		return
	}
	m.ops += ops
	for id, b := range w.closed {
		a := w.opened[id] // a statement first run in the window starts at zero
		if b.calls <= a.calls {
			continue
		}
		s := m.sums[id]
		if s == nil {
			s = &statementSum{query: b.query}
			m.sums[id] = s
		}
		s.calls += b.calls - a.calls
		s.rows += b.rows - a.rows
		s.exec += b.exec - a.exec
	}
}

// costs are the costliest statements over the windows counted, at most
// limit of them, and a note when the meter read nothing or missed a
// window.
func (m *statementMeter) costs(limit int) ([]StatementCost, string) {
	switch {
	case m.conn == nil:
		return nil, m.note
	case m.broken:
		return nil, "PostgreSQL's statements not measured: pg_stat_statements could not be read at the edge of a window"
	case m.ops == 0:
		return nil, "PostgreSQL's statements not measured: no operation completed"
	}
	return statementCosts(m.sums, m.ops, limit), ""
}

// statementCosts orders sums by execution time, the longest first (by
// query text where equal), and gives each per operation of ops.
func statementCosts(sums map[int64]*statementSum, ops, limit int) []StatementCost {
	all := make([]*statementSum, 0, len(sums))
	for _, s := range sums {
		all = append(all, s)
	}
	slices.SortFunc(all, func(a, b *statementSum) int {
		return cmp.Or(cmp.Compare(b.exec, a.exec), strings.Compare(a.query, b.query))
	})
	out := make([]StatementCost, 0, min(limit, len(all)))
	for _, s := range all[:min(limit, len(all))] {
		out = append(out, StatementCost{
			Query:       foldQuery(s.query, 200),
			ExecUSPerOp: float64(s.exec.Microseconds()) / float64(ops),
			CallsPerOp:  float64(s.calls) / float64(ops),
			Rows:        s.rows,
		})
	}
	return out
}

// foldQuery folds q's runs of white space into one space and cuts it at
// n characters (runes), with an ellipsis where it cut.
func foldQuery(q string, n int) string {
	q = strings.Join(strings.Fields(q), " ")
	if r := []rune(q); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return q
}

// statementsText is the report's text for costs, one line a statement:
// its time and calls per operation, and the start of its text.
func statementsText(costs []StatementCost) []string {
	lines := make([]string, 0, len(costs))
	for _, c := range costs {
		lines = append(lines, fmt.Sprintf("%8.1fµs %5.2f calls  %.90s", c.ExecUSPerOp, c.CallsPerOp, c.Query))
	}
	return lines
}
