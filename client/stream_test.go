package client_test

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/turnd/turnd/client"
	"github.com/turnd/turnd/internal/streamfix"
)

// Streamed turns through the client against a real turnd: a native NDJSON
// turn written line by line, a provider stream posted as a reader, and a
// provider stream teed: the caller reads it whole while turnd gets every
// byte, and the answer is the tool messages to append.
func TestStreamedTurns(t *testing.T) {
	t.Parallel()
	againstEachStore(t, func(t *testing.T, srv *server, c *client.Client) {
		ctx := ctxFor(t)

		pr, pw := io.Pipe()
		go func() {
			for _, line := range []string{`{"id":"nd-1"}`, `{"id":"c1","name":"echo","arguments":{"text":"a"}}`, `{"id":"c2","name":"echo","arguments":{"text":"b"}}`} {
				if _, err := io.WriteString(pw, line+"\n"); err != nil {
					return
				}
			}
			pw.Close()
		}()
		turn, err := c.PostTurnStream(ctx, "streams", pr, nil)
		if err != nil {
			t.Fatal(err)
		}
		if turn.ID != "nd-1" || turn.Status != "completed" || len(turn.Results) != 2 || turn.Results[1].CallID != "c2" {
			t.Fatalf("NDJSON turn: %+v", turn)
		}

		calls := []streamfix.Call{{ID: "call_1", Name: "echo", Arguments: `{"text":"x"}`}, {ID: "call_2", Name: "now", Arguments: `{}`}}
		chat := streamfix.Chat("chatcmpl-s1", calls, "tool_calls")
		reply, err := c.PostProviderStream(ctx, "streams", client.FormatOpenAIChat, strings.NewReader(chat.String()), nil)
		if err != nil {
			t.Fatal(err)
		}
		if !reply.Ready || !strings.Contains(string(reply.Messages), `"tool_call_id":"call_2"`) {
			t.Fatalf("chat stream: %+v %s", reply, reply.Messages)
		}

		msgs := streamfix.Messages("msg_s2", calls, "tool_use")
		r, wait := c.TeeProviderStream(ctx, "streams", client.FormatAnthropic, strings.NewReader(msgs.String()), nil)
		seen, err := io.ReadAll(r) // what the caller's SDK reads
		if err != nil || string(seen) != msgs.String() {
			t.Fatalf("the caller read %d bytes (%v), want the whole stream", len(seen), err)
		}
		reply, err = wait()
		if err != nil {
			t.Fatal(err)
		}
		if !reply.Ready || !strings.Contains(string(reply.Messages), `"tool_use_id":"call_1"`) {
			t.Fatalf("teed stream: %+v %s", reply, reply.Messages)
		}

		// A stream cut before its finish event records nothing.
		cut := chat.Parts[:chat.End]
		_, err = c.PostProviderStream(ctx, "streams", client.FormatOpenAIChat, strings.NewReader(strings.Join(cut, "")), &client.ProviderOptions{TurnID: "cut-1"})
		var apiErr *client.Error
		if !errors.As(err, &apiErr) || apiErr.Code != "stream_incomplete" {
			t.Fatalf("a cut stream: %v", err)
		}
	})
}
