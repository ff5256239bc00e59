package bench

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"
	"time"

	_ "modernc.org/sqlite" // the embedded store's driver, for the SQLite baseline

	"github.com/turnd/turnd/internal/loadtest"
)

// Kinds of baseline.
const (
	BaselinePostgres = "postgres_insert"
	BaselineSQLite   = "sqlite_insert"
)

// SQLiteBaseline is the rate of single-row INSERT transactions an SQLite
// file in dir sustains from clients goroutines for d, opened the way the
// embedded store opens its file for writing: WAL, synchronous=FULL, one
// write connection that every writer queues for, BEGIN IMMEDIATE. Each
// transaction is
//
//	BEGIN IMMEDIATE; INSERT INTO bench_insert (v) VALUES (?); COMMIT
//
// on a file of its own beside turnd's (bench-baseline.db, removed after),
// on the same file system.
func SQLiteBaseline(ctx context.Context, dir string, clients int, d time.Duration) (loadtest.Result, error) {
	path := filepath.Join(dir, "bench-baseline.db")
	q := url.Values{}
	q.Set("_busy_timeout", "10000")
	q.Set("_journal_mode", "WAL")
	q.Set("_synchronous", "FULL")
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", path+"?"+q.Encode())
	if err != nil {
		return loadtest.Result{}, fmt.Errorf("sqlite baseline: opening %s: %w", path, err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	if _, err := db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS bench_insert (id INTEGER PRIMARY KEY, v TEXT NOT NULL)"); err != nil {
		return loadtest.Result{}, fmt.Errorf("sqlite baseline: creating the table: %w", err)
	}
	insert := func(ctx context.Context, client int) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO bench_insert (v) VALUES (?)", "client "+strconv.Itoa(client)+" row"); err != nil {
			_ = tx.Rollback()
			return err
		}
		return tx.Commit()
	}
	r, err := loadtest.Loop(ctx, clients, d, insert, insert)
	if err != nil {
		return r, fmt.Errorf("sqlite baseline: %w", err)
	}
	return r, nil
}
