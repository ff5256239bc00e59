// Package storetest is the conformance suite every turn.Store passes: the
// PostgreSQL and the embedded SQLite store run the same Run, so the service
// sees one behaviour whichever it is given (the driver-test pattern of
// riverqueue/river).
//
// A store's test calls Run with a function that opens a fresh, empty,
// migrated store and closes it in t.Cleanup. Every subtest opens its own
// store and runs in parallel.
//
// Beyond the turn.Store doc comments, the suite pins down what both stores
// do where the interface leaves room, so that the service may rely on it:
//   - times come back in UTC, truncated to the microsecond;
//   - JSON values (metadata, call arguments, result outputs, line data) come
//     back byte for byte as written, not re-encoded;
//   - nil and empty JSON values both come back nil; a nil tools list (every
//     tool) stays distinct from an empty one (none);
//   - an output whose ExpiresAt is zero never expires;
//   - Answered orders a call id's candidates by finish time;
//   - a commit to a turn that does not exist fails with turn.ErrLeaseLost;
//   - a commit with a zero LeaseUntil keeps the lease's current expiry;
//   - a commit whose LeaseEpoch is not the turn's claim count (its owner
//     lost the lease and claimed it back since) fails with
//     turn.ErrLeaseLost and writes nothing;
//   - empty session and turn ids of lines and outputs are filled in from
//     the turn they are written under;
//   - Ledger and TurnLedger always return a non-nil slice, with at least
//     one line when one is there however small maxBytes is; a line naming
//     another turn than the one it is written under is refused (a ledger
//     row holds one turn's lines).
//
// For deferred completions (turn.CompletionStore):
//   - IssueCompletion stores the key's identity and CreatedAt only, as
//     issued; a key of an unknown turn is turn.ErrNotFound;
//   - a park moves only issued (→ pending) and early (stays early)
//     completions of the committed turn; pending and resolved ones, and
//     other turns' keys, are left as they are;
//   - DeliverEarly keeps its now as ResolvedAt until the final resolution;
//   - Heartbeat never moves the heartbeat clock back, and leaves a
//     completion without one (HeartbeatTimeout 0) unchanged, without error;
//   - Resolve: a key that is not the batch turn's, or an unknown turn, is
//     turn.ErrNotFound; a failed Expect names the completion's fingerprint
//     (first 4 bytes of the key hash in hex) and its status; a batch
//     without items settles a waiting turn with no open completion; open
//     means pending or early;
//   - DueCompletions includes clocks at exactly now, orders by the earlier
//     clock then key hash, and returns a non-nil slice; TurnCompletions
//     orders by call index and returns an empty slice for an unknown turn;
//   - RecordLate for an unknown key, or a key of another turn than the
//     one given, is turn.ErrNotFound; it does not look at the key's status
//     (the service does), and the outputs it writes are only a recorded
//     delivery's;
//   - payloads come back byte for byte, HeartbeatTimeout truncated to the
//     microsecond.
//
// For the webhook outbox (turn.WebhookStore):
//   - a webhook is written only with the Commit that carries it, and only
//     when the commit applies (a lost lease writes none), and by Resolve
//     only when the batch settles the turn; a webhook that names another
//     turn, or lacks an id or a JSON body, fails the whole write;
//   - a zero NextAttemptAt makes a new webhook due at its CreatedAt;
//   - ClaimWebhooks includes webhooks due at exactly now and counts the
//     attempt (Attempts+1) when it claims, so an attempt a crash cut short
//     counts too; it returns a non-nil slice;
//   - a delivery keeps the webhook's LastError; MarkWebhook on a delivered
//     or dead webhook changes nothing and is not an error;
//   - bodies come back byte for byte.
//
// storetest may import turn, dispatch, budget and the standard library; it
// must not import a store implementation, a driver or api.
package storetest
