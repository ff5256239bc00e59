// Package rawjson works on JSON text without decoding it: it scans and
// validates values, compacts them, writes their canonical form (the one the
// request hash is taken over) and quotes strings. It is the tree's one
// hand-written JSON code, fuzzed against encoding/json; ARCHITECTURE.md
// says why it exists and what it measured.
//
// It imports the standard library only, so that the pure packages (budget)
// may use it.
package rawjson
