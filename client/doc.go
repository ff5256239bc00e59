// Package client is the Go client of turnd's HTTP API (openapi.yaml): typed
// requests and answers for every endpoint, PostTurn (replayed, never re-run,
// by its own retries), provider and streamed posts, Await, Events, Ledger
// and deliveries. Problem answers are *Error values. It imports only the
// standard library and completion (never turn, store, api, or the provider
// SDKs, which are package client/sdk's); see ARCHITECTURE.md.
package client
