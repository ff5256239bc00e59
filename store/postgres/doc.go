// Package postgres is turnd's PostgreSQL store: a turn.Store (and
// turn.CompletionStore) on a pgx connection pool, a Notifier for replicas
// that share a schema, and the schema migrations, run under an advisory
// lock.
//
// Each hot-path write is a single SQL statement (data-modifying CTEs): one
// transaction, one round trip. Ledger seqs come from sessions.last_seq in
// that statement, so a session's ledger never has gaps. All-read turns are
// recorded whole (RecordTurn) and looked up (LookupTurn) in group-committed
// batches (see group). Errors are translated at this boundary (see wrap):
// no row → turn.ErrNotFound, lost connections and timeouts →
// turn.ErrUnavailable. The store works in the schema the connection's
// search_path names. ARCHITECTURE.md ("store/postgres: statements", "Replica
// notifications", "Migrations") has the reasons.
//
// postgres may import turn, migrations, store/internal/sqlstore and pgx; it
// must not import api, dispatch internals or any HTTP package.
package postgres
