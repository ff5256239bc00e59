// Package bench is the engine of `turnd bench`: it drives a turnd over
// HTTP with a chosen workload and reports how fast it went, beside the
// rate of single-row INSERT transactions the same database sustains at the
// same concurrency (the baseline that bounds turnd on that database).
//
// A workload (Workload) is turns of Calls calls each, posted open loop at
// a Rate (turns per second, whatever the answers' latency) or closed loop
// from Concurrency clients, for a Duration or a number of Turns. Each call
// is a read, a write or a deferred call (ReadFraction, DeferredFraction),
// with a tool latency drawn from a distribution (Dist) and an output of
// OutputBytes bytes. The calls go to the loopback HTTP tool this package
// serves itself (ToolServer), which sleeps, answers, and for a deferred
// call answers pending and then delivers the result to turnd's
// POST /v1/complete/{key} after a delay — or, for a turnd whose tool
// config the bench does not control, to turnd's builtin echo and sleep
// tools (ToolBuiltin).
//
// Around the run it offers what `turnd bench` needs to start a turnd of
// its own: a child `turnd serve` process (StartServer) whose RSS it reads
// from /proc, a throwaway PostgreSQL cluster (StartPostgres), and the
// INSERT baselines on PostgreSQL and on SQLite (Baseline).
//
// The turns are posted by a tuned client (ClientTuned, the least CPU per
// turn) or by an ordinary one (ClientOrdinary: encoding/json both ways,
// net/http's default transport), which says what a user's program gets.
//
// bench may import internal/loadtest (its measuring loops), the wire types
// of package client (the ordinary client's), pgx and the SQLite driver,
// and the standard library; it must not import api, turn,
// the stores or cmd: it sees turnd only through HTTP, as an operator's
// load generator would. Nothing in turnd's serving path may import it.
package bench
