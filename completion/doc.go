// Package completion holds the pure building blocks of deferred completion:
// a tool that waits on out-of-band work parks its call on a completion key,
// and an external system later delivers the one final result to
// POST /v1/complete/{key}.
//
// The package has three parts:
//
//   - Keys. A [Keyring] derives a call's [Key] from a server [Secret] and the
//     (session, turn, call) ids, so the same call gets the same key across
//     retries and restarts without the key being stored. Only its [Hash] is
//     stored; only its [Hash.Fingerprint] may appear in logs or ledger lines.
//     A key is routed: after its MAC it names its session ([Route]), which a
//     sharded store needs to find the key's row without asking every shard,
//     and which the MAC binds. Legacy keys, issued before routed keys, carry
//     no route and stay valid ([Keyring.LegacyKey]).
//   - Pending options. [Options] are the knobs a tool sets under pending: in
//     its config and may override in its pending answer; [Resolve] turns
//     them into absolute deadlines ([Resolved]).
//   - Standard Webhooks. A [Signer] signs turnd's outgoing webhooks and
//     verifies the signature on incoming completions, per
//     https://www.standardwebhooks.com.
//
// # Looking up a key without leaking it
//
// A malformed key, an unknown key and a tampered key must all get the same
// 404, and how long the answer takes must not tell them apart or reveal how
// much of a key was right. The handler therefore does the same work for
// every string it is given:
//
//	h := completion.HashOf(raw)                    // any string, well-formed or not
//	sid, _ := completion.Route(raw)                // "" for a legacy key
//	rec, found, err := store.Pending(ctx, sid, h)  // always look up
//	if err != nil { ... }                          // a store failure is a 500, not a 404
//	_, malformed := completion.ParseKey(raw)
//	if malformed != nil || !found || !rec.KeyHash.Equal(h) {
//		return notFound
//	}
//
// The lookup is by the route and the hash of the whole key, so whatever
// timing an index comparison leaks is about a session id the caller wrote
// and a SHA-256 digest it cannot steer, never about the key; a key whose
// route was changed hashes to no key of that session. The
// final [Hash.Equal] is constant-time ([crypto/subtle]). [ParseKey] is only a
// syntactic check of the caller's own input; its result is used after the
// lookup, never to skip it. Where the ids are at hand, [Keyring.Verify]
// recomputes a key in constant time instead.
//
// Keys and secrets are not printed by accident: formatting a [Key] or a
// [Secret] with the fmt verbs, log or slog shows a placeholder (a key's
// shows its fingerprint), and a Secret marshals to JSON as a placeholder
// too. The explicit string(key) and [Secret.String] are the ways to get them
// out; a Key still marshals to JSON in full, as it must reach the tool.
//
// The package performs no I/O and does no logging (it imports log/slog only
// for the LogValuer interface). It imports nothing but the standard library,
// in its tests too.
package completion
