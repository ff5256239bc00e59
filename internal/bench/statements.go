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
// that is not the bench's. Without it (the extension not created or not
// installed, the library not preloaded, PostgreSQL older than 13) the
// meter reads nothing and its note says why, in PostgreSQL's words where
// the reading failed.
func openStatementMeter(ctx context.Context, dbURL string, create bool) *statementMeter {
	m := &statementMeter{sums: map[int64]*statementSum{}}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		m.note = "no connection to turnd's database: " + err.Error()
		return m
	}
	var created bool
	err = conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_extension WHERE extname = 'pg_stat_statements')`).Scan(&created)
	switch {
	case err != nil || created:
	case create:
		_, err = conn.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`)
	default:
		err = errors.New("the pg_stat_statements extension is not created in turnd's database (CREATE EXTENSION pg_stat_statements, on a server that preloads it)")
	}
	if err == nil {
		// Not preloaded, the reading fails: "pg_stat_statements must be
		// loaded via shared_preload_libraries".
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

// sqlStatements reads the counters of the statements run in this
// database, but the meter's own, summed over the rows pg_stat_statements
// keeps of one statement (one a role, and top-level apart from nested).
// A role that may not read other roles' statements (pg_read_all_stats)
// sees their queryid as NULL: those rows are left out, and a meter that
// saw nothing says so.
const sqlStatements = `SELECT queryid, min(query), sum(calls)::bigint, sum(rows)::bigint, sum(total_exec_time)
FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
    AND queryid IS NOT NULL AND query NOT LIKE '%pg_stat_statements%'
GROUP BY queryid`

// readTimeout bounds a reading, which runs as a window opens or closes.
const readTimeout = 5 * time.Second

func (m *statementMeter) readWith(ctx context.Context, conn *pgx.Conn) (statementReading, error) {
	// A window closes as its run ends, also when the run was stopped (its
	// context cancelled, by an interrupt): the reading is still wanted.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readTimeout)
	defer cancel()
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
		// A statement first seen in the window counts from zero; so does
		// one whose counters went back (pg_stat_statements reset, or the
		// statement evicted and seen again): what they hold then all came
		// after the window opened.
		a := w.opened[id]
		if b.calls < a.calls || b.exec < a.exec || b.rows < a.rows {
			a = statementSum{}
		}
		if b.calls == a.calls {
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
	case len(m.sums) == 0:
		return nil, "PostgreSQL's statements not measured: no statement of turnd's database ran in the windows, as pg_stat_statements shows them to this role (a role other than turnd's needs pg_read_all_stats)"
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
