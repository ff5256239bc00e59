//go:build unix

// Package testproc holds the tests' helpers for the processes they start.
package testproc

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
)

// Gone reports whether no process pid runs; a zombie (dead, left for its
// parent or init to reap) counts as gone.
func Gone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	// pid (comm) state ...: comm may hold spaces and parentheses.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}
