//go:build unix && !linux

package tool

import "syscall"

// childProcAttr puts a stdio MCP server in a process group of its own, so
// that killGroup reaches the processes it starts and a terminal's Ctrl-C
// reaches turnd alone, which stops its servers in order.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
