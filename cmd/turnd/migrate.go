package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/turnd/turnd/migrations"
	"github.com/turnd/turnd/store/postgres"
	"github.com/turnd/turnd/turn"
)

const migrateUsage = `Usage:
  turnd migrate [up] [flags]          apply the pending schema migrations
  turnd migrate status [flags]        list the migrations, applied or pending
  turnd migrate down-to VERSION [flags]
                                      roll back the migrations above VERSION
                                      (0: all of them; their data is lost)

The store is chosen as serve chooses it: --database-url (DATABASE_URL) for
Postgres, else the embedded SQLite file --data (TURND_DATA). With --citus
(TURND_CITUS) on a Citus coordinator, up then distributes the tables by
session (docs/citus.md). The action comes before the flags. Run
'turnd migrate -h' for the flags.`

// migrator is a store whose migrations the command runs: both stores are.
type migrator interface {
	Migrations(ctx context.Context) (*migrations.Runner, error)
}

// runMigrate is `turnd migrate [status|up|down-to VERSION] [flags]`.
func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer, env func(string) (string, bool)) (err error) {
	action, version := "up", 0
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		action, args = args[0], args[1:]
		switch action {
		case "up", "status":
		case "down-to":
			if len(args) == 0 || strings.HasPrefix(args[0], "-") {
				fmt.Fprintln(stderr, migrateUsage)
				return usageError{"migrate down-to: a VERSION is required"}
			}
			v, err := strconv.Atoi(args[0])
			if err != nil || v < 0 {
				return usageError{fmt.Sprintf("migrate down-to: %q is not a version (0 or more)", args[0])}
			}
			version, args = v, args[1:]
		case "help":
			fmt.Fprintln(stdout, migrateUsage)
			return nil
		default:
			fmt.Fprintln(stderr, migrateUsage)
			return usageError{fmt.Sprintf("migrate: unknown action %q", action)}
		}
	}
	c, err := parseConfig("migrate", args, stderr, env)
	if err != nil {
		return err
	}
	log := newLogger(c, stderr)
	st, err := openStore(ctx, c, log)
	if err != nil {
		return err
	}
	defer st.Close()
	m, ok := st.(migrator)
	if !ok {
		return fmt.Errorf("migrate: the %T store has no migrations", st)
	}
	r, err := m.Migrations(ctx)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, r.Close()) }()

	switch action {
	case "status":
		sts, err := r.Status(ctx)
		if err != nil {
			return err
		}
		return printStatus(stdout, sts)
	case "down-to":
		res, err := r.DownTo(ctx, version)
		if err := printResults(stdout, "rolled back", res, err); err != nil {
			return err
		}
	default:
		res, err := r.Up(ctx)
		if err := printResults(stdout, "applied", res, err); err != nil {
			return err
		}
		if c.Citus {
			if err := distribute(ctx, st, stdout); err != nil {
				return err
			}
		}
	}
	cur, latest, err := st.SchemaVersion(ctx)
	if err != nil {
		return err
	}
	log.Info("schema version", "version", cur, "latest", latest)
	return nil
}

// distribute distributes the migrated tables on a Citus coordinator
// (migrate --citus).
func distribute(ctx context.Context, st turn.MigratedStore, stdout io.Writer) error {
	pg, ok := st.(*postgres.Store)
	if !ok {
		return usageError{"migrate --citus: needs a Postgres database (DATABASE_URL)"}
	}
	if err := pg.Distribute(ctx); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "distributed the tables by session (Citus)")
	return nil
}

// printResults writes one line per migration run (done: "applied" or
// "rolled back"), those run before a failure too, and returns err.
func printResults(w io.Writer, done string, res []migrations.Result, err error) error {
	for _, m := range res {
		fmt.Fprintf(w, "%s %04d_%s (%v)\n", done, m.Version, m.Name, m.Duration.Round(time.Millisecond))
	}
	return err
}

// printStatus writes one line per migration: its version, whether it is
// applied and when, and its name.
func printStatus(w io.Writer, sts []migrations.Status) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VERSION\tSTATE\tAPPLIED AT\tNAME")
	for _, s := range sts {
		state, at := "pending", "-"
		if s.Applied {
			state, at = "applied", s.AppliedAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", s.Version, state, at, s.Name)
	}
	return tw.Flush()
}
