package loadtest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of the CPU times in /proc: USER_HZ, 100 on every
// Linux architecture Go supports (sysconf(_SC_CLK_TCK) would need cgo).
const clockTick = 10 * time.Millisecond

// ProcessCPU returns the user plus system CPU time process pid has used, all
// its threads included, from /proc/<pid>/stat (Linux only). Its resolution
// is 10ms.
func ProcessCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("unexpected /proc stat format")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, errors.New("unexpected /proc stat format")
	}
	// f[0] is field 3 (state): utime and stime are fields 14 and 15.
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("unexpected /proc stat format: %w", err)
	}
	return time.Duration(utime+stime) * clockTick, nil
}

// MachineCPU returns the CPU time all the machine's cores have spent busy
// (anything but idle and iowait) and in total since boot, from /proc/stat
// (Linux only). Over a window, busy/total is the machine's load, every
// process included.
func MachineCPU() (busy, total time.Duration, err error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 6 || f[0] != "cpu" {
		return 0, 0, errors.New("unexpected /proc/stat format")
	}
	// user nice system idle iowait irq softirq steal guest guest_nice;
	// guest time is already counted in user.
	for i, s := range f[1:min(len(f), 9)] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("unexpected /proc/stat format: %w", err)
		}
		total += time.Duration(n) * clockTick
		if i != 3 && i != 4 {
			busy += time.Duration(n) * clockTick
		}
	}
	return busy, total, nil
}

// RSS returns the resident set size of process pid in bytes: VmRSS in
// /proc/<pid>/status (Linux only).
func RSS(pid int) (int64, error) { return procStatusKB(pid, "VmRSS") }

// PeakRSS returns the highest resident set size process pid has had, in
// bytes: VmHWM in /proc/<pid>/status (Linux only).
func PeakRSS(pid int) (int64, error) { return procStatusKB(pid, "VmHWM") }

// procStatusKB reads a field given in kB from /proc/<pid>/status, in bytes.
func procStatusKB(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			v = strings.TrimSpace(v)
			kb, err := strconv.ParseInt(strings.TrimSuffix(v, " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("unexpected %s %q: %w", field, v, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status (a kernel thread or a zombie?)", field, pid)
}
