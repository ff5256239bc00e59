package tool

import "syscall"

// childProcAttr puts a stdio MCP server in a process group of its own, so
// that killGroup reaches the processes it starts (npx starts a shell,
// which starts node) and a terminal's Ctrl-C reaches turnd alone, which
// stops its servers in order. Pdeathsig kills the server when the thread
// of turnd that started it dies: in practice when turnd dies, even by
// SIGKILL, so that no server outlives a turnd that could not stop it (Go
// ends an OS thread only when a goroutine locked to it exits; a server
// killed that way would be restarted like one that crashed).
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
