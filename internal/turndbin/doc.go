// Package turndbin is for the tests that run turnd as a child process: Main
// runs a test binary's tests with a temp dir of its own (goleak-checked),
// and Build builds cmd/turnd into it once, on first use (testnet.ClosedAddr
// finds a loopback port to serve on).
//
// turndbin is for tests only; it imports the standard library and goleak,
// and must not be imported by non-test code.
package turndbin
