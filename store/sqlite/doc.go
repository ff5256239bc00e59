// Package sqlite is turnd's embedded store: a turn.Store in one SQLite file,
// through the pure-Go modernc.org/sqlite driver (no cgo), for single-node
// deployments and development.
//
// It is for ONE process. Every write goes through a single connection, so
// writes are serialised inside the process and ledger seqs, leases and
// claims need no further coordination; reads use a small pool of read-only
// connections, which WAL mode lets run beside the writer. A second process
// on the same file would only contend for SQLite's file lock (busy_timeout
// makes it wait): run one turnd per file.
//
// Durability: synchronous=FULL, so a write the store acknowledged is on
// disk. Times are stored as INTEGER unix microseconds (UTC) and JSON values
// as TEXT exactly as written; the semantics match store/postgres, as the
// shared conformance suite (turn/storetest) checks.
//
// sqlite may import turn, migrations, store/internal/sqlstore and its driver;
// it must not import api or any HTTP package.
package sqlite
