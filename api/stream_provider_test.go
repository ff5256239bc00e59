package api_test

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go"
	assestream "github.com/anthropics/anthropic-sdk-go/packages/ssestream"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"

	"github.com/turnd/turnd/internal/streamfix"
	"github.com/turnd/turnd/internal/teststores"
	"github.com/turnd/turnd/turn"
)

// Provider streams, built by streamfix and checked against the official
// SDKs' own stream handling: what the SDK makes of a stream (its calls, in
// order, with their arguments) is what turnd must run.

var streamCalls = []streamfix.Call{
	{ID: "call_1", Name: "pread", Arguments: `{"q":"first read"}`},
	{ID: "call_2", Name: "pread", Arguments: `{"q":"second"}`},
	{ID: "call_3", Name: "pwrite", Arguments: `{"x":[1,2,3]}`},
	{ID: "call_4", Name: "echo", Arguments: `{"text":"after the write"}`},
}

func sseResponse(body string) *http.Response {
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: io.NopCloser(strings.NewReader(body))}
}

// sdkCalls is what the format's official SDK reads from the stream: its
// function calls, in order.
func sdkCalls(t *testing.T, format, body string) (id string, calls []streamfix.Call) {
	t.Helper()
	switch format {
	case "openai.chat":
		st := ssestream.NewStream[openai.ChatCompletionChunk](ssestream.NewDecoder(sseResponse(body)), nil)
		acc := openai.ChatCompletionAccumulator{}
		var finished []string
		for st.Next() {
			acc.AddChunk(st.Current())
			if tc, ok := acc.JustFinishedToolCall(); ok {
				finished = append(finished, tc.ID)
			}
		}
		if err := st.Err(); err != nil {
			t.Fatalf("sdk: %v", err)
		}
		for _, tc := range acc.Choices[0].Message.ToolCalls {
			calls = append(calls, streamfix.Call{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		if len(finished) != len(calls) {
			t.Fatalf("sdk finished %v of %d calls", finished, len(calls))
		}
		return acc.ID, calls
	case "openai.responses":
		st := ssestream.NewStream[responses.ResponseStreamEventUnion](ssestream.NewDecoder(sseResponse(body)), nil)
		completed := false
		for st.Next() {
			ev := st.Current()
			switch ev.Type {
			case "response.created":
				id = ev.Response.ID
			case "response.output_item.done":
				if ev.Item.Type == "function_call" {
					calls = append(calls, streamfix.Call{ID: ev.Item.CallID, Name: ev.Item.Name, Arguments: ev.Item.Arguments.OfString})
				}
			case "response.completed":
				completed = true
			}
		}
		if err := st.Err(); err != nil || !completed {
			t.Fatalf("sdk: %v (completed %v)", err, completed)
		}
		return id, calls
	case "anthropic.messages":
		st := assestream.NewStream[anthropic.MessageStreamEventUnion](assestream.NewDecoder(sseResponse(body)), nil)
		msg := anthropic.Message{}
		for st.Next() {
			if err := msg.Accumulate(st.Current()); err != nil {
				t.Fatalf("sdk accumulate: %v", err)
			}
		}
		if err := st.Err(); err != nil {
			t.Fatalf("sdk: %v", err)
		}
		if msg.StopReason != anthropic.StopReasonToolUse {
			t.Fatalf("sdk stop reason %q", msg.StopReason)
		}
		for _, b := range msg.Content {
			if b.Type == "tool_use" {
				calls = append(calls, streamfix.Call{ID: b.ID, Name: b.Name, Arguments: string(b.Input)})
			}
		}
		return msg.ID, calls
	}
	t.Fatalf("format %s", format)
	return "", nil
}

func fixture(format, id string, calls []streamfix.Call) streamfix.Stream {
	switch format {
	case "openai.chat":
		return streamfix.Chat(id, calls, "tool_calls")
	case "openai.responses":
		return streamfix.Responses(id, calls, "completed")
	case "anthropic.messages":
		return streamfix.Messages(id, calls, "tool_use")
	}
	return streamfix.NDJSON(id, calls)
}

var providerFormats = []struct{ format, idPrefix string }{
	{"openai.chat", "chatcmpl-"},
	{"openai.responses", "resp_"},
	{"anthropic.messages", "msg_"},
}

// renderedIDs reads the call ids of a provider rendering, in order.
func renderedIDs(t *testing.T, format string, body []byte) []string {
	t.Helper()
	var ids []string
	switch format {
	case "openai.chat":
		var msgs []struct {
			ToolCallID string `json:"tool_call_id"`
		}
		if err := json.Unmarshal(body, &msgs); err != nil {
			t.Fatalf("rendering %s: %v", body, err)
		}
		for _, m := range msgs {
			ids = append(ids, m.ToolCallID)
		}
	case "openai.responses":
		var items []struct {
			CallID string `json:"call_id"`
		}
		if err := json.Unmarshal(body, &items); err != nil {
			t.Fatalf("rendering %s: %v", body, err)
		}
		for _, it := range items {
			ids = append(ids, it.CallID)
		}
	case "anthropic.messages":
		var msg struct {
			Content []struct {
				ToolUseID string `json:"tool_use_id"`
			} `json:"content"`
		}
		if err := json.Unmarshal(body, &msg); err != nil {
			t.Fatalf("rendering %s: %v", body, err)
		}
		for _, c := range msg.Content {
			ids = append(ids, c.ToolUseID)
		}
	}
	return ids
}

func TestStreamedProviderFormats(t *testing.T) {
	t.Parallel()
	teststores.Each(t, func(t *testing.T, open func(testing.TB) turn.Store) {
		p := newProbe(t)
		s := newStack(t, open, stackOptions{yaml: probeYAML(p)})
		for _, pf := range providerFormats {
			id := pf.idPrefix + "paced"
			fx := fixture(pf.format, id, streamCalls)
			sdkID, got := sdkCalls(t, pf.format, fx.String())
			if sdkID != id || fmt.Sprint(got) != fmt.Sprint(streamCalls) {
				t.Fatalf("%s: the SDK reads %s %v, want %s %v", pf.format, sdkID, got, id, streamCalls)
			}
			// Paced: the test writes each call's events and waits for the
			// reads of the leading run to start before writing more.
			sid := "paced-" + pf.format
			sp := s.stream("/v1/sessions/"+sid+"/turns?format="+pf.format, "text/event-stream")
			next := 0
			for k, part := range fx.Parts {
				if k == fx.End {
					p.note("finish event")
				}
				sp.write(part)
				if next < 2 && k == fx.CallEnds[next] {
					p.waitInvoked(t, streamCalls[next].ID)
					next++
				}
			}
			r := sp.end()
			if r.status != 200 {
				t.Fatalf("%s: %d %s", pf.format, r.status, r.body)
			}
			if ids := renderedIDs(t, pf.format, r.body); strings.Join(ids, ",") != "call_1,call_2,call_3,call_4" {
				t.Fatalf("%s: rendered %v: %s", pf.format, ids, r.body)
			}
			finish := p.index("finish event")
			for _, c := range []string{"call_1", "call_2"} {
				if i := p.index("invoked " + c); i < 0 || i > finish {
					t.Errorf("%s: %s invoked at %d, the finish event written at %d: %v", pf.format, c, i, finish, p.entries())
				}
			}
			if i := p.index("invoked call_3"); i < finish {
				t.Errorf("%s: the write started at %d, before the finish event at %d: %v", pf.format, i, finish, p.entries())
			}
			tr := s.do("GET", "/v1/sessions/"+sid+"/turns/"+id, nil)
			var turnGot wireTurn
			tr.json(t, &turnGot)
			if tr.status != 200 || summary(turnGot) != "call_1=ok call_2=ok call_3=ok call_4=ok" {
				t.Fatalf("%s: recorded %d %s", pf.format, tr.status, tr.body)
			}
			for i, res := range turnGot.Results[:3] {
				var out struct{ Got json.RawMessage }
				_ = json.Unmarshal(res.Output, &out)
				if string(out.Got) != streamCalls[i].Arguments {
					t.Fatalf("%s: %s ran with %s, the SDK read %s", pf.format, res.CallID, out.Got, streamCalls[i].Arguments)
				}
			}
			p.mu.Lock()
			p.log = nil
			p.mu.Unlock()
		}
	})
}

// TestStreamedSplits posts each format's stream in 1-byte writes and in
// random chunk sizes: the answer is the whole post's.
func TestStreamedSplits(t *testing.T) {
	t.Parallel()
	eachStack(t, func(t *testing.T, s *stack) {
		calls := []streamfix.Call{{ID: "a", Name: "echo", Arguments: `{"text":"é ☃ 𝄞"}`}, {ID: "b", Name: "now", Arguments: `{}`}}
		rng := rand.New(rand.NewPCG(1, 2))
		all := append(providerFormats, struct{ format, idPrefix string }{"ndjson", "nd_"})
		for _, pf := range all {
			for _, mode := range []string{"bytes", "random"} {
				id := pf.idPrefix + mode
				fx := fixture(pf.format, id, calls)
				path, ct := "/v1/sessions/split/turns?format="+pf.format, "text/event-stream"
				if pf.format == "ndjson" {
					path, ct = "/v1/sessions/split/turns", "application/x-ndjson"
				}
				sp := s.stream(path, ct)
				next := func() int { return 1 }
				if mode == "random" {
					next = func() int { return 1 + rng.IntN(64) }
				}
				sp.writeChunked(fx.String(), next)
				r := sp.end()
				if r.status != 200 {
					t.Fatalf("%s %s: %d %s", pf.format, mode, r.status, r.body)
				}
				tr := s.do("GET", "/v1/sessions/split/turns/"+id, nil)
				var got wireTurn
				tr.json(t, &got)
				if summary(got) != "a=ok b=ok" || !strings.Contains(string(got.Results[0].Output), "é ☃ 𝄞") {
					t.Fatalf("%s %s: %s", pf.format, mode, tr.body)
				}
			}
		}
	})
}

// TestStreamedProviderBroken: streams that do not end cleanly record
// nothing and answer 422 stream_incomplete; the turn id stays free.
func TestStreamedProviderBroken(t *testing.T) {
	t.Parallel()
	teststores.Each(t, func(t *testing.T, open func(testing.TB) turn.Store) {
		p := newProbe(t)
		s := newStack(t, open, stackOptions{yaml: probeYAML(p)})
		calls := []streamfix.Call{{ID: "h1", Name: "phold", Arguments: `{}`}, {ID: "r2", Name: "pread", Arguments: `{"q":"x"}`}}
		cut := func(fx streamfix.Stream, upTo int) string { return strings.Join(fx.Parts[:upTo], "") }
		type badCase struct {
			name, format, body string
			prefix             string // the body up to h1's completion
		}
		var cases []badCase
		for _, pf := range providerFormats {
			fx := fixture(pf.format, pf.idPrefix+"bad", calls)
			prefix := cut(fx, fx.CallEnds[0]+1)
			cases = append(cases,
				badCase{"no finish", pf.format, cut(fx, fx.End), prefix},
				badCase{"call never completed", pf.format, cut(fx, fx.CallEnds[1]), prefix},
				badCase{"malformed event", pf.format, prefix + "data: {\"choices\": [\n\n", prefix},
			)
		}
		chat := streamfix.Chat("chatcmpl-bad", calls, "length")
		resp := streamfix.Responses("resp_bad", calls, "incomplete")
		msgs := streamfix.Messages("msg_bad", calls, "max_tokens")
		cases = append(cases,
			badCase{"finish_reason length", "openai.chat", chat.String(), cut(chat, chat.CallEnds[0]+1)},
			badCase{"finish_reason content_filter", "openai.chat", streamfix.Chat("chatcmpl-bad", calls, "content_filter").String(), cut(chat, chat.CallEnds[0]+1)},
			badCase{"response.incomplete", "openai.responses", resp.String(), cut(resp, resp.CallEnds[0]+1)},
			badCase{"stop_reason max_tokens", "anthropic.messages", msgs.String(), cut(msgs, msgs.CallEnds[0]+1)},
			badCase{"stop_reason refusal", "anthropic.messages", streamfix.Messages("msg_bad", calls, "refusal").String(), cut(msgs, msgs.CallEnds[0]+1)},
		)
		for _, c := range cases {
			if !strings.HasPrefix(c.body, c.prefix) {
				t.Fatalf("%s %s: the body does not start with h1's events", c.format, c.name)
			}
			sp := s.stream("/v1/sessions/pbad/turns?format="+c.format, "text/event-stream")
			sp.write(c.prefix)
			p.waitInvoked(t, "h1") // h1 started early
			sp.write(c.body[len(c.prefix):])
			r := sp.end()
			if r.status != 422 || r.code(t) != "stream_incomplete" {
				t.Fatalf("%s %s: %d %s", c.format, c.name, r.status, r.body)
			}
			select {
			case <-p.cancelled: // and was cancelled
			case <-time.After(10 * time.Second):
				t.Fatalf("%s %s: h1 was not cancelled: %v", c.format, c.name, p.entries())
			}
		}
		if r := s.do("GET", "/v1/sessions/pbad/ledger", nil); r.status == 200 && strings.Contains(string(r.body), `"kind"`) {
			t.Fatalf("broken streams left ledger lines: %s", r.body)
		}
		for _, pf := range providerFormats {
			if r := s.do("GET", "/v1/sessions/pbad/turns/"+pf.idPrefix+"bad", nil); r.status != 404 {
				t.Fatalf("%s: a broken turn is recorded: %d %s", pf.format, r.status, r.body)
			}
			// Posted again, whole, the turn runs.
			close := closeOnce(p)
			sp := s.stream("/v1/sessions/pbad/turns?format="+pf.format, "text/event-stream")
			sp.write(fixture(pf.format, pf.idPrefix+"bad", calls).String())
			close()
			if r := sp.end(); r.status != 200 {
				t.Fatalf("%s: repost %d %s", pf.format, r.status, r.body)
			}
		}
	})
}

// closeOnce releases the probe's held calls (once per test stack).
func closeOnce(p *probe) func() {
	return func() {
		select {
		case <-p.release:
		default:
			close(p.release)
		}
	}
}
