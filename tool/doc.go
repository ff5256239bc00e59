// Package tool is turnd's tool registry: the tools a deployment registers in
// its YAML config (HTTP tools and the builtin demo tools), their effect,
// argument schema and retry policy, and the dispatch.Tool that runs each.
//
// Parse reads a config (see Parse for its shape) into an immutable
// Registry; a reload builds a new one. Open reads a config file into a Live,
// which holds the current Registry and replaces it on Reload and when an
// MCP server's tools change. Spec.Validate checks a
// call's arguments against the tool's JSON Schema (draft 2020-12 unless the
// schema says otherwise) with messages written for the model.
//
// # The HTTP tool protocol
//
// Each attempt of a call is one POST to the tool's URL, bounded by the
// tool's http.timeout, with the configured headers and
//
//	Content-Type: application/json
//	Idempotency-Key: {session_id}/{turn_id}/{call_id}   (the same for every attempt)
//
//	{"session_id": "...", "turn_id": "...", "call_id": "...", "name": "...",
//	 "arguments": {...}, "attempt": 1}
//
// The session and turn come from the context (WithCallContext). The tool
// answers:
//
//   - 2xx application/json (or +json) {"output": <any JSON>}: the output.
//   - 2xx application/json {"error": {"code": "...", "message": "..."}}: an
//     error the model reads; not retried.
//   - 2xx text/*: the body is the output, as text. With a projector in the
//     context (WithProjector) it is projected while it streams in and only
//     the first keep-cap bytes are held: the outcome's Detail is a
//     *Projected and its Output is nil.
//   - 408, 429, 5xx, a timeout or a network error: a retryable
//     tool_unavailable error, with Retry-After honoured.
//   - any other 4xx: tool_rejected (or the tool's own {"error": ...}), not
//     retried. Redirects are not followed.
//
// Anything else is invalid_tool_response; a JSON body over the keep cap is
// output_too_large.
//
// # Deferred tools
//
// A tool configured with deferred: true may park a call: the work goes on
// elsewhere and its result is delivered later to POST /v1/complete/{key}.
// Before each request such a tool takes the call's completion key from its
// dispatch.Attempt (the same key for every attempt; failing that, the call
// fails with completion_key_unavailable and the tool is not called), and
// the request carries
//
//	"completion": {"key": "ck_...", "url": "https://turnd.example/v1/complete/ck_...",
//	               "deadline": "2025-06-02T12:00:00Z"}
//
// where url comes from CallContext.CompleteURL and deadline is the default
// from the tool's pending: config. The tool may then answer, with 200 or
// 202 and application/json,
//
//	{"pending": {"deadline": "90s", "heartbeat_timeout": "30s",
//	             "on_timeout": "error_as_result", "on_cancel": "cancel_external_work"}}
//
// any option left out taking the config's default ({"pending": {}} takes
// them all). Durations count from when turnd sent the request, the instant
// the announced deadline counts from; a deadline may also be an RFC 3339
// time. Invalid or unknown options, or "pending" together with "output" or
// "error", are invalid_tool_response; a pending answer from a tool without
// deferred: true is pending_tool_missing_completion_key. On a turn's
// cancellation, Registry.CancelExternal POSTs the key, signed, to the tool's
// http.cancel_url when its on_cancel is cancel_external_work.
//
// The approval builtin parks its call the same way and logs the complete
// URL, key included, so that a person (or curl) can deliver the answer. It
// is the one place turnd shows a completion key on purpose.
//
// # MCP servers
//
// An mcp entry imports the tools of a Model Context Protocol server over
// streamable HTTP, or of one turnd runs and speaks stdio with (the official
// Go SDK, protocol 2025-11-25); a config with
// one is opened with Open, whose Live keeps the registry current as the
// server's tool list changes and as the config is reloaded. Each tool's
// name is the entry's prefix plus the server's name for it, and must match
// ^[a-zA-Z0-9_-]{1,64}$: a tool whose name does not (MCP allows dots, for
// one), whose name another tool already has, or whose input schema turnd
// cannot compile is left out of the registry with a warning in the log.
// Its effect is read only when the server annotates it readOnlyHint: true
// and the entry sets trust_annotations: true (the MCP specification says
// that annotations from an untrusted server must not be relied on);
// otherwise write. A result maps to an outcome as follows:
//
//   - isError: true → error tool_error, the text content as its message.
//   - content with images, audio or embedded blobs → the content array as
//     JSON, each block's bytes replaced by a note of their size (turnd's
//     results reach the model as text), even beside structuredContent.
//   - structuredContent → JSON output.
//   - text content only → text output, the blocks joined by newlines.
//   - other content (resource links, embedded text) → the content array
//     as JSON.
//   - a JSON-RPC (protocol) error, a timeout, a lost session, an
//     unreachable server or a stdio server that is down → tool_unavailable,
//     retried by the entry's retry policy (the error's code and message in
//     the result's message).
//
// A stdio server (mcp.command) is one child process per entry, shared by
// its calls, restarted with a backoff and stopped with its process group;
// ARCHITECTURE.md says how.
//
// # Progress and trace context
//
// A call reports progress (MCP notifications/progress, an HTTP tool's
// application/x-ndjson answer) to its context's CallContext.Progress, and
// carries its span's W3C trace context in _meta and, through cmd's
// instrumented transport, in HTTP headers.
//
// tool may import dispatch, budget, completion, the standard library, its
// YAML, JSON Schema and MCP libraries, and the OpenTelemetry API (never
// the SDK); it must not import turn, api or any store.
package tool
