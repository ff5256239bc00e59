package postgres_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test closes its pools in t.Cleanup; goleak proves none of their
// goroutines outlive the package's tests.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
