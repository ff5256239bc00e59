// Package client is the Go client of turnd's HTTP API (openapi.yaml): typed
// requests and answers for every endpoint, and the few things integrations
// actually do on top — post a turn that a retry replays instead of
// re-running (PostTurn), post a provider's own message and get back what to
// append (PostChatCompletion, PostResponse, PostMessage), wait for a turn
// (Await), follow its events (Events) or a session's ledger (Ledger), and
// deliver deferred results (Complete, Heartbeat, CompletionStatus).
//
// Errors answered as problem+json are *Error values (use errors.As).
//
// It imports only the standard library, the completion package's Standard
// Webhooks signer, and the OpenAI and Anthropic SDKs (their types are the
// caller's). It must never import turn, store or api: its wire types are its
// own, and TestContract holds them to openapi.yaml.
package client
