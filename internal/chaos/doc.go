// Package chaos is turnd's chaos suite: experiments that drive real `turnd
// serve` processes against a PostgreSQL cluster of their own, which they
// stop and start, and a counting tool server in the test process, and then
// check the invariants turnd promises — every turn settled, no write run
// twice, no answered result lost or changed on a re-read, each session's
// ledger gap-free with one turn_settled per settled turn, no 5xx for bad
// input, bounded memory.
//
// The harness (Cluster, Turnd, ToolServer, Load, Recorder, Check) is the
// package; the experiments are its tests. By default they run short,
// bounded loops that fit the repository's `go test -race ./...`;
// CHAOS_LONG=1 (`make chaos`) runs long ones. Everything listens on
// loopback only. RELIABILITY.md has the figures.
//
// The package imports turnd's packages only for what the binary shares
// (the location of the PostgreSQL binaries); it talks to turnd over HTTP,
// as a frontend does, never through turn or store internals.
package chaos
