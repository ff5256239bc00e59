package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"iter"
	"net/http"
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
		if err != nil && wctx.Err() != nil && ctx.Err() == nil {
			// The wait is over: print the turn as it stands.
			t, err = c.Turn(ctx, pos[0], pos[1])
		}
	} else {
		t, err = c.Turn(ctx, pos[0], pos[1])
	}
	if err != nil {
		return err
	}
	return printTurn(stdout, t, f.json)
}

const sessionsUsage = `turnd sessions [flags]

Lists the sessions, newest first: id, turns, calls parked now, last
activity. Needs a turnd that serves GET /v1/sessions.`

// runSessions is `turnd sessions`.
func runSessions(ctx context.Context, args []string, stdout, stderr io.Writer, env func(string) (string, bool)) error {
	l, err := parseListingCLI("sessions", sessionsUsage, args, 0, stderr, env, nil)
	if err != nil {
		return err
	}
	return printListing(stdout, l.c.Sessions(ctx, client.ListOptions{Limit: pageLimit(l.limit)}), l.limit, l.json, "GET /v1/sessions",
		func(s client.SessionSummary) string {
			return fmt.Sprintf("%s  %d turn(s)  %d pending  last %s", s.ID, s.Turns, s.Pending, s.LastActivity.Local().Format(time.DateTime))
		})
}

const turnsUsage = `turnd turns [flags] SESSION

Lists a session's turns, newest first: id, status, calls, calls parked
now, times. Needs a turnd that serves GET /v1/sessions/{id}/turns.`

// runTurns is `turnd turns`.
func runTurns(ctx context.Context, args []string, stdout, stderr io.Writer, env func(string) (string, bool)) error {
	var status string
	l, err := parseListingCLI("turns", turnsUsage, args, 1, stderr, env, func(fs *flag.FlagSet) {
		fs.StringVar(&status, "status", "", "only turns in this status (running, waiting, completed, failed, cancelled)")
	})
	if err != nil {
		return err
	}
	return printListing(stdout, l.c.Turns(ctx, l.pos[0], client.ListOptions{Limit: pageLimit(l.limit), Status: status}), l.limit, l.json, "GET /v1/sessions/{id}/turns",
		func(t client.TurnSummary) string {
			settled := "-"
			if t.SettledAt != nil {
				settled = t.SettledAt.Local().Format(time.DateTime)
			}
			return fmt.Sprintf("%s  %-9s %d call(s)  %d pending  created %s  settled %s", t.ID, t.Status, t.Calls, t.Pending, t.CreatedAt.Local().Format(time.DateTime), settled)
		})
}

// listingCLI is a listing subcommand as parsed: the common flags and
// --limit, its positional arguments, and its client.
type listingCLI struct {
	cliFlags
	limit int
	pos   []string
	c     *client.Client
}

// parseListingCLI parses the args of listing subcommand name, which takes
// nargs positional arguments; extra (if not nil) registers flags of its own.
func parseListingCLI(name, usage string, args []string, nargs int, stderr io.Writer, env func(string) (string, bool), extra func(*flag.FlagSet)) (*listingCLI, error) {
	l := &listingCLI{}
	fs := newCLIFlagSet(name, usage, stderr, env, &l.cliFlags)
	fs.IntVar(&l.limit, "limit", 0, "list at most this many (0: all)")
	if extra != nil {
		extra(fs)
	}
	var err error
	if l.pos, err = parseCLI(fs, args, nargs, nargs); err != nil {
		return nil, err
	}
	if l.c, err = l.client(); err != nil {
		return nil, err
	}
	return l, nil
}

// printListing prints at most limit items (0: all) of a listing of
// endpoint, each as its JSON or as line's text.
func printListing[T any](w io.Writer, items iter.Seq2[T, error], limit int, asJSON bool, endpoint string, line func(T) string) error {
	n := 0
	for it, err := range items {
		if err != nil {
			return listingError(err, endpoint)
		}
		if asJSON {
			err = printJSON(w, it)
		} else {
			_, err = fmt.Fprintln(w, line(it))
		}
		if err != nil {
			return err
		}
		if n++; n == limit {
			break
		}
	}
	return nil
}

// pageLimit is the page size for listing at most limit items (0: all).
func pageLimit(limit int) int {
	if limit > 0 && limit < 500 {
		return limit
	}
	return 0
}

// listingError says when the server is older than the listing endpoints.
func listingError(err error, endpoint string) error {
	var apiErr *client.Error
	if errors.As(err, &apiErr) && apiErr.Status == http.StatusMethodNotAllowed {
		return fmt.Errorf("this turnd does not serve %s (it is older than this client): %w", endpoint, err)
	}
	return err
}
