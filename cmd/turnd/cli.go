package main

// The client subcommands (tail, post, complete, turn, approve, …): each
// is built on package client and talks to a running turnd at --url
// (TURND_URL) with --token (TURND_TOKEN).

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/turnd/turnd/client"
)

// cliFlags are the flags every client subcommand takes.
type cliFlags struct {
	url, token string
	json       bool
}

// newCLIFlagSet returns a flag set for subcommand name with the common
// flags registered; usage is its synopsis and description.
func newCLIFlagSet(name, usage string, stderr io.Writer, env func(string) (string, bool), f *cliFlags) *flag.FlagSet {
	fs := flag.NewFlagSet("turnd "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: %s\n\nFlags:\n", strings.TrimSpace(usage))
		fs.PrintDefaults()
	}
	u, ok := env("TURND_URL")
	if !ok || u == "" {
		u = client.DefaultURL
	}
	tok, _ := env("TURND_TOKEN")
	fs.StringVar(&f.url, "url", u, "turnd's base URL (TURND_URL)")
	fs.StringVar(&f.token, "token", tok, "bearer token (TURND_TOKEN)")
	fs.BoolVar(&f.json, "json", false, "print JSON for machines")
	return fs
}

// parseCLI parses args, allowing flags after the positional arguments
// (`turnd tail s1 --json`), and checks their count.
func parseCLI(fs *flag.FlagSet, args []string, minArgs, maxArgs int) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	if len(pos) < minArgs || len(pos) > maxArgs {
		fs.Usage()
		return nil, usageError{fmt.Sprintf("%s: wrong number of arguments", fs.Name())}
	}
	return pos, nil
}

func (f *cliFlags) client(opts ...client.Option) (*client.Client, error) {
	if f.token != "" {
		opts = append(opts, client.WithToken(f.token))
	}
	return client.New(f.url, opts...)
}

// printJSON writes v as one line of JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// compact returns raw JSON on one line, cut to max bytes (0: whole).
func compact(raw json.RawMessage, max int) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		b.Reset()
		b.Write(raw)
	}
	s := b.String()
	if max > 0 && len(s) > max {
		s = s[:max] + "…"
	}
	return s
}

// secretFromEnv reads a secret from the variable name, else from the file
// named by name_FILE; "" when neither is set.
func secretFromEnv(env func(string) (string, bool), name string) (string, error) {
	if v, ok := env(name); ok && strings.TrimSpace(v) != "" {
		return strings.TrimSpace(v), nil
	}
	return fileVar(env, name+"_FILE")
}
