// Package sqlstore is the part of the two SQL stores (store/postgres and
// store/sqlite) that is not SQL, written once so that both store and
// return the domain types the same way and decide alike:
//
//   - row encodings: which JSON is kept byte for byte, what NULL means, a
//     ledger batch's lines (LinesJSON, Page), and the rows read back with
//     their column lists (SessionRow, CompletionRow, WebhookRow);
//   - the checks a write passes before it reaches the database
//     (CheckReceive, CheckCommit, CheckRecord, CheckResolve, CheckLate,
//     CheckWebhook, CheckWebhookMark);
//   - the decisions: a completion's state transitions (CheckExpected,
//     StateError, LateDecision, ResolveWrites), a lease's release
//     (ReleasesLease), the completion secret (Secret), answers in the order
//     asked (Lost, InOrder), the listings' cursors (CursorTime,
//     ParkedCursor);
//   - how a driver error the store has classified is reported (Wrap,
//     Collect).
//
// A store keeps its statements, its driver's types (its times above all)
// and the classification of its driver's errors.
//
// sqlstore may import turn, budget and the standard library; it must not
// import a database driver, migrations or api.
package sqlstore
