// Command turnd is the turnd server: `turnd serve`, `turnd migrate`,
// `turnd version`, `turnd bench`, and the client subcommands (tail, post,
// turn, turns, sessions, complete, approvals, approve, reject). It only
// wires things together: flags and environment into a Config, the store,
// the logger, the HTTP server, and shutdown in reverse order.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		// After the first signal the default disposition is back: a second
		// one ends the process at once instead of waiting out the grace.
		// Its running turns keep their leases and are resumed by the next
		// process, as after a crash.
		<-ctx.Done()
		stop()
	}()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.LookupEnv); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			// `turnd serve -h`: the flags are printed; asking is no error.
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "turnd:", err)
		var ue usageError
		if errors.As(err, &ue) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

const usage = `turnd executes the tool calls of LLM assistant turns.

Usage:
  turnd serve   [flags]   run the HTTP server (migrates the schema first)
  turnd migrate [flags]   apply pending schema migrations and exit
                 status, down-to VERSION: see 'turnd migrate help'
  turnd version           print version information
  turnd bench   [flags]   measure a turnd under load (see BENCHMARKS.md)
  turnd healthcheck       exit 0 when the local turnd is ready (for containers)
  turnd check-config FILE check a tool config (docs/config.md) and exit

Clients of a running turnd (--url or TURND_URL, --token or TURND_TOKEN):
  turnd tail     SESSION                 follow a session's ledger
  turnd post     SESSION [FILE|-]        post a turn, print its results
  turnd turn     SESSION TURN            print a turn
  turnd sessions                         list the sessions, newest first
  turnd turns    SESSION                 list a session's turns, newest first
  turnd complete KEY --output JSON | --error CODE:MESSAGE | --file PATH
                                         deliver a deferred call's result
  turnd approvals                        list the calls waiting for approval
  turnd approve  SESSION TURN CALL [--arguments JSON|@FILE] [--by NAME]
                                         approve a call (with edited arguments)
  turnd reject   SESSION TURN CALL --message TEXT [--by NAME]
                                         reject a call; the model reads the message

Run 'turnd serve -h' for the flags. Every flag also reads an environment
variable (shown in its help); secrets take a _FILE variant.`

// subcommand runs one subcommand on its arguments (those after its name).
type subcommand func(ctx context.Context, args []string, stdout, stderr io.Writer, env func(string) (string, bool)) error

// subcommands are the subcommands that take run's streams as they are;
// serve, version and help are run's own cases.
var subcommands = map[string]subcommand{
	"migrate":     runMigrate,
	"bench":       runBench,
	"tail":        runTail,
	"post":        withStdin(runPost),
	"turn":        runTurn,
	"sessions":    runSessions,
	"turns":       runTurns,
	"complete":    withStdin(runComplete),
	"approve":     withStdin(runApprove),
	"reject":      runReject,
	"approvals":   runApprovals,
	"healthcheck": healthcheck,
	"check-config": func(_ context.Context, args []string, stdout, stderr io.Writer, env func(string) (string, bool)) error {
		return checkConfig(args, stdout, stderr, env)
	},
}

// withStdin is a subcommand that reads the process's standard input.
func withStdin(f func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, env func(string) (string, bool)) error) subcommand {
	return func(ctx context.Context, args []string, stdout, stderr io.Writer, env func(string) (string, bool)) error {
		return f(ctx, args, os.Stdin, stdout, stderr, env)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer, env func(string) (string, bool)) error {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return usageError{"a subcommand is required"}
	}
	if sub, ok := subcommands[args[0]]; ok {
		return sub(ctx, args[1:], stdout, stderr, env)
	}
	switch args[0] {
	case "serve":
		cfg, err := parseConfig("serve", args[1:], stderr, env)
		if err != nil {
			return err
		}
		return serve(ctx, cfg, stderr)
	case "version", "--version", "-v":
		printVersion(stdout)
		return nil
	case "help", "-h", "--help":
		fmt.Fprintln(stdout, usage)
		return nil
	default:
		fmt.Fprintln(stderr, usage)
		return usageError{fmt.Sprintf("unknown subcommand %q", args[0])}
	}
}
