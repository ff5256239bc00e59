// Package client is the Go client of turnd's HTTP API (openapi.yaml): typed
// requests and answers for every endpoint, and the few things integrations
// actually do on top — post a turn that a retry replays instead of
// re-running (PostTurn), post a provider's own message and get back what to
// append (PostProviderJSON, or package client/sdk's PostChatCompletion,
// PostResponse and PostMessage with the SDKs' own types), wait for a turn
// (Await), follow its events (Events) or a session's ledger (Ledger), and
// deliver deferred results (Complete, Heartbeat, CompletionStatus).
//
// Errors answered as problem+json are *Error values (use errors.As).
//
// It imports only the standard library and the completion package's
// Standard Webhooks signer; the OpenAI and Anthropic SDKs are package
// client/sdk's. It must never import turn, store or api: its wire types are
// its own, and TestContract holds them to openapi.yaml.
package client
