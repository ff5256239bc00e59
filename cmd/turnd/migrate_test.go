package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/turnd/turnd/migrations"
)

// TestMigrateCommand runs `turnd migrate` on both stores: down-to 0 leaves
// every migration pending, up applies them in order, down-to rolls back
// the ones above its version newest first, and migrate without an action
// applies what is pending.
func TestMigrateCommand(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		args := b.args(t)
		dialect := migrations.SQLite
		if b.name == "postgres" {
			dialect = migrations.Postgres
		}
		ms, err := migrations.List(dialect)
		if err != nil {
			t.Fatal(err)
		}
		latest := len(ms)
		run := func(cmd ...string) string {
			t.Helper()
			code, stdout, stderr := runTurnd(t, childEnv(), append(append([]string{"migrate"}, cmd...), args...)...)
			if code != 0 {
				t.Fatalf("turnd migrate %v: exit code %d; stderr:\n%s", cmd, code, stderr)
			}
			return stdout
		}
		// lines returns the lines turnd prints for migrations from..to
		// (downwards when from > to) with verb.
		lines := func(verb string, from, to int) string {
			var b strings.Builder
			step := 1
			if from > to {
				step = -1
			}
			for v := from; v != to+step; v += step {
				fmt.Fprintf(&b, "%s %04d_%s\n", verb, v, ms[v-1].Name)
			}
			return b.String()
		}
		checkStatus := func(applied int) {
			t.Helper()
			out := strings.Split(strings.TrimSpace(run("status")), "\n")
			if len(out) != latest+1 || strings.Fields(out[0])[0] != "VERSION" {
				t.Fatalf("status printed %d lines, want a header and %d:\n%s", len(out), latest, strings.Join(out, "\n"))
			}
			for i, line := range out[1:] {
				f := strings.Fields(line)
				state, at := "applied", "an applied time"
				if i >= applied {
					state, at = "pending", "-"
				}
				if len(f) != 4 || f[0] != fmt.Sprint(i+1) || f[1] != state || f[3] != ms[i].Name ||
					(state == "pending") != (f[2] == "-") {
					t.Errorf("status line %q, want version %d %s with %s, name %s", line, i+1, state, at, ms[i].Name)
				}
			}
		}

		// A Postgres schema of the harness is migrated; an SQLite file
		// is new (and down-to 0 on it does nothing).
		down := run("down-to", "0")
		if b.name == "postgres" && stripTimes(down) != lines("rolled back", latest, 1) {
			t.Errorf("down-to 0 printed\n%s\nwant\n%s", down, lines("rolled back", latest, 1))
		}
		checkStatus(0)
		if got := stripTimes(run("up")); got != lines("applied", 1, latest) {
			t.Errorf("up printed\n%s\nwant\n%s", got, lines("applied", 1, latest))
		}
		checkStatus(latest)
		if got := stripTimes(run("down-to", fmt.Sprint(latest-2))); got != lines("rolled back", latest, latest-1) {
			t.Errorf("down-to %d printed\n%s\nwant\n%s", latest-2, got, lines("rolled back", latest, latest-1))
		}
		checkStatus(latest - 2)
		if got := stripTimes(run()); got != lines("applied", latest-1, latest) {
			t.Errorf("migrate printed\n%s\nwant\n%s", got, lines("applied", latest-1, latest))
		}
		checkStatus(latest)
		if got := run("up"); got != "" {
			t.Errorf("up with nothing pending printed %q", got)
		}
	})
}

// stripTimes drops the durations turnd prints after each migration.
func stripTimes(out string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(out, "\n") {
		if i := strings.LastIndex(line, " ("); i >= 0 {
			line = line[:i] + "\n"
		}
		b.WriteString(line)
	}
	return b.String()
}

// TestMigrateCommandUsage: a wrong action or version is a usage error
// (exit 2) that touches no database; help is not.
func TestMigrateCommandUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"down-to"},
		{"down-to", "-1"},
		{"down-to", "x"},
		{"down-to", "--data", "x.db"},
		{"sideways"},
		{"status", "extra"},
	} {
		code, _, stderr := runTurnd(t, childEnv(), append([]string{"migrate"}, args...)...)
		if code != 2 {
			t.Errorf("turnd migrate %v: exit code %d, want 2; stderr:\n%s", args, code, stderr)
		}
	}
	code, stdout, _ := runTurnd(t, childEnv(), "migrate", "help")
	if code != 0 || !strings.Contains(stdout, "down-to VERSION") {
		t.Errorf("turnd migrate help: exit code %d, stdout:\n%s", code, stdout)
	}
}

// TestMigrateCitus: migrate --citus distributes the tables only on a
// Citus coordinator; on plain Postgres it migrates, then fails saying so,
// and on the embedded store it is a usage error.
func TestMigrateCitus(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		code, _, stderr := runTurnd(t, childEnv(), append([]string{"migrate", "up", "--citus"}, b.args(t)...)...)
		switch b.name {
		case "postgres":
			if code != 1 || !strings.Contains(stderr, "not a Citus coordinator") {
				t.Errorf("turnd migrate --citus on plain Postgres: exit code %d, want 1 naming Citus; stderr:\n%s", code, stderr)
			}
		default:
			if code != 2 || !strings.Contains(stderr, "need a Postgres database") {
				t.Errorf("turnd migrate --citus on SQLite: exit code %d, want 2; stderr:\n%s", code, stderr)
			}
		}
	})
}
