//go:build unix

package tool

import (
	"os/exec"
	"syscall"
)

// killGroup kills every process left in cmd's process group (see
// childProcAttr). The group outlives its leader only while a member is
// alive, and its id is not reused before then, so this never reaches an
// unrelated process.
func killGroup(cmd *exec.Cmd) {
	if cmd.Process == nil || cmd.Process.Pid <= 0 {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}
