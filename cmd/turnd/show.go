package main

import (
	"context"
	"errors"
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
	var (
		f     cliFlags
		limit int
	)
	fs := newCLIFlagSet("sessions", sessionsUsage, stderr, env, &f)
	fs.IntVar(&limit, "limit", 0, "list at most this many (0: all)")
	if _, err := parseCLI(fs, args, 0, 0); err != nil {
		return err
	}
	c, err := f.client()
	if err != nil {
		return err
	}
	return printListing(stdout, c.Sessions(ctx, client.ListOptions{Limit: pageLimit(limit)}), limit, f.json, "GET /v1/sessions",
		func(s client.SessionSummary) string {
			return fmt.Sprintf("%s  %d turn(s)  %d pending  last %s", s.ID, s.Turns, s.Pending, s.LastActivity.Local().Format(time.DateTime))
		})
}

const turnsUsage = `turnd turns [flags] SESSION

Lists a session's turns, newest first: id, status, calls, calls parked
now, times. Needs a turnd that serves GET /v1/sessions/{id}/turns.`

// runTurns is `turnd turns`.
func runTurns(ctx context.Context, args []string, stdout, stderr io.Writer, env func(string) (string, bool)) error {
	var (
		f      cliFlags
		limit  int
		status string
	)
	fs := newCLIFlagSet("turns", turnsUsage, stderr, env, &f)
	fs.IntVar(&limit, "limit", 0, "list at most this many (0: all)")
	fs.StringVar(&status, "status", "", "only turns in this status (running, waiting, completed, failed, cancelled)")
	pos, err := parseCLI(fs, args, 1, 1)
	if err != nil {
		return err
	}
	c, err := f.client()
	if err != nil {
		return err
	}
	return printListing(stdout, c.Turns(ctx, pos[0], client.ListOptions{Limit: pageLimit(limit), Status: status}), limit, f.json, "GET /v1/sessions/{id}/turns",
		func(t client.TurnSummary) string {
			settled := "-"
			if t.SettledAt != nil {
				settled = t.SettledAt.Local().Format(time.DateTime)
			}
			return fmt.Sprintf("%s  %-9s %d call(s)  %d pending  created %s  settled %s", t.ID, t.Status, t.Calls, t.Pending, t.CreatedAt.Local().Format(time.DateTime), settled)
		})
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
