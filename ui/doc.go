// Package ui is turnd's embedded web UI: the sessions, a session's turns
// and ledger, a turn's wave timeline (live, from the turn's event stream)
// and the calls parked across sessions. It is plain ES modules, CSS and
// SVG embedded with go:embed, with no build step: what is committed is what
// is served. The pages call the /v1 API from the same origin, with the
// bearer token the user enters (kept in sessionStorage, sent only in the
// Authorization header).
//
// Tool outputs, arguments and ids are attacker-controlled text: the
// scripts only ever put them into the page as text nodes and attribute
// values, never as HTML, and Handler sends a Content-Security-Policy that
// runs no script but these files.
//
// ui imports only the standard library.
package ui
