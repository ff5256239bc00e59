// Package dispatch executes the tool calls of one assistant turn — a wave —
// as concurrently as their declared effects allow, while its host sees every
// call admitted and accounted strictly in call order, exactly as a serial
// run would present them.
//
// A wave goes through three stages. Admit, serially in call order: the
// host decides per call whether a tool runs, a recorded outcome is replayed,
// or the call is refused. Run: the leading calls whose tools only read run at
// once, one goroutine each, under a concurrency cap; the first call with any
// other effect waits until every earlier call has been accounted, and from
// there the wave is serial. Account, serially in call order: results wait in
// a reorder buffer and call k is handed to the host as soon as it and every
// call before it have answered.
//
// The package is pure: it performs no I/O and does no logging. Everything it
// observes leaves through the Host interfaces, so the turn service can put
// each event in its ledger. It must not import anything but the standard
// library.
package dispatch
