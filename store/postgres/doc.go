// Package postgres is turnd's PostgreSQL store: a turn.Store on a pgx
// connection pool, plus the schema migrations that run under an advisory
// lock.
//
// Each write the service makes on its hot path — receiving a turn and
// committing a step of it — is a single SQL statement (data-modifying CTEs),
// so it is one transaction and one round trip. Ledger seqs are allocated by
// incrementing sessions.last_seq in that same statement: the session row lock
// serialises the session's writers and a rollback returns the seqs, so a
// session's ledger never has gaps. A write's lines are one row
// (ledger_batches: a seq range, the turn and the lines as a JSON array;
// see sqlstore.LinesJSON), read back line by line in pages bounded by lines
// and bytes; a turn's rows are read by their own index.
//
// A turn of reads only is recorded whole once it ran (RecordTurn, which
// refuses it when its turn id is taken or one of its call ids was answered
// earlier); a service that does not know its session yet looks it up first
// (LookupTurn). Both group concurrent calls into one statement (see
// group): the lookups of waiting turns share one read, their records one
// transaction, one commit and one WAL flush (group commit). A few
// statements of each kind run at once; the next batches form meanwhile.
// They run on a small pool of their own, whose connections use a prepared
// statement's generic plan whatever the batch's size (see genericPlans for
// when they leave PostgreSQL's choice alone).
// Two records running at once never share a session, so they never wait
// for each other's row locks.
//
// Deferred completions (turn.CompletionStore) follow the same rules: a
// commit that parks calls moves their keys in its one statement, and
// Resolve — a multi-statement transaction — locks the turn's row
// before the completions it resolves, the order Commit's lease update takes
// too, so resolvers and committers of a turn queue on that row instead of
// deadlocking (see Resolve). RecordLate, the other one, locks only the
// resolved key's completion row (which no resolver or committer locks any
// more) before it appends its line.
//
// Replicas sharing a schema tell each other which turns changed through a
// Notifier (turn.Notifier: pg_notify, and one dedicated LISTEN connection
// per replica; see NewNotifier), and ask the replica running a turn to
// cancel it through turns.cancel_requested_at (RequestCancel).
//
// Errors are translated at this boundary: no row or a missing referenced
// row → turn.ErrNotFound, lost connections and timeouts →
// turn.ErrUnavailable (see wrap).
//
// The store works in whatever schema the connection's search_path names
// (e.g. ?search_path=turnd in the URL); several turnd schemas can share one
// database. Statements are prepared and cached per connection (pgx's
// default), so a transaction-pooling proxy in front of PostgreSQL needs
// prepared-statement support; the group connections then also set
// plan_cache_mode for their session, which such a proxy leaves on the
// server connections it shares (set plan_cache_mode in the URL to keep
// turnd from setting it).
//
// postgres may import turn, migrations, store/internal/sqlstore and pgx; it
// must not import api, dispatch internals or any HTTP package.
package postgres
