package main

import (
	"context"
	"io"
	"time"

	"github.com/turnd/turnd/client"
)

const turnUsage = `turnd turn [flags] SESSION TURN

Prints a turn: its status and its results in call order. With --wait it
is held until the turn settles or the wait is over.`

// runTurn is `turnd turn`.
func runTurn(ctx context.Context, args []string, stdout, stderr io.Writer, env func(string) (string, bool)) error {
	var (
		f    cliFlags
		wait time.Duration
	)
	fs := newCLIFlagSet("turn", turnUsage, stderr, env, &f)
	fs.DurationVar(&wait, "wait", 0, "wait up to this long for the turn to settle")
	pos, err := parseCLI(fs, args, 2, 2)
	if err != nil {
		return err
	}
	c, err := f.client()
	if err != nil {
		return err
	}
	var t *client.Turn
	if wait > 0 {
		wctx, cancel := context.WithTimeout(ctx, wait)
		t, err = c.Await(wctx, pos[0], pos[1])
		cancel()
		if err != nil && t != nil && wctx.Err() != nil && ctx.Err() == nil {
			err = nil // the wait is over: print the turn as it stands
		}
	} else {
		t, err = c.Turn(ctx, pos[0], pos[1])
	}
	if err != nil {
		return err
	}
	return printTurn(stdout, t, f.json)
}
