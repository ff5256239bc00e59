// Package turn is turnd's domain service: sessions, turns, the ledger,
// replay, grants and recovery.
//
// A chat frontend posts an assistant turn (its ordered tool calls); the
// Service records it, runs it through a dispatch.Wave with itself as the
// wave's Host, projects every output through the session's budget, journals
// every step as a ledger line, and settles the turn. Storage is reached only
// through the Store interface declared here (consumer-defined); the Postgres
// and embedded SQLite implementations live under store/ and pass one shared
// conformance suite (turn/storetest).
//
// turn may import dispatch, budget, completion and tool, and the
// OpenTelemetry API (trace, attribute, codes, propagation: see trace.go);
// it must not import net/http handlers, pgx, database/sql drivers,
// prometheus, or the OpenTelemetry SDK and exporters, which cmd wires (it
// uses a net/http client only to send webhooks, see webhook.go). It never
// returns HTTP status codes: api maps its errors.
package turn
