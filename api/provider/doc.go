// Package provider translates between turnd's turns and the wire formats of
// the model providers' APIs, so that a chat frontend can post an assistant
// message exactly as the model API returned it and append turnd's answer to
// its next request as it is:
//
//   - openai.chat: Chat Completions. In: a completion response (its
//     choices[0].message) or the assistant message. Out: one
//     {"role":"tool"} message per call.
//   - openai.responses: the Responses API. In: a response or its output
//     array. Out: one function_call_output item per call.
//   - anthropic.messages: the Messages API. In: a message response or the
//     assistant message. Out: one user message of tool_result blocks.
//
// Parsing is strict about the shape the format names (a body of another
// shape is a BodyError, never a guess) and lenient only where the providers
// themselves are: an OpenAI arguments string is JSON text the model wrote,
// so a string that does not parse is not the frontend's mistake; the call
// is kept with that string as its arguments and the turn service refuses
// it alone (invalid_arguments) while the turn's other calls run.
//
// Rendering is a pure function of a turn's record: every call of the turn
// gets exactly one result, in call order, whatever state it is in.
//
// Streams: Format.ReadStream reads the same formats as the APIs stream them
// (server-sent events), incrementally from an io.Reader, handing each call
// to a StreamHandler the moment its arguments are complete and telling a
// clean end (the finish event, then the end of the body) from a stream
// that broke (IncompleteError).
//
// The package does no I/O but reading the stream it is handed. It may
// import the standard library and turn (for its Call and Result types)
// only.
package provider
