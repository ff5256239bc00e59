package loadtest_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The benchmarks run a whole turnd in-process and start child processes;
// goleak proves that everything they start is stopped.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
