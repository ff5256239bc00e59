// Package loadtest measures turnd end to end: turns posted over real HTTP
// by concurrent clients (Turns), next to the rate of single-row INSERT
// transactions the same PostgreSQL sustains at the same concurrency
// (InsertBaseline), so that a result reads as a fraction of what the
// database itself can commit on that machine rather than as a bare number.
//
// Around those two loops it offers what a benchmark needs to say where the
// time goes: a turn.Store wrapper that counts and times every store call
// (TimedStore), snapshots of PostgreSQL's commit and WAL counters (PGStats),
// CPU time read from /proc (ProcessCPU, MachineCPU) and a process's resident
// set size (RSS).
//
// The benchmarks live in this package's tests:
//
//	. scripts/pg.sh; pg_start; trap pg_stop EXIT
//	go test -run '^$' -bench . -benchtime 1x ./internal/loadtest/
//
// loadtest is a measuring tool for benchmarks and for `turnd bench`
// (internal/bench, which runs its Loop, InsertBaseline, Summarize and RSS
// outside a test binary). It may import turn (for the Store it wraps), pgx and net/http;
// it must not import api, the stores or cmd, and nothing in turnd's serving
// path may import it.
package loadtest
