//go:build race

package main

// raceEnabled: the test binary runs under the race detector, so the turnd
// binary the end-to-end tests start is built with it too.
const raceEnabled = true
