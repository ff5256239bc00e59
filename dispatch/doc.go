// Package dispatch executes the tool calls of one assistant turn — a wave —
// as concurrently as their declared effects allow, while its host sees every
// call admitted and accounted strictly in call order, exactly as a serial
// run would present them.
//
// A wave goes through three stages:
//
//   - Admit, serially in call order: Host.Admit decides per call whether a
//     tool runs (Run), a recorded outcome answers it (Replay), or an outcome
//     without a tool does (Refuse).
//   - Run: the leading calls cleared to run a read tool start at once, each
//     on a worker, under Wave.MaxConcurrency (a read that Inline allows runs
//     on the wave's own goroutine instead; see InlineTool). The first call
//     with any other effect waits until every earlier call has been
//     accounted, and from there the wave is serial: admit k, run k,
//     account k, then k+1.
//     Replayed and refused calls need no tool, so they do not end the
//     leading reads. In ModeConcurrent every call starts at once.
//   - Account, serially in call order: results wait in a reorder buffer and
//     call k reaches Host.Account as soon as it and every call before it
//     have answered, while later calls are still being fed, admitted or run.
//
// Whatever order tools finish in, Account sees the same sequence of calls
// and outcomes as a serial run: the property the ledger relies on.
//
// Around that core: calls of the meta-tool "call" are resolved to the tool
// they name before admission; a duplicate call id is refused without asking
// the host; retryable errors are retried per the admitted RetryPolicy (a
// retried call is accounted with each attempt's times, Accounted.Tries); a
// tool may answer pending after taking a completion key through its
// Attempt; a panicking tool answers its call with CodeToolPanic; a
// fail_fast wave stops at its first error or refusal; a cancelled context
// cancels running tools and accounts the calls that never ran as cancelled;
// a Host that implements Aheader can start read tools before their calls
// are admitted; and one that implements AttemptObserver is told of every
// attempt, with its duration (for metrics). Each accounted call carries the
// time dispatch took it up for admission (Accounted.AdmittedAt).
//
// The package is pure: it performs no I/O and does no logging. Everything it
// observes leaves through the Host interfaces, so the turn service can put
// each event in its ledger. It must not import anything but the standard
// library.
package dispatch
