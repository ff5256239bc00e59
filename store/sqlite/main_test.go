package sqlite_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test closes its store in t.Cleanup; goleak proves that no
// connection goroutine outlives the package's tests.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
