//go:build unix

package turn_test

import (
	"syscall"
	"time"
)

// processCPU is the CPU time this process used so far, user and system:
// benchmarks report it per op, which the other processes of a shared
// machine disturb less than they do the wall clock.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
