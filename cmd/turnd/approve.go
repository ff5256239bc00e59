package main

// The approval subcommands: approve, reject and approvals, on package
// client's Decide and Approvals.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode"

	"github.com/turnd/turnd/client"
)

const approveUsage = `turnd approve [flags] SESSION TURN CALL

Approves a call that waits for approval: its tool runs. --arguments runs
it with edited arguments instead of the posted ones: a JSON object, or
@FILE to read one from a file (@- for standard input). Prints the
answer: accepted, or already_decided when it had been approved before.`

const rejectUsage = `turnd reject [flags] SESSION TURN CALL --message TEXT

Rejects a call that waits for approval: its tool does not run, and its
result (status rejected) carries --message, which the model reads.
Prints the answer: accepted, or already_decided when it had been
rejected before.`

const approvalsUsage = `turnd approvals [flags]

Lists the calls waiting for approval, newest first, across sessions:
session, turn, call, tool, its arguments as posted (model output,
shown with control characters escaped), the deadline and the policy's
rule. Decide one with turnd approve or turnd reject.`

// runApprove is `turnd approve`.
func runApprove(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, env func(string) (string, bool)) error {
	var arguments string
	dc, err := parseDecisionCLI("approve", approveUsage, args, stderr, env, func(fs *flag.FlagSet) {
		fs.StringVar(&arguments, "arguments", "", "run the tool with these arguments: a JSON object, or @FILE (@- for standard input)")
	})
	if err != nil {
		return err
	}
	d := client.Decision{Decision: client.Approve, By: dc.by}
	if arguments != "" {
		if d.Arguments, err = editedArguments(arguments, stdin); err != nil {
			return err
		}
	}
	return dc.decide(ctx, d, stdout)
}

// runReject is `turnd reject`.
func runReject(ctx context.Context, args []string, stdout, stderr io.Writer, env func(string) (string, bool)) error {
	var message string
	dc, err := parseDecisionCLI("reject", rejectUsage, args, stderr, env, func(fs *flag.FlagSet) {
		fs.StringVar(&message, "message", "", "why, for the model to read (required; at most 4096 bytes)")
	})
	if err != nil {
		return err
	}
	if strings.TrimSpace(message) == "" {
		dc.fs.Usage()
		return usageError{"turnd reject: --message is required: it is what the model reads instead of the tool's output"}
	}
	return dc.decide(ctx, client.Decision{Decision: client.Reject, Message: message, By: dc.by}, stdout)
}

// decisionCLI is a decision subcommand as parsed: the common flags, --by
// and SESSION TURN CALL.
type decisionCLI struct {
	cliFlags
	by  string
	pos []string
	fs  *flag.FlagSet
}

// parseDecisionCLI parses the args of decision subcommand name; extra
// registers its own flags.
func parseDecisionCLI(name, usage string, args []string, stderr io.Writer, env func(string) (string, bool), extra func(*flag.FlagSet)) (*decisionCLI, error) {
	dc := &decisionCLI{}
	dc.fs = newCLIFlagSet(name, usage, stderr, env, &dc.cliFlags)
	dc.fs.StringVar(&dc.by, "by", "", "who decides, for the ledger")
	extra(dc.fs)
	var err error
	if dc.pos, err = parseCLI(dc.fs, args, 3, 3); err != nil {
		return nil, err
	}
	return dc, nil
}

// editedArguments reads --arguments: a JSON object, given inline or as
// @FILE (@- for standard input).
func editedArguments(arg string, stdin io.Reader) (json.RawMessage, error) {
	data, where := []byte(arg), "--arguments"
	if name, ok := strings.CutPrefix(arg, "@"); ok {
		var err error
		if data, err = readInput([]string{name}, stdin); err != nil {
			return nil, fmt.Errorf("turnd approve: reading --arguments: %w", err)
		}
		where = "--arguments " + arg
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil || obj == nil {
		why := "it is null"
		if err != nil {
			why = err.Error()
		}
		return nil, usageError{fmt.Sprintf("turnd approve: %s is not a JSON object (%s)", where, why)}
	}
	return json.RawMessage(data), nil
}

// decide posts d for the call (SESSION TURN CALL) and prints the answer.
func (dc *decisionCLI) decide(ctx context.Context, d client.Decision, stdout io.Writer) error {
	c, err := dc.client()
	if err != nil {
		return err
	}
	pos := dc.pos
	res, err := c.Decide(ctx, pos[0], pos[1], pos[2], d)
	if err != nil {
		return decisionError(err, d, pos)
	}
	if dc.json {
		return printJSON(stdout, res)
	}
	line := res.Decision + " " + res.Status
	if res.Edited {
		line += " (with edited arguments)"
	}
	_, err = fmt.Fprintln(stdout, line)
	return err
}

// decisionError says what was being decided and, for the problems a
// decision has of its own, what they mean.
func decisionError(err error, d client.Decision, pos []string) error {
	verb := "approving"
	if d.Decision == client.Reject {
		verb = "rejecting"
	}
	what := fmt.Sprintf("%s call %s of turn %s in session %s", verb, pos[2], pos[1], pos[0])
	var apiErr *client.Error
	if !errors.As(err, &apiErr) {
		return fmt.Errorf("%s: %w", what, err)
	}
	hint := ""
	switch apiErr.Code {
	case client.CodeNotAwaitingApproval:
		hint = " (the call is not waiting for approval: see turnd approvals)"
	case client.CodeApprovalExpired:
		hint = " (too late: the decision is recorded in the ledger as decision_late)"
	case client.CodeInvalidArguments:
		hint = " (nothing ran; the call still waits for a decision)"
	case "not_found":
		hint = " (no such session, turn or call)"
	}
	return fmt.Errorf("%s: %w%s", what, err, hint)
}

// runApprovals is `turnd approvals`.
func runApprovals(ctx context.Context, args []string, stdout, stderr io.Writer, env func(string) (string, bool)) error {
	l, err := parseListingCLI("approvals", approvalsUsage, args, 0, stderr, env, nil)
	if err != nil {
		return err
	}
	now := time.Now()
	return printListing(stdout, l.c.Approvals(ctx, client.ListOptions{Limit: pageLimit(l.limit)}), l.limit, l.json, "GET /v1/approvals",
		func(a client.Approval) string {
			deadline := "no deadline"
			if a.Deadline != nil {
				deadline = "deadline in " + a.Deadline.Sub(now).Round(time.Second).String() + " (then " + a.OnTimeout + ")"
			}
			return fmt.Sprintf("%s  %s  %s  %s  %s  waiting %s  %s  rule %s",
				printable(a.SessionID), printable(a.TurnID), printable(a.CallID), printable(a.Tool),
				printable(compact(a.Arguments, 200)), now.Sub(a.RequestedAt).Round(time.Second), deadline, printable(a.Rule))
		})
}

// printable escapes what a terminal would act on (control and format
// characters, invalid UTF-8) in text from the server, arguments above
// all: they are the model's output.
func printable(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == unicode.ReplacementChar && !strings.HasPrefix(s[i:], "\uFFFD"):
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unicode.IsPrint(r) || r == ' ':
			b.WriteRune(r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	return b.String()
}
