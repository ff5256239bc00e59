package loadtest_test

import (
	"bufio"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/turnd/turnd/internal/loadtest"
)

func TestParseProcStat(t *testing.T) {
	t.Parallel()
	// Fields after the command: state, ppid, pgrp, session, tty, tpgid,
	// flags, minflt, cminflt, majflt, cmajflt, utime, stime, cutime,
	// cstime, and more.
	tail := " S 77 1 1 0 -1 4194560 100 0 0 0 250 50 1200 300 20 0 1 0 5 1000 10"
	want := loadtest.ProcessTimes{Self: 3 * time.Second, Children: 15 * time.Second, Parent: 77, Started: 50 * time.Millisecond}
	for _, tc := range []struct{ name, line string }{
		{"plain", "123 (turnd)" + tail},
		{"a command with spaces and parentheses", "123 (a (b) c)" + tail},
	} {
		got, err := loadtest.ParseProcStat([]byte(tc.line))
		if err != nil || got != want {
			t.Errorf("%s: %+v, %v; want %+v", tc.name, got, err, want)
		}
	}
	// field replaces field n (1-based, as in proc(5)) of the good line.
	field := func(n int, v string) string {
		f := strings.Fields("(turnd)" + tail)
		f[n-2] = v
		return "123 " + strings.Join(f, " ")
	}
	for _, bad := range []string{
		"",
		"123 turnd S 77",
		"123 (turnd) S 77 1 1 0 -1 4194560 100 0 0 0 250 50 1200 300 20 0 1 0", // cut short of starttime
		field(4, "pp"),  // ppid not a number
		field(14, "x"),  // utime not a number
		field(16, "-1"), // negative cutime
		field(22, "1e3"),
	} {
		if got, err := loadtest.ParseProcStat([]byte(bad)); err == nil {
			t.Errorf("ParseProcStat(%q) = %+v, want an error", bad, got)
		}
	}
}

func TestTreeCPUKeepsExitedChildren(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	self, err := loadtest.ReadProcessTimes(os.Getpid())
	if err != nil || self.Parent <= 0 {
		t.Fatalf("ReadProcessTimes(self) = %+v, %v", self, err)
	}
	// A child that spends about 300ms of CPU, says so, then waits to be
	// told to go.
	child := exec.Command("sh", "-c", `i=0; while [ $i -lt 400000 ]; do i=$((i+1)); done; echo spent; read line`)
	stdin, err := child.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "spent\n" {
		t.Fatalf("the child said %q, %v", line, err)
	}
	running, err := loadtest.ReadProcessTimes(child.Process.Pid)
	if err != nil || running.Self <= 0 {
		t.Fatalf("the child's times: %+v, %v", running, err)
	}
	if running.Parent != os.Getpid() {
		t.Fatalf("the child's parent is %d, want %d", running.Parent, os.Getpid())
	}
	// This process's own time first: it only grows until the tree's reading.
	mine, err := loadtest.ReadProcessTimes(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	live, err := loadtest.TreeCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if live < mine.Self+mine.Children+running.Self {
		t.Errorf("tree %v with a live child, less than this process %v plus the child %v", live, mine.Self+mine.Children, running.Self)
	}
	if _, err := stdin.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	if err := child.Wait(); err != nil {
		t.Fatal(err)
	}
	after, err := loadtest.ReadProcessTimes(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if got := after.Children - self.Children; got < running.Self {
		t.Errorf("children time grew by %v once the child was waited for, less than its %v", got, running.Self)
	}
	exited, err := loadtest.TreeCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// The test's own threads kept running in between: the tree only grows.
	if exited < live {
		t.Errorf("tree %v after the child exited, less than %v while it ran", exited, live)
	}
	if _, err := loadtest.TreeCPU(1 << 30); err == nil {
		t.Error("TreeCPU of a pid that does not exist: no error")
	}
}

// TestPostmaster finds the local PostgreSQL server's postmaster, whose tree
// keeps a backend's CPU after the backend exits.
func TestPostmaster(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	dbURL, conn := connectDB(t)
	ctx := t.Context()
	pm, ok, err := loadtest.Postmaster(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		// A server whose data directory is here (the test command's
		// throwaway cluster) runs here: it must have been found.
		var dir string
		if err := conn.QueryRow(ctx, "SELECT current_setting('data_directory')").Scan(&dir); err == nil {
			if _, err := os.Stat(dir + "/postmaster.pid"); err == nil {
				t.Fatalf("the server's data directory %s is on this machine, but Postmaster did not find the server", dir)
			}
		}
		t.Skip("the PostgreSQL server of DATABASE_URL is not on this machine")
	}
	comm, err := os.ReadFile("/proc/" + strconv.Itoa(pm) + "/comm")
	if c := strings.TrimSpace(string(comm)); err != nil || (c != "postgres" && c != "postmaster") {
		t.Errorf("postmaster %d runs %q (%v)", pm, comm, err)
	}
	before, err := loadtest.TreeCPU(pm)
	if err != nil || before <= 0 {
		t.Fatalf("TreeCPU(postmaster) = %v, %v", before, err)
	}
	// A backend of its own burns CPU, then goes.
	busy, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	var backend int32
	if err := busy.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&backend); err != nil {
		t.Fatal(err)
	}
	if _, err := busy.Exec(ctx, "SELECT count(*) FROM generate_series(1, 3000000)"); err != nil {
		t.Fatal(err)
	}
	spent, err := loadtest.ProcessCPU(int(backend))
	if err != nil {
		t.Fatal(err)
	}
	busy.Close(ctx)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat("/proc/" + strconv.Itoa(int(backend))); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the backend did not exit")
		}
	}
	after, err := loadtest.TreeCPU(pm)
	if err != nil {
		t.Fatal(err)
	}
	if after-before < spent {
		t.Errorf("the postmaster's tree grew by %v, less than the %v of a backend that exited", after-before, spent)
	}
}
