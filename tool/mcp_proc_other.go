//go:build !unix

package tool

import (
	"os/exec"
	"syscall"
)

// childProcAttr: without Unix process groups, a stdio MCP server is
// stopped alone; what it started is its own to stop.
func childProcAttr() *syscall.SysProcAttr { return nil }

// killGroup kills the process itself.
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}
