// Package tool is turnd's tool registry: the tools a deployment registers in
// its YAML config (HTTP tools and the builtin demo tools), their effect,
// argument schema and retry policy, and the dispatch.Tool that runs each.
//
// Load and Parse read the config (see Parse for its shape) into an
// immutable Registry; a reload builds a new one. Spec.Validate checks a
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
// tool may import dispatch, budget, the standard library, and its YAML and
// JSON Schema libraries; it must not import turn, api or any store.
package tool
