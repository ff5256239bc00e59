package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/turnd/turnd/client"
)

const postUsage = `turnd post [flags] SESSION [FILE|-]

Posts a turn read from FILE (or standard input) to SESSION and prints its
results. The body is a native turn ({"id", "calls": [...]}) or, with
--format, the model provider's own message (openai.chat,
openai.responses, anthropic.messages), and then the messages to append are
printed as JSON. A turn without an id gets one, kept across retries.`

// runPost is `turnd post`.
func runPost(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, env func(string) (string, bool)) error {
	var (
		f            cliFlags
		format       string
		turnID       string
		wait         time.Duration
		async        bool
		placeholders bool
	)
	fs := newCLIFlagSet("post", postUsage, stderr, env, &f)
	fs.StringVar(&format, "format", "", "the body's provider format: openai.chat, openai.responses or anthropic.messages")
	fs.StringVar(&turnID, "turn-id", "", "the turn's id (default: the body's, else generated)")
	fs.DurationVar(&wait, "wait", 0, "hold until the turn settles or this long passes (Prefer: wait)")
	fs.BoolVar(&async, "async", false, "answer at once, without waiting for the turn (Prefer: respond-async)")
	fs.BoolVar(&placeholders, "placeholders", false, "with --format: answer waiting calls with placeholders (pending=placeholder)")
	pos, err := parseCLI(fs, args, 1, 2)
	if err != nil {
		return err
	}
	body, err := readInput(pos[1:], stdin)
	if err != nil {
		return err
	}
	c, err := f.client()
	if err != nil {
		return err
	}
	opts := client.PostOptions{Wait: wait, Async: async}
	if format != "" {
		reply, err := c.PostProviderJSON(ctx, pos[0], format, body, &client.ProviderOptions{PostOptions: opts, TurnID: turnID, Placeholders: placeholders})
		if err != nil {
			return err
		}
		if !reply.Ready {
			fmt.Fprintf(stderr, "turnd post: turn %s is %s: no messages yet (turnd turn %s %s --wait 60s)\n", reply.Turn.ID, reply.Status, pos[0], reply.Turn.ID)
			return printTurn(stdout, reply.Turn, f.json)
		}
		if reply.Placeholders > 0 {
			fmt.Fprintf(stderr, "turnd post: %d placeholder(s); the real results later at %s\n", reply.Placeholders, reply.FollowUp)
		}
		_, err = stdout.Write(append(reply.Messages, '\n'))
		return err
	}
	var req client.TurnRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return fmt.Errorf("the turn is not a native turn's JSON ({\"calls\": [...]}; --format for a provider's): %w", err)
	}
	if turnID != "" {
		req.ID = turnID
	}
	turn, err := c.PostTurn(ctx, pos[0], req, &opts)
	if err != nil {
		return err
	}
	return printTurn(stdout, turn, f.json)
}

// readInput reads the named file, or standard input for "-" or none.
func readInput(names []string, stdin io.Reader) ([]byte, error) {
	if len(names) == 0 || names[0] == "-" {
		return io.ReadAll(stdin)
	}
	return os.ReadFile(names[0])
}

// printTurn prints a turn: as its JSON, or a header line and one line per
// result.
func printTurn(w io.Writer, t *client.Turn, asJSON bool) error {
	if asJSON {
		return printJSON(w, t)
	}
	replayed := ""
	if t.Replayed {
		replayed = " (replayed)"
	}
	fmt.Fprintf(w, "turn %s  session %s  %s%s  %d result(s)\n", t.ID, t.SessionID, t.Status, replayed, len(t.Results))
	for _, r := range t.Results {
		line := fmt.Sprintf("  %s  %-9s %s  ", r.CallID, r.Status, r.Name)
		switch {
		case r.Error != nil:
			line += r.Error.Code + ": " + r.Error.Message
		default:
			line += compact(r.Output, 0)
		}
		if r.Truncated {
			line += fmt.Sprintf("  [truncated from %d bytes; full output: /v1/outputs/%s]", r.OriginalBytes, r.OutputID)
		}
		if r.ReplayedFrom != "" {
			line += "  [replayed from turn " + r.ReplayedFrom + "]"
		}
		if _, err := fmt.Fprintln(w, line); err != nil {
			return err
		}
	}
	return nil
}
