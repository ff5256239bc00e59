package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/turnd/turnd/internal/streamfix"
)

// The README's Go recipe, run: a frontend streams a completion with the
// official OpenAI SDK, shows it to its user as it arrives, and tees the
// bytes the API sent to turnd, whose answer is the tool messages to append.

// teeToTurnd is an openai-go middleware that forwards a streamed
// completion, byte for byte as the API sent it, to turnd's turns URL while
// the SDK reads it; turnd's answer arrives on answer.
func teeToTurnd(turns, token string, answer chan<- *http.Response) option.Middleware {
	return func(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		resp, err := next(req)
		if err != nil || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			return resp, err
		}
		pr, pw := io.Pipe()
		upstream := resp.Body
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.TeeReader(upstream, pw), closeBoth{upstream, pw}}
		post, err := http.NewRequestWithContext(context.WithoutCancel(req.Context()), http.MethodPost, turns+"?format=openai.chat", pr)
		if err != nil {
			return nil, err
		}
		post.Header.Set("Content-Type", "text/event-stream")
		post.Header.Set("Authorization", "Bearer "+token)
		go func() {
			r, err := http.DefaultClient.Do(post)
			if err != nil {
				_ = pr.CloseWithError(err)
				answer <- nil
				return
			}
			answer <- r
		}()
		return resp, nil
	}
}

// closeBoth closes the API's body and then turnd's (the end of the body
// that tells turnd the stream is whole).
type closeBoth struct {
	upstream io.Closer
	turnd    *io.PipeWriter
}

func (c closeBoth) Close() error {
	err := c.upstream.Close()
	_ = c.turnd.Close()
	return err
}

func TestTeeRecipe(t *testing.T) {
	t.Parallel()
	eachStack(t, func(t *testing.T, s *stack) {
		calls := []streamfix.Call{{ID: "call_a", Name: "echo", Arguments: `{"text":"from the stream"}`}, {ID: "call_b", Name: "now", Arguments: `{}`}}
		// A stand-in for the Chat Completions API, streaming as it does.
		model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			for _, part := range streamfix.Chat("chatcmpl-tee", calls, "tool_calls").Parts {
				_, _ = io.WriteString(w, part)
				w.(http.Flusher).Flush()
			}
		}))
		defer model.Close()

		answer := make(chan *http.Response, 1)
		client := openai.NewClient(option.WithBaseURL(model.URL), option.WithAPIKey("test"),
			option.WithMiddleware(teeToTurnd(s.url+"/v1/sessions/tee/turns", s.token, answer)))
		stream := client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
			Model:    openai.ChatModelGPT4_1,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("what time is it?")},
		})
		acc := openai.ChatCompletionAccumulator{}
		for stream.Next() {
			acc.AddChunk(stream.Current()) // …and show the user stream.Current()'s text
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		_ = stream.Close()
		resp := <-answer
		if resp == nil {
			t.Fatal("turnd was not reached")
		}
		defer resp.Body.Close()
		var msgs []openai.ChatCompletionToolMessageParam
		if err := json.NewDecoder(resp.Body).Decode(&msgs); err != nil || resp.StatusCode != 200 {
			t.Fatalf("turnd answered %d: %v", resp.StatusCode, err)
		}
		if len(msgs) != 2 || msgs[0].ToolCallID != "call_a" || msgs[1].ToolCallID != "call_b" ||
			!strings.Contains(msgs[0].Content.OfString.Value, "from the stream") {
			t.Fatalf("tool messages %+v", msgs)
		}
		if got := acc.Choices[0].Message.ToolCalls; len(got) != 2 || got[0].ID != "call_a" {
			t.Fatalf("the SDK's own reading: %+v", got)
		}
	})
}
