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
	t, err := ReadProcessTimes(pid)
	return t.Self, err
}

// ProcessTimes is what /proc/<pid>/stat says of a process's CPU time.
type ProcessTimes struct {
	// Self is the user plus system CPU time of the process, all its
	// threads included.
	Self time.Duration
	// Children is the CPU time of its children that have exited and been
	// waited for (and of theirs, when they waited for them): a child's
	// time moves here once it is reaped.
	Children time.Duration
	// Parent is the process's parent's pid.
	Parent int
	// Started is when the process started, as time since the machine
	// booted.
	Started time.Duration
}

// ReadProcessTimes reads pid's ProcessTimes from /proc/<pid>/stat (Linux
// only). Their resolution is 10ms.
func ReadProcessTimes(pid int) (ProcessTimes, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ProcessTimes{}, err
	}
	return parseProcStat(b)
}

// parseProcStat parses a /proc/<pid>/stat line.
func parseProcStat(b []byte) (ProcessTimes, error) {
	// The command name (field 2) is in parentheses and may hold spaces
	// and parentheses: the fields resume after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return ProcessTimes{}, errors.New("unexpected /proc stat format")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return ProcessTimes{}, errors.New("unexpected /proc stat format")
	}
	// f[0] is field 3 (state): ppid is field 4, utime, stime, cutime and
	// cstime are fields 14 to 17, starttime field 22.
	var n [6]int64
	for j, k := range [6]int{1, 11, 12, 13, 14, 19} {
		v, err := strconv.ParseInt(f[k], 10, 64)
		if err != nil || v < 0 {
			return ProcessTimes{}, fmt.Errorf("unexpected /proc stat format: field %d is %q", k+3, f[k])
		}
		n[j] = v
	}
	return ProcessTimes{
		Self:     time.Duration(n[1]+n[2]) * clockTick,
		Children: time.Duration(n[3]+n[4]) * clockTick,
		Parent:   int(n[0]),
		Started:  time.Duration(n[5]) * clockTick,
	}, nil
}

// TreeCPU returns the CPU time used so far by process root and by every
// process under it, living or exited (an exited one counts once its parent
// waited for it, which a server such as PostgreSQL's postmaster does at
// once): root's own and reaped children's time, plus the time of the
// living processes whose parent is root, and so on down. It reads /proc
// (Linux only). A child reaped while /proc is read would be counted twice
// or not at all, so root's children time is read before and after, and
// /proc read again while it moved.
func TreeCPU(root int) (time.Duration, error) {
	for tries := 0; ; tries++ {
		before, err := ReadProcessTimes(root)
		if err != nil {
			return 0, err
		}
		below, err := descendantsCPU(root)
		if err != nil {
			return 0, err
		}
		after, err := ReadProcessTimes(root)
		if err != nil {
			return 0, err
		}
		// A server whose processes come and go by the hundred a second
		// may never hold still: after a few tries, the last reading.
		if after.Children == before.Children || tries == 4 {
			return after.Self + after.Children + below, nil
		}
	}
}

// descendantsCPU is the CPU time of the living processes under root
// (their own and their reaped children's), from one pass over /proc.
func descendantsCPU(root int) (time.Duration, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	type proc struct {
		pid int
		t   ProcessTimes
	}
	byParent := map[int][]proc{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == root {
			continue
		}
		pt, err := ReadProcessTimes(pid)
		if err != nil {
			continue // exited meanwhile, or not readable
		}
		byParent[pt.Parent] = append(byParent[pt.Parent], proc{pid, pt})
	}
	var cpu time.Duration
	for next := []int{root}; len(next) > 0; {
		var below []int
		for _, parent := range next {
			for _, c := range byParent[parent] {
				cpu += c.t.Self + c.t.Children
				below = append(below, c.pid)
			}
		}
		next = below
	}
	return cpu, nil
}

// BootTime returns when the machine booted: btime in /proc/stat (Linux
// only), to the second.
func BootTime() (time.Time, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return time.Time{}, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			secs, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return time.Time{}, fmt.Errorf("unexpected btime %q in /proc/stat", v)
			}
			return time.Unix(secs, 0), nil
		}
	}
	return time.Time{}, errors.New("no btime in /proc/stat")
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
