// Command turnd is the turnd server: `turnd serve`, `turnd migrate`,
// `turnd version`. It only wires things together: flags and environment
// into a Config, the store, the logger, the HTTP server, and shutdown in
// reverse order.
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
  turnd version           print version information
  turnd bench   [flags]   measure a turnd under load (see BENCHMARKS.md)
  turnd healthcheck       exit 0 when the local turnd is ready (for containers)

Run 'turnd serve -h' for the flags. Every flag also reads an environment
variable (shown in its help); secrets take a _FILE variant.`

func run(ctx context.Context, args []string, stdout, stderr io.Writer, env func(string) (string, bool)) error {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return usageError{"a subcommand is required"}
	}
	switch args[0] {
	case "serve":
		cfg, err := parseConfig("serve", args[1:], stderr, env)
		if err != nil {
			return err
		}
		return serve(ctx, cfg, stderr)
	case "migrate":
		cfg, err := parseConfig("migrate", args[1:], stderr, env)
		if err != nil {
			return err
		}
		return migrate(ctx, cfg, stderr)
	case "bench":
		return runBench(ctx, args[1:], stdout, stderr, env)
	case "healthcheck":
		return healthcheck(ctx, args[1:], stdout, stderr, env)
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
