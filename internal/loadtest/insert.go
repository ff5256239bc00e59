package loadtest

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// ScratchName is a fresh name for a baseline's scratch schema.
func ScratchName() string { return "loadtest_" + randomID(6) }

// ScratchTable creates the table of an INSERT baseline,
// <scratch>.bench_insert (id bigserial PRIMARY KEY, v text NOT NULL), in a
// new schema scratch of the database at dbURL, and returns its qualified
// name and drop, which drops the schema (whatever ctx has become by then).
func ScratchTable(ctx context.Context, dbURL, scratch string) (table string, drop func(), err error) {
	admin, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return "", nil, fmt.Errorf("connecting: %w", err)
	}
	closeAdmin := func() { admin.Close(context.WithoutCancel(ctx)) }
	schema := pgx.Identifier{scratch}.Sanitize()
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		closeAdmin()
		return "", nil, fmt.Errorf("creating the scratch schema: %w", err)
	}
	drop = func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_, _ = admin.Exec(dctx, "DROP SCHEMA "+schema+" CASCADE")
		closeAdmin()
	}
	table = schema + ".bench_insert"
	if _, err := admin.Exec(ctx, "CREATE TABLE "+table+" (id bigserial PRIMARY KEY, v text NOT NULL)"); err != nil {
		drop()
		return "", nil, fmt.Errorf("creating the table: %w", err)
	}
	return table, drop, nil
}

// InsertBaseline measures the rate of single-row INSERT transactions the
// database at dbURL sustains from clients concurrent connections for d:
// what a pgbench run of one prepared autocommit INSERT would report, from
// the same Go runtime and machine as turnd's own measurement. Each client
// has a connection of its own and loops on
//
//	INSERT INTO bench_insert (v) VALUES ($1)
//
// (prepared once per connection: one round trip and one commit, which waits
// for the WAL flush when synchronous_commit is on). The table lives in a
// scratch schema created for the run and dropped after it, so the caller's
// schemas are untouched; dbURL needs the CREATE privilege on its database.
func InsertBaseline(ctx context.Context, dbURL string, clients int, d time.Duration) (Result, error) {
	return insertBaseline(ctx, dbURL, ScratchName(), clients, d)
}

// insertBaseline is InsertBaseline with the scratch schema's name chosen by
// the caller (the tests, to check that this very schema is dropped while
// other runs may be using schemas of their own).
func insertBaseline(ctx context.Context, dbURL, scratch string, clients int, d time.Duration) (Result, error) {
	table, drop, err := ScratchTable(ctx, dbURL, scratch)
	if err != nil {
		return Result{}, fmt.Errorf("insert baseline: %w", err)
	}
	defer drop()
	return InsertInto(ctx, dbURL, table, clients, d)
}

// InsertInto is InsertBaseline into table, a table of ScratchTable's that
// the caller made and drops: a run of several baseline slices makes one
// for all of them, as a schema created or dropped between slices would
// make every session of the database plan its prepared statements again
// (PostgreSQL resets every cached plan when a schema changes), turnd's
// under measurement included.
func InsertInto(ctx context.Context, dbURL, table string, clients int, d time.Duration) (Result, error) {
	insert := "INSERT INTO " + table + " (v) VALUES ($1)"
	conns := make([]*pgx.Conn, clients)
	var mu sync.Mutex
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			if c != nil {
				c.Close(context.WithoutCancel(ctx))
			}
		}
	}()
	value := func(client int) string { return "client " + strconv.Itoa(client) + " row" }
	warm := func(ctx context.Context, client int) error {
		c, err := pgx.Connect(ctx, dbURL)
		if err != nil {
			return err
		}
		mu.Lock()
		conns[client] = c
		mu.Unlock()
		_, err = c.Exec(ctx, insert, value(client)) // prepares the statement
		return err
	}
	op := func(ctx context.Context, client int) error {
		_, err := conns[client].Exec(ctx, insert, value(client))
		return err
	}
	r, err := Loop(ctx, clients, d, warm, op)
	if err != nil {
		return r, fmt.Errorf("insert baseline: %w", err)
	}
	return r, nil
}
