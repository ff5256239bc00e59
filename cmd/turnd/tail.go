package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/turnd/turnd/client"
)

const tailUsage = `turnd tail [flags] SESSION

Prints the session's ledger, one line per entry, and follows it live.
Each line starts with its seq: resume with --after SEQ. Coloured on a
terminal; --json prints each entry as the API's JSON, one per line.`

// runTail is `turnd tail`.
func runTail(ctx context.Context, args []string, stdout, stderr io.Writer, env func(string) (string, bool)) error {
	var (
		f        cliFlags
		after    int64
		follow   bool
		interval time.Duration
		color    string
	)
	fs := newCLIFlagSet("tail", tailUsage, stderr, env, &f)
	fs.Int64Var(&after, "after", 0, "start after this seq (the last one printed, to resume)")
	fs.BoolVar(&follow, "follow", true, "keep following new entries; false stops at the end of the ledger")
	fs.DurationVar(&interval, "interval", 500*time.Millisecond, "how often to read new entries while following")
	fs.StringVar(&color, "color", "auto", "auto (on a terminal), always or never")
	pos, err := parseCLI(fs, args, 1, 1)
	if err != nil {
		return err
	}
	if interval <= 0 {
		return usageError{"turnd tail: --interval must be positive"}
	}
	var colored bool
	switch color {
	case "auto":
		colored = isTerminal(stdout) && !f.json
	case "always":
		colored = true
	case "never":
	default:
		return usageError{fmt.Sprintf("turnd tail: --color %q: want auto, always or never", color)}
	}
	c, err := f.client()
	if err != nil {
		return err
	}
	session := pos[0]
	stopped := func() error {
		fmt.Fprintf(stderr, "turnd tail: stopped after seq %d (resume with --after %d)\n", after, after)
		return nil
	}
	for {
		page, err := c.LedgerPage(ctx, session, after, 0)
		if err != nil {
			if ctx.Err() != nil {
				return stopped()
			}
			return fmt.Errorf("reading the ledger of %s after seq %d: %w", session, after, err)
		}
		for _, l := range page.Lines {
			if f.json {
				err = printJSON(stdout, l)
			} else {
				_, err = fmt.Fprintln(stdout, formatLine(l, colored))
			}
			if err != nil {
				return err
			}
			after = l.Seq
		}
		if len(page.Lines) > 0 {
			continue
		}
		if !follow {
			return nil
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return stopped()
		case <-t.C:
		}
	}
}

// ANSI colours of the kinds.
const (
	ansiReset  = "\x1b[0m"
	ansiDim    = "\x1b[2m"
	ansiBold   = "\x1b[1m"
	ansiRed    = "\x1b[31m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
	ansiBlue   = "\x1b[34m"
	ansiCyan   = "\x1b[36m"
)

// kindColor is how a ledger line is coloured: by its outcome when it has
// one (an error is red whatever its kind), else by its kind.
func kindColor(l client.LedgerLine) string {
	var d struct {
		Status   string `json:"status"`
		Decision string `json:"decision"`
	}
	_ = json.Unmarshal(l.Data, &d)
	switch d.Status {
	case "error", "failed", "timed_out", "refused":
		return ansiRed
	case "cancelled", "rejected":
		return ansiYellow
	}
	switch l.Kind {
	case "call_decided":
		if d.Decision == "rejected" {
			return ansiBold + ansiYellow
		}
		return ansiBold + ansiGreen
	case "decision_late":
		return ansiRed
	case "turn_received", "turn_resumed":
		return ansiBold + ansiBlue
	case "call_refused", "completion_late":
		return ansiRed
	case "call_pending":
		return ansiYellow
	case "call_answered", "call_replayed":
		return ansiGreen
	case "turn_settled":
		return ansiBold + ansiCyan
	}
	return ""
}

// formatLine is one ledger line for people:
// "SEQ  TIME  TURN  CALL  KIND  DATA".
func formatLine(l client.LedgerLine, colored bool) string {
	call := "-"
	if l.CallID != nil {
		call = *l.CallID
	}
	at := l.At.Local().Format("15:04:05.000")
	data := compact(l.Data, 200)
	if !colored {
		return fmt.Sprintf("%6d  %s  %s  %s  %-15s %s", l.Seq, at, l.TurnID, call, l.Kind, data)
	}
	return fmt.Sprintf("%s%6d  %s%s  %s  %s  %s%-15s%s %s", ansiDim, l.Seq, at, ansiReset, l.TurnID, call, kindColor(l), l.Kind, ansiReset, data)
}
