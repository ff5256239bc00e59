package loadtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
)

// PGStats are PostgreSQL's cumulative counters for the current database
// (pg_stat_database) and, on PostgreSQL 14 and later, for the WAL
// (pg_stat_wal). Subtract two snapshots to count what happened between them.
//
// PostgreSQL 15 and later keep these counters in shared memory, but a busy
// backend publishes its own at most once a second and an idle one within
// ten seconds (a closed one at exit): read the closing snapshot at least
// ten seconds after the load stopped, or count on the client side.
type PGStats struct {
	XactCommit, XactRollback                                     int64
	TupInserted, TupUpdated, TupDeleted, TupReturned, TupFetched int64
	// WAL is false when pg_stat_wal could not be read.
	WAL bool
	// WALRecords and WALBytes count the WAL generated; WALFPI its full-page
	// images. WALWrite and WALSync count the write() and fsync() calls of
	// the WAL: with synchronous_commit on, every commit waits for a sync
	// covering its record, and several commits share one (group commit).
	WALRecords, WALFPI, WALBytes, WALWrite, WALSync int64
}

// ReadPGStats reads the counters through conn.
func ReadPGStats(ctx context.Context, conn *pgx.Conn) (PGStats, error) {
	var s PGStats
	if _, err := conn.Exec(ctx, "SELECT pg_stat_clear_snapshot()"); err != nil {
		return s, fmt.Errorf("clearing the stats snapshot: %w", err)
	}
	err := conn.QueryRow(ctx, `SELECT xact_commit, xact_rollback, tup_inserted, tup_updated, tup_deleted,
    tup_returned, tup_fetched
FROM pg_stat_database WHERE datname = current_database()`).Scan(
		&s.XactCommit, &s.XactRollback, &s.TupInserted, &s.TupUpdated, &s.TupDeleted, &s.TupReturned, &s.TupFetched)
	if err != nil {
		return s, fmt.Errorf("reading pg_stat_database: %w", err)
	}
	err = conn.QueryRow(ctx, `SELECT wal_records, wal_fpi, wal_bytes::bigint, wal_write, wal_sync FROM pg_stat_wal`).Scan(
		&s.WALRecords, &s.WALFPI, &s.WALBytes, &s.WALWrite, &s.WALSync)
	s.WAL = err == nil
	return s, nil
}

// Sub returns s minus an earlier snapshot.
func (s PGStats) Sub(earlier PGStats) PGStats {
	return PGStats{
		XactCommit: s.XactCommit - earlier.XactCommit, XactRollback: s.XactRollback - earlier.XactRollback,
		TupInserted: s.TupInserted - earlier.TupInserted, TupUpdated: s.TupUpdated - earlier.TupUpdated,
		TupDeleted: s.TupDeleted - earlier.TupDeleted, TupReturned: s.TupReturned - earlier.TupReturned,
		TupFetched: s.TupFetched - earlier.TupFetched,
		WAL:        s.WAL && earlier.WAL,
		WALRecords: s.WALRecords - earlier.WALRecords, WALFPI: s.WALFPI - earlier.WALFPI,
		WALBytes: s.WALBytes - earlier.WALBytes, WALWrite: s.WALWrite - earlier.WALWrite, WALSync: s.WALSync - earlier.WALSync,
	}
}

// PGSettings returns the values of the named settings as conn's session
// sees them (SHOW), which includes what the connection string sets.
func PGSettings(ctx context.Context, conn *pgx.Conn, names ...string) (map[string]string, error) {
	out := make(map[string]string, len(names))
	for _, name := range names {
		var v string
		if err := conn.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&v); err != nil {
			return nil, fmt.Errorf("reading setting %s: %w", name, err)
		}
		out[name] = v
	}
	return out, nil
}

// PostgresCPU returns the CPU time used so far by the whole PostgreSQL
// server conn is connected to, when it runs on this machine (see
// Postmaster): TreeCPU of its postmaster, which counts its backends that
// exited too. Compare readings over a window.
func PostgresCPU(ctx context.Context, conn *pgx.Conn) (cpu time.Duration, ok bool, err error) {
	pm, ok, err := Postmaster(ctx, conn)
	if err != nil || !ok {
		return 0, false, err
	}
	cpu, err = TreeCPU(pm)
	if err != nil {
		return 0, false, nil // gone since, or /proc not readable
	}
	return cpu, true, nil
}

// Postmaster returns the pid of the PostgreSQL server conn is connected to
// (its postmaster, the parent of every server process) when that server
// runs on this machine and its processes are visible here: the parent of
// conn's backend, both named postgres in /proc, the parent started when
// the server says it did. ok is false otherwise: a server on another
// machine or in a container of its own (a pid there may be another
// process's here), or no /proc.
func Postmaster(ctx context.Context, conn *pgx.Conn) (pid int, ok bool, err error) {
	var backend int32
	var started time.Time
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid(), pg_postmaster_start_time()").Scan(&backend, &started); err != nil {
		return 0, false, fmt.Errorf("reading the backend's pid: %w", err)
	}
	if !isPostgres(int(backend)) {
		return 0, false, nil
	}
	t, err := ReadProcessTimes(int(backend))
	if err != nil || !isPostgres(t.Parent) {
		return 0, false, nil
	}
	pm, err := ReadProcessTimes(t.Parent)
	if err != nil {
		return 0, false, nil
	}
	boot, err := BootTime()
	if err != nil {
		return 0, false, nil
	}
	// The server notes its start a moment after the process starts;
	// btime is to the second.
	if d := started.Sub(boot.Add(pm.Started)); d < -2*time.Second || d > 10*time.Second {
		return 0, false, nil
	}
	return t.Parent, true, nil
}

// isPostgres reports whether process pid runs PostgreSQL's server binary
// (whose processes keep its name as their command, whatever title they
// set).
func isPostgres(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	comm := string(bytes.TrimSpace(b))
	return err == nil && (comm == "postgres" || comm == "postmaster")
}
