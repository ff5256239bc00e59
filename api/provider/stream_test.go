package provider_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/turnd/turnd/api/provider"
	"github.com/turnd/turnd/internal/streamfix"
	"github.com/turnd/turnd/turn"
)

type collect struct {
	id    string
	begun int
	calls []turn.Call
}

func (c *collect) Begin(id string) error { c.id = id; c.begun++; return nil }
func (c *collect) Call(tc turn.Call) error {
	if c.begun != 1 {
		return fmt.Errorf("call %s before Begin", tc.ID)
	}
	c.calls = append(c.calls, tc)
	return nil
}

var fixtureCalls = []streamfix.Call{
	{ID: "a", Name: "read_file", Arguments: `{"path":"README.md"}`},
	{ID: "b", Name: "search", Arguments: `{"q":"lease renewal","limit":3}`},
}

func fixtures() map[provider.Format]streamfix.Stream {
	return map[provider.Format]streamfix.Stream{
		provider.OpenAIChat:        streamfix.Chat("chatcmpl-1", fixtureCalls, "tool_calls"),
		provider.OpenAIResponses:   streamfix.Responses("resp_1", fixtureCalls, "completed"),
		provider.AnthropicMessages: streamfix.Messages("msg_1", fixtureCalls, "tool_use"),
	}
}

// Every call reaches the handler as soon as its completing event is read,
// and the stream is whole only with its finish event and the end.
func TestReadStreamCallsAsTheyComplete(t *testing.T) {
	t.Parallel()
	for f, fx := range fixtures() {
		for k := range fx.Parts {
			var c collect
			err := f.ReadStream(strings.NewReader(strings.Join(fx.Parts[:k+1], "")), &c)
			want := 0
			for _, end := range fx.CallEnds {
				if end <= k {
					want++
				}
			}
			if len(c.calls) != want {
				t.Fatalf("%s, %d parts: %d calls, want %d", f, k+1, len(c.calls), want)
			}
			var ie *provider.IncompleteError
			switch {
			case k < fx.End && !errors.As(err, &ie):
				t.Fatalf("%s, %d parts: %v, want an IncompleteError", f, k+1, err)
			case k == len(fx.Parts)-1 && err != nil:
				t.Fatalf("%s whole: %v", f, err)
			}
		}
		var c collect
		if err := f.ReadStream(strings.NewReader(fx.String()), &c); err != nil || !strings.HasSuffix(c.id, "_1") && c.id != "chatcmpl-1" {
			t.Fatalf("%s: %v, id %q", f, err, c.id)
		}
		if fmt.Sprint(c.calls) != fmt.Sprint([]turn.Call{{ID: "a", Name: "read_file", Arguments: []byte(`{"path":"README.md"}`)}, {ID: "b", Name: "search", Arguments: []byte(`{"q":"lease renewal","limit":3}`)}}) {
			t.Fatalf("%s: calls %v", f, c.calls)
		}
	}
}

// No bytes make ReadStream panic or call the handler out of order.
func FuzzReadStream(f *testing.F) {
	for _, fx := range fixtures() {
		f.Add(fx.String())
	}
	f.Add("data: [DONE]\n\n")
	f.Fuzz(func(t *testing.T, body string) {
		for _, format := range provider.Formats() {
			var c collect
			_ = format.ReadStream(strings.NewReader(body), &c)
			if c.begun > 1 {
				t.Fatalf("%s: Begin called %d times", format, c.begun)
			}
		}
	})
}
