package bench

import (
	"testing"

	"go.uber.org/goleak"
)

// The tool server and the runs start goroutines; goleak proves that they
// all end.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
