package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/turnd/turnd/client"
)

const completeUsage = `turnd complete [flags] KEY (--output JSON | --error CODE:MESSAGE | --file PATH)

Delivers a deferred call's result to its completion key (the key, ck_...,
or the complete URL a tool received). --output is a JSON value; --file
reads the output from a file (- for standard input): its JSON value when it
is JSON, else its text. Signed with Standard Webhooks when
TURND_COMPLETION_SIGNING_SECRET (or _FILE) is set. Prints the answer:
accepted, or already_completed.`

// runComplete is `turnd complete`.
func runComplete(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, env func(string) (string, bool)) error {
	var (
		f                    cliFlags
		output, errArg, file string
	)
	fs := newCLIFlagSet("complete", completeUsage, stderr, env, &f)
	fs.StringVar(&output, "output", "", "the call's output, a JSON value")
	fs.StringVar(&errArg, "error", "", "the call's failure, CODE:MESSAGE")
	fs.StringVar(&file, "file", "", "read the call's output from this file (- for standard input)")
	pos, err := parseCLI(fs, args, 1, 1)
	if err != nil {
		return err
	}
	given := 0
	for _, s := range []string{output, errArg, file} {
		if s != "" {
			given++
		}
	}
	if given != 1 {
		fs.Usage()
		return usageError{"turnd complete: give exactly one of --output, --error and --file"}
	}
	var d client.Delivery
	switch {
	case output != "":
		if !json.Valid([]byte(output)) {
			return usageError{"turnd complete: --output is not a JSON value (quote a string: --output '\"done\"')"}
		}
		d.Output = json.RawMessage(output)
	case errArg != "":
		code, msg, _ := strings.Cut(errArg, ":")
		if code == "" {
			return usageError{"turnd complete: --error wants CODE:MESSAGE"}
		}
		d.Error = &client.DeliveryError{Code: code, Message: strings.TrimSpace(msg)}
	default:
		data, err := readInput([]string{file}, stdin)
		if err != nil {
			return err
		}
		if json.Valid(data) {
			d.Output = json.RawMessage(data)
		} else {
			s, _ := json.Marshal(string(data))
			d.Output = s
		}
	}
	secret, err := secretFromEnv(env, "TURND_COMPLETION_SIGNING_SECRET")
	if err != nil {
		return err
	}
	var opts []client.Option
	if secret != "" {
		opts = append(opts, client.WithSigningSecret(secret))
	}
	c, err := f.client(opts...)
	if err != nil {
		return err
	}
	ack, err := c.Deliver(ctx, pos[0], d)
	if err != nil {
		return err
	}
	if f.json {
		return printJSON(stdout, ack)
	}
	_, err = fmt.Fprintln(stdout, ack.Status)
	return err
}
