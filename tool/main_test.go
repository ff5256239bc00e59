package tool

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(stdioServerEnv); mode != "" {
		os.Exit(stdioTestServer(mode)) // the test binary as a stdio MCP server
	}
	goleak.VerifyTestMain(m)
}
