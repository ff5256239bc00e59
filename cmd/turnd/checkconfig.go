package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/turnd/turnd/tool"
)

const checkConfigUsage = `Usage: turnd check-config FILE
       turnd check-config --print-schema

Checks the tool config FILE (turnd.yaml) without starting or reaching any
tool: against its JSON Schema, and with the loader turnd serve uses, ${VAR}
read from this environment. Prints a one-line summary and exits 0 when it is
valid; prints each problem as FILE:LINE:COLUMN: message and exits 1 when it
is not. docs/config.md describes every key.`

// checkConfig is `turnd check-config`: it checks a tool config file
// (exit 1 on problems, each printed to stderr with its line and column)
// or prints the config's JSON Schema (--print-schema).
func checkConfig(args []string, stdout, stderr io.Writer, env func(string) (string, bool)) error {
	fs := flag.NewFlagSet("turnd check-config", flag.ContinueOnError)
	fs.SetOutput(stderr)
	printSchema := fs.Bool("print-schema", false, "print the JSON Schema of the tool config and exit")
	fs.Usage = func() {
		fmt.Fprintln(stderr, checkConfigUsage+"\n\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{"check-config: " + err.Error()}
	}
	if *printSchema {
		if fs.NArg() > 0 {
			fs.Usage()
			return usageError{"check-config: --print-schema takes no FILE"}
		}
		_, err := stdout.Write(tool.ConfigSchema())
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return usageError{"check-config: one FILE is required"}
	}
	file := fs.Arg(0)
	sum, err := tool.Check(file, tool.Options{Env: env})
	if err == nil {
		fmt.Fprintf(stdout, "%s: valid: %s\n", file, sum)
		return nil
	}
	problems := tool.ConfigErrors(err)
	if len(problems) == 0 {
		return err // not about the file's content: it could not be read, ...
	}
	for _, ce := range problems {
		fmt.Fprintln(stderr, ce.Located())
	}
	if len(problems) == 1 {
		return fmt.Errorf("%s: 1 problem", file)
	}
	return fmt.Errorf("%s: %d problems", file, len(problems))
}
