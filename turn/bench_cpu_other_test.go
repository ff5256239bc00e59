//go:build !unix

package turn_test

import "time"

// processCPU is not measured here (see bench_cpu_unix_test.go).
func processCPU() time.Duration { return 0 }
