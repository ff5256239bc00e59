// Package ui is turnd's embedded web UI (sessions, a session's turns and
// ledger, a turn's live wave timeline, the parked calls): plain ES modules,
// CSS and SVG served by Handler with a Content-Security-Policy that runs no
// script but these files. See ARCHITECTURE.md, "The web UI". ui imports
// only the standard library.
package ui
