package api_test

// Provider formats, tested the way a frontend uses them: the assistant
// turn is built with the providers' official Go SDKs and marshalled as they
// send or receive it, turnd's answer is unmarshalled into the SDKs' request
// parameter types, and each answer must hold one result per call id, in
// call order, ready to be sent in the next request.

import (
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/turnd/turnd/internal/teststores"
)

// The calls of every round trip: two that run, one whose arguments string
// is not JSON, one unknown tool, one that fails after its retries, and a
// repeated id.
var (
	roundTripIDs  = []string{"call_ok", "call_search", "call_badargs", "call_unknown", "call_flaky"}
	roundTripWant = map[string]string{ // call id → what its result must say
		"call_ok":      `{"text":"hello"}`,
		"call_search":  `{"hits": ["lease"]`,
		"call_badargs": "Refused (invalid_arguments): the arguments string is not valid JSON",
		"call_unknown": "Refused (unknown_tool)",
		"call_flaky":   "Error (tool_unavailable)",
	}
	roundTripErr = map[string]bool{"call_badargs": true, "call_unknown": true, "call_flaky": true}
)

type sdkCall struct{ id, name, args string }

var roundTripCalls = []sdkCall{
	{"call_ok", "echo", `{"text":"hello"}`},
	{"call_search", "search", `{"q":"lease"}`},
	{"call_badargs", "echo", `{"text": "unterminated`},
	{"call_unknown", "nope", `{}`},
	{"call_flaky", "flaky", `{}`},
	{"call_ok", "echo", `{"text":"again"}`},
}

// checkRecord checks what turnd recorded for a round trip: the refused
// calls as results and call_refused ledger lines, not as a refused turn.
func checkRecord(t *testing.T, s *stack, sid, tid string) {
	t.Helper()
	r := s.do("GET", "/v1/sessions/"+sid+"/turns/"+tid, nil)
	var tr wireTurn
	r.json(t, &tr)
	want := "call_ok=ok call_search=ok call_badargs=refused(invalid_arguments) call_unknown=refused(unknown_tool) call_flaky=error(tool_unavailable) call_ok=refused(duplicate_call_id)"
	if r.status != 200 || tr.Status != "completed" || summary(tr) != want {
		t.Fatalf("recorded turn: %d %s\n got %s\nwant %s", r.status, tr.Status, summary(tr), want)
	}
	l := s.do("GET", "/v1/sessions/"+sid+"/ledger?limit=1000", nil)
	var page struct {
		Lines []struct {
			TurnID string          `json:"turn_id"`
			CallID *string         `json:"call_id"`
			Kind   string          `json:"kind"`
			Data   json.RawMessage `json:"data"`
		} `json:"lines"`
	}
	l.json(t, &page)
	found := false
	for _, line := range page.Lines {
		if line.TurnID == tid && line.CallID != nil && *line.CallID == "call_badargs" {
			if line.Kind != "call_refused" || !strings.Contains(string(line.Data), `"code":"invalid_arguments"`) {
				t.Fatalf("call_badargs ledger line %s %s, want call_refused invalid_arguments", line.Kind, line.Data)
			}
			found = true
		}
	}
	if !found {
		t.Fatalf("no ledger line for call_badargs: %s", l.body)
	}
}

// byCallID lists the call ids of items in order and maps each to its text,
// as pick gives them.
func byCallID[T any](items []T, pick func(T) (id, text string)) ([]string, map[string]string) {
	var ids []string
	texts := map[string]string{}
	for _, it := range items {
		id, text := pick(it)
		ids = append(ids, id)
		texts[id] = text
	}
	return ids, texts
}

// joined is the texts of parts, as text gives them, end to end.
func joined[T any](parts []T, text func(T) string) string {
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(text(p))
	}
	return b.String()
}

// checkAnswers checks one answer per call id, in call order, each saying
// what it must.
// readAnswers decodes a 200 answer as a list of the SDK's items and checks
// them with checkAnswers: pick gives an item's call id and text, or false
// for an item that is not a what.
func readAnswers[T any](t *testing.T, r response, what string, pick func(T) (id, text string, ok bool)) []T {
	t.Helper()
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	var items []T
	r.json(t, &items)
	ids, texts := byCallID(items, func(it T) (string, string) {
		id, text, ok := pick(it)
		if !ok {
			t.Fatalf("not a %s: %s", what, r.body)
		}
		return id, text
	})
	checkAnswers(t, ids, texts, nil)
	return items
}

func checkAnswers(t *testing.T, got []string, texts map[string]string, isError map[string]bool) {
	t.Helper()
	if !slices.Equal(got, roundTripIDs) {
		t.Fatalf("answered ids %v, want %v", got, roundTripIDs)
	}
	for id, want := range roundTripWant {
		if !strings.Contains(texts[id], want) {
			t.Errorf("%s: %q does not contain %q", id, texts[id], want)
		}
		if isError != nil && isError[id] != roundTripErr[id] {
			t.Errorf("%s: is_error %v", id, isError[id])
		}
	}
}

func TestOpenAIChatRoundTrip(t *testing.T) {
	t.Parallel()
	eachStack(t, func(t *testing.T, s *stack) {
		// The completion as the SDK receives it from the model API.
		completion := openai.ChatCompletion{ID: "chatcmpl-rt1", Object: "chat.completion", Model: "gpt-test", Created: 1}
		msg := openai.ChatCompletionMessage{Role: "assistant"}
		for _, c := range roundTripCalls {
			msg.ToolCalls = append(msg.ToolCalls, openai.ChatCompletionMessageToolCallUnion{
				ID: c.id, Type: "function", Function: openai.ChatCompletionMessageFunctionToolCallFunction{Name: c.name, Arguments: c.args},
			})
		}
		completion.Choices = []openai.ChatCompletionChoice{{Index: 0, FinishReason: "tool_calls", Message: msg}}
		body, err := json.Marshal(completion)
		if err != nil {
			t.Fatal(err)
		}
		read := func(r response) []openai.ChatCompletionMessageParamUnion {
			t.Helper()
			return readAnswers(t, r, "tool message", func(m openai.ChatCompletionMessageParamUnion) (string, string, bool) {
				if m.OfTool == nil {
					return "", "", false
				}
				return m.OfTool.ToolCallID, m.OfTool.Content.OfString.Value, true
			})
		}
		r := s.do("POST", "/v1/sessions/chat/turns?format=openai.chat", body)
		if loc := r.header.Get("Location"); loc != "/v1/sessions/chat/turns/chatcmpl-rt1" {
			t.Fatalf("the turn id is not the completion's: Location %q", loc)
		}
		answer := read(r)
		checkRecord(t, s, "chat", "chatcmpl-rt1")

		// The frontend's next request: the history, the assistant message
		// as the SDK sends it, turnd's answer as is.
		next := openai.ChatCompletionNewParams{Model: "gpt-test", Messages: append([]openai.ChatCompletionMessageParamUnion{
			openai.UserMessage("look it up"), completion.Choices[0].Message.ToParam(),
		}, answer...)}
		if _, err := json.Marshal(next); err != nil {
			t.Fatalf("the next request does not marshal: %v", err)
		}

		// A retry replays; GET renders the same; so does the bare
		// assistant message, as the SDK sends it back, under its turn id.
		again := s.do("POST", "/v1/sessions/chat/turns?format=openai.chat", body)
		if again.header.Get("Turnd-Replayed") != "true" || string(again.body) != string(r.body) {
			t.Fatalf("retry: %v\n%s\nwant\n%s", again.header, again.body, r.body)
		}
		if g := s.do("GET", "/v1/sessions/chat/turns/chatcmpl-rt1?format=openai.chat", nil); string(g.body) != string(r.body) {
			t.Fatalf("GET rendering differs:\n%s\nwant\n%s", g.body, r.body)
		}
		param, err := json.Marshal(completion.Choices[0].Message.ToParam())
		if err != nil {
			t.Fatal(err)
		}
		bare := s.do("POST", "/v1/sessions/chat/turns?format=openai.chat&turn_id=chatcmpl-rt1", param)
		if bare.header.Get("Turnd-Replayed") != "true" {
			t.Fatalf("the bare message under the same turn id did not replay: %d %s", bare.status, bare.body)
		}
		read(bare)
	})
}

func TestOpenAIResponsesRoundTrip(t *testing.T) {
	t.Parallel()
	eachStack(t, func(t *testing.T, s *stack) {
		// The response as the SDK receives it: built as JSON, decoded by
		// the SDK, posted as its raw JSON.
		items := []map[string]any{{"type": "reasoning", "id": "rs_1", "summary": []any{}}}
		for i, c := range roundTripCalls {
			items = append(items, map[string]any{"type": "function_call", "id": "fc_" + string(rune('a'+i)), "call_id": c.id, "name": c.name, "arguments": c.args, "status": "completed"})
		}
		raw, err := json.Marshal(map[string]any{"id": "resp_rt1", "object": "response", "created_at": 1, "model": "gpt-test", "status": "completed", "output": items})
		if err != nil {
			t.Fatal(err)
		}
		var resp responses.Response
		if err := json.Unmarshal(raw, &resp); err != nil {
			t.Fatal(err)
		}
		read := func(r response) []responses.ResponseInputItemUnionParam {
			t.Helper()
			return readAnswers(t, r, "function_call_output", func(it responses.ResponseInputItemUnionParam) (string, string, bool) {
				if it.OfFunctionCallOutput == nil {
					return "", "", false
				}
				return it.OfFunctionCallOutput.CallID.Value, it.OfFunctionCallOutput.Output.OfString.Value, true
			})
		}
		r := s.do("POST", "/v1/sessions/resp/turns?format=openai.responses", resp.RawJSON())
		if loc := r.header.Get("Location"); loc != "/v1/sessions/resp/turns/resp_rt1" {
			t.Fatalf("the turn id is not the response's: Location %q", loc)
		}
		answer := read(r)
		checkRecord(t, s, "resp", "resp_rt1")

		// The output items as the SDK sends them back, as input items.
		var input []responses.ResponseInputItemUnionParam
		for _, c := range roundTripCalls {
			input = append(input, responses.ResponseInputItemUnionParam{OfFunctionCall: &responses.ResponseFunctionToolCallParam{CallID: c.id, Name: c.name, Arguments: c.args}})
		}
		next := responses.ResponseNewParams{Model: "gpt-test", Input: responses.ResponseNewParamsInputUnion{OfInputItemList: append(input, answer...)}}
		if _, err := json.Marshal(next); err != nil {
			t.Fatalf("the next request does not marshal: %v", err)
		}
		body, err := json.Marshal(input)
		if err != nil {
			t.Fatal(err)
		}
		second := s.do("POST", "/v1/sessions/resp/turns?format=openai.responses&turn_id=resp-array", body)
		read(second)
		if loc := second.header.Get("Location"); loc != "/v1/sessions/resp/turns/resp-array" {
			t.Fatalf("turn_id not applied: Location %q", loc)
		}
		// The calls were answered in the first turn: the second replays them.
		var tr wireTurn
		s.do("GET", "/v1/sessions/resp/turns/resp-array", nil).json(t, &tr)
		if tr.Results[0].ReplayedFrom == nil || *tr.Results[0].ReplayedFrom != "resp_rt1" {
			t.Fatalf("the repeated call ids did not replay: %+v", tr.Results[0])
		}
	})
}

func TestAnthropicMessagesRoundTrip(t *testing.T) {
	t.Parallel()
	eachStack(t, func(t *testing.T, s *stack) {
		// The message as the SDK receives it.
		content := []map[string]any{{"type": "text", "text": "Let me check."}}
		for _, c := range roundTripCalls {
			var input any
			if err := json.Unmarshal([]byte(c.args), &input); err != nil {
				input = c.args // the broken call: its input is not an object
			}
			content = append(content, map[string]any{"type": "tool_use", "id": c.id, "name": c.name, "input": input})
		}
		raw, err := json.Marshal(map[string]any{"id": "msg_rt1", "type": "message", "role": "assistant", "model": "claude-test",
			"content": content, "stop_reason": "tool_use", "usage": map[string]any{"input_tokens": 1, "output_tokens": 1}})
		if err != nil {
			t.Fatal(err)
		}
		var msg anthropic.Message
		if err := json.Unmarshal(raw, &msg); err != nil {
			t.Fatal(err)
		}
		read := func(r response, want map[string]string) anthropic.MessageParam {
			t.Helper()
			if r.status != 200 {
				t.Fatalf("%d %s", r.status, r.body)
			}
			var m anthropic.MessageParam
			r.json(t, &m)
			if m.Role != anthropic.MessageParamRoleUser {
				t.Fatalf("role %q: %s", m.Role, r.body)
			}
			var ids []string
			texts, isError := map[string]string{}, map[string]bool{}
			for _, b := range m.Content {
				tr := b.OfToolResult
				if tr == nil || len(tr.Content) != 1 || tr.Content[0].OfText == nil {
					t.Fatalf("not a tool_result with one text: %s", r.body)
				}
				ids = append(ids, tr.ToolUseID)
				texts[tr.ToolUseID] = tr.Content[0].OfText.Text
				isError[tr.ToolUseID] = tr.IsError.Value
			}
			if !slices.Equal(ids, roundTripIDs) {
				t.Fatalf("answered ids %v, want %v", ids, roundTripIDs)
			}
			for id, w := range want {
				if !strings.Contains(texts[id], w) {
					t.Errorf("%s: %q does not contain %q", id, texts[id], w)
				}
				if isError[id] != roundTripErr[id] {
					t.Errorf("%s: is_error %v", id, isError[id])
				}
			}
			return m
		}
		want := roundTripWant
		r := s.do("POST", "/v1/sessions/claude/turns?format=anthropic.messages", msg.RawJSON())
		if loc := r.header.Get("Location"); loc != "/v1/sessions/claude/turns/msg_rt1" {
			t.Fatalf("the turn id is not the message's: Location %q", loc)
		}
		answer := read(r, want)
		next := anthropic.MessageNewParams{Model: "claude-test", MaxTokens: 1024, Messages: []anthropic.MessageParam{
			anthropic.NewUserMessage(anthropic.NewTextBlock("look it up")), msg.ToParam(), answer,
		}}
		if _, err := json.Marshal(next); err != nil {
			t.Fatalf("the next request does not marshal: %v", err)
		}

		// The assistant message as the SDK sends it (MessageParam), built
		// with the SDK's constructors, under its own turn id.
		var blocks []anthropic.ContentBlockParamUnion
		for _, c := range roundTripCalls {
			var input any
			if err := json.Unmarshal([]byte(c.args), &input); err != nil {
				input = c.args
			}
			blocks = append(blocks, anthropic.NewToolUseBlock(c.id+"_p", input, c.name))
		}
		param, err := json.Marshal(anthropic.NewAssistantMessage(blocks...))
		if err != nil {
			t.Fatal(err)
		}
		p := s.do("POST", "/v1/sessions/claude/turns?format=anthropic.messages&turn_id=param", param)
		var m anthropic.MessageParam
		p.json(t, &m)
		if p.status != 200 || len(m.Content) != 5 || m.Content[0].OfToolResult.ToolUseID != "call_ok_p" {
			t.Fatalf("param post: %d %s", p.status, p.body)
		}
	})
}

// TestPendingPlaceholders walks a turn with a deferred call through each
// format: 202 while it waits, placeholders on request, the follow-up once
// the result arrives, and the same renderings on every read.
func TestPendingPlaceholders(t *testing.T) {
	t.Parallel()
	eachStack(t, func(t *testing.T, s *stack) {
		for _, tc := range []struct {
			format string
			body   string
			// answers decodes a rendering with the SDK: call id → text.
			answers func(t *testing.T, r response) ([]string, map[string]string)
			// followUp decodes a follow-up with the SDK into its text.
			followUp func(t *testing.T, r response) string
		}{
			{"openai.chat",
				`{"id":"chatcmpl-p","object":"chat.completion","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"tool_calls":[
					{"id":"a","type":"function","function":{"name":"echo","arguments":"{\"text\":\"now\"}"}},
					{"id":"d","type":"function","function":{"name":"deferred","arguments":"{\"deadline\":\"1h\"}"}}]}}]}`,
				func(t *testing.T, r response) ([]string, map[string]string) {
					var msgs []openai.ChatCompletionMessageParamUnion
					r.json(t, &msgs)
					return byCallID(msgs, func(m openai.ChatCompletionMessageParamUnion) (string, string) {
						return m.OfTool.ToolCallID, m.OfTool.Content.OfString.Value
					})
				},
				func(t *testing.T, r response) string {
					var msgs []openai.ChatCompletionMessageParamUnion
					r.json(t, &msgs)
					if len(msgs) != 1 || msgs[0].OfUser == nil {
						t.Fatalf("follow-up is not one user message: %s", r.body)
					}
					return joined(msgs[0].OfUser.Content.OfArrayOfContentParts, func(p openai.ChatCompletionContentPartUnionParam) string { return p.OfText.Text })
				}},
			{"openai.responses",
				`{"id":"resp_p","object":"response","output":[
					{"type":"function_call","id":"fc_1","call_id":"a","name":"echo","arguments":"{\"text\":\"now\"}"},
					{"type":"function_call","id":"fc_2","call_id":"d","name":"deferred","arguments":"{\"deadline\":\"1h\"}"}]}`,
				func(t *testing.T, r response) ([]string, map[string]string) {
					var items []responses.ResponseInputItemUnionParam
					r.json(t, &items)
					return byCallID(items, func(it responses.ResponseInputItemUnionParam) (string, string) {
						return it.OfFunctionCallOutput.CallID.Value, it.OfFunctionCallOutput.Output.OfString.Value
					})
				},
				func(t *testing.T, r response) string {
					var items []responses.ResponseInputItemUnionParam
					r.json(t, &items)
					if len(items) != 1 || items[0].OfMessage == nil || items[0].OfMessage.Role != responses.EasyInputMessageRoleUser {
						t.Fatalf("follow-up is not one user message: %s", r.body)
					}
					return joined(items[0].OfMessage.Content.OfInputItemContentList, func(p responses.ResponseInputContentUnionParam) string { return p.OfInputText.Text })
				}},
			{"anthropic.messages",
				`{"id":"msg_p","type":"message","role":"assistant","content":[
					{"type":"tool_use","id":"a","name":"echo","input":{"text":"now"}},
					{"type":"tool_use","id":"d","name":"deferred","input":{"deadline":"1h"}}]}`,
				func(t *testing.T, r response) ([]string, map[string]string) {
					var m anthropic.MessageParam
					r.json(t, &m)
					return byCallID(m.Content, func(b anthropic.ContentBlockParamUnion) (string, string) {
						return b.OfToolResult.ToolUseID, b.OfToolResult.Content[0].OfText.Text
					})
				},
				func(t *testing.T, r response) string {
					var m anthropic.MessageParam
					r.json(t, &m)
					if m.Role != anthropic.MessageParamRoleUser {
						t.Fatalf("follow-up is not a user message: %s", r.body)
					}
					return joined(m.Content, func(blk anthropic.ContentBlockParamUnion) string { return blk.OfText.Text })
				}},
		} {
			t.Run(tc.format, func(t *testing.T) {
				sid := "pending-" + strings.ReplaceAll(tc.format, ".", "-")
				base := "/v1/sessions/" + sid + "/turns"
				// Without placeholders a waiting turn is 202 with its status.
				r := s.do("POST", base+"?format="+tc.format, tc.body)
				var tr wireTurn
				r.json(t, &tr)
				if r.status != 202 || tr.Status != "waiting" || summary(tr) != "a=ok d=pending" {
					t.Fatalf("post: %d %s", r.status, r.body)
				}
				key := (<-s.tools.keys)[0]
				turnURL := r.header.Get("Location")
				if r := s.do("GET", turnURL+"?format="+tc.format, nil); r.status != 202 {
					t.Fatalf("GET without placeholders: %d %s", r.status, r.body)
				}

				// With them: one answer per call, the deferred one a placeholder.
				ph := s.do("GET", turnURL+"?format="+tc.format+"&pending=placeholder", nil)
				if ph.status != 200 || ph.header.Get("Turnd-Placeholders") != "1" || ph.header.Get("Turnd-Turn-Status") != "waiting" {
					t.Fatalf("placeholders: %d %v %s", ph.status, ph.header, ph.body)
				}
				ids, texts := tc.answers(t, ph)
				if !slices.Equal(ids, []string{"a", "d"}) || texts["a"] != `{"text":"now"}` || !strings.Contains(texts["d"], "not available yet") || !strings.Contains(texts["d"], "id d") {
					t.Fatalf("placeholder rendering: %v %q", ids, texts)
				}
				follow := ph.header.Get("Turnd-Follow-Up")
				if u, err := url.Parse(follow); err != nil || u.Path != turnURL || u.Query().Get("since") != "placeholder" || u.Query().Get("format") != tc.format {
					t.Fatalf("Turnd-Follow-Up %q", follow)
				}
				if r := s.do("GET", follow, nil); r.status != 202 {
					t.Fatalf("follow-up before the result: %d %s", r.status, r.body)
				}

				// The result arrives: the follow-up carries it, and only it.
				if r := s.do("POST", "/v1/complete/"+key, `{"output":{"approved":true}}`); r.status != 200 {
					t.Fatalf("deliver: %d %s", r.status, r.body)
				}
				fu := s.do("GET", follow, nil, "Prefer", "wait=10")
				if fu.status != 200 {
					t.Fatalf("follow-up: %d %s", fu.status, fu.body)
				}
				text := tc.followUp(t, fu)
				if !strings.Contains(text, "earlier call d (tool deferred)") || !strings.Contains(text, `{"approved":true}`) || strings.Contains(text, "call a ") {
					t.Fatalf("follow-up text %q", text)
				}
				// Renderings are functions of the record: the placeholder
				// rendering stays the same after the result arrived, and
				// without placeholders the settled turn renders the result.
				if again := s.do("GET", turnURL+"?format="+tc.format+"&pending=placeholder", nil); string(again.body) != string(ph.body) {
					t.Fatalf("placeholder rendering changed:\n%s\nwas\n%s", again.body, ph.body)
				}
				plain := s.do("GET", turnURL+"?format="+tc.format, nil)
				_, texts = tc.answers(t, plain)
				if plain.status != 200 || texts["d"] != `{"approved":true}` {
					t.Fatalf("settled rendering: %d %s", plain.status, plain.body)
				}

				// POST with placeholders answers them at once; a
				// cancellation reaches the follow-up as a result too.
				body := strings.NewReplacer(`"a"`, `"a2"`, `"d"`, `"d2"`, `_p"`, `_p2"`, `-p"`, `-p2"`).Replace(tc.body)
				r = s.do("POST", base+"?format="+tc.format+"&pending=placeholder", body)
				if r.status != 200 || r.header.Get("Turnd-Placeholders") != "1" {
					t.Fatalf("post with placeholders: %d %s", r.status, r.body)
				}
				<-s.tools.keys
				if ids, _ := tc.answers(t, r); !slices.Equal(ids, []string{"a2", "d2"}) {
					t.Fatalf("post with placeholders answered %v", ids)
				}
				second := r.header.Get("Location")
				if c := s.do("POST", second+"/cancel", nil); c.status != 200 {
					t.Fatalf("cancel: %d %s", c.status, c.body)
				}
				fu = s.do("GET", second+"?format="+tc.format+"&since=placeholder", nil)
				if fu.status != 200 || !strings.Contains(tc.followUp(t, fu), "Cancelled (cancelled)") {
					t.Fatalf("follow-up of a cancelled call: %d %s", fu.status, fu.body)
				}
			})
		}
	})
}

func TestProviderTools(t *testing.T) {
	t.Parallel()
	s := newStack(t, teststores.Kinds[0].Open, stackOptions{})
	if r := s.do("POST", "/v1/sessions", `{"id":"narrow","tools":["echo","search"]}`); r.status != 201 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	all := []string{"big", "deferred", "down", "echo", "flaky", "now", "search", "sleep"}
	for _, tc := range []struct {
		query string
		want  []string
	}{{"", all}, {"&session_id=narrow", []string{"echo", "search"}}} {
		checkToolNames(t, s, "openai.chat", tc.query, tc.want, func(tool openai.ChatCompletionToolUnionParam) string {
			if tool.OfFunction.Function.Name == "search" && tool.OfFunction.Function.Description.Value != "Search the docs" {
				t.Errorf("search description %q", tool.OfFunction.Function.Description.Value)
			}
			return tool.OfFunction.Function.Name
		})
		checkToolNames(t, s, "openai.responses", tc.query, tc.want, func(tool responses.ToolUnionParam) string {
			if tool.OfFunction.Name == "search" && tool.OfFunction.Parameters["required"] == nil {
				t.Errorf("search parameters %v", tool.OfFunction.Parameters)
			}
			return tool.OfFunction.Name
		})
		checkToolNames(t, s, "anthropic.messages", tc.query, tc.want, func(tool anthropic.ToolUnionParam) string {
			if tool.OfTool.Name == "search" && tool.OfTool.InputSchema.Required[0] != "q" {
				t.Errorf("search input_schema %+v", tool.OfTool.InputSchema)
			}
			return tool.OfTool.Name
		})
	}
	// The native listing takes the session filter too.
	var native struct {
		Tools []struct{ Name string } `json:"tools"`
	}
	s.do("GET", "/v1/tools?session_id=narrow", nil).json(t, &native)
	if len(native.Tools) != 2 {
		t.Errorf("native listing of narrow: %+v", native)
	}
}

func TestProviderBadInput(t *testing.T) {
	t.Parallel()
	eachStack(t, func(t *testing.T, s *stack) {
		okChat := `{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"now","arguments":"{}"}}]}`
		if r := s.do("POST", "/v1/sessions/done/turns?format=openai.chat&turn_id=t1", okChat); r.status != 200 {
			t.Fatalf("setup: %d %s", r.status, r.body)
		}
		for _, tc := range []struct {
			name, method, path, body string
			status                   int
			code, detail             string
		}{
			{"unknown format", "POST", "/v1/sessions/s/turns?format=openai", okChat, 400, "unknown_format", "openai.chat, openai.responses, anthropic.messages"},
			{"empty format", "POST", "/v1/sessions/s/turns?format=", okChat, 400, "unknown_format", "anthropic.messages"},
			{"unknown format on GET", "GET", "/v1/sessions/done/turns/t1?format=gemini", "", 400, "unknown_format", "openai.responses"},
			{"unknown format for tools", "GET", "/v1/tools?format=mcp", "", 400, "unknown_format", "openai.chat"},
			{"not JSON", "POST", "/v1/sessions/s/turns?format=openai.chat", `{"role":`, 400, "format_mismatch", "not valid JSON"},
			{"empty body", "POST", "/v1/sessions/s/turns?format=anthropic.messages", ``, 400, "format_mismatch", "expected a Messages API response"},
			{"native body as chat", "POST", "/v1/sessions/s/turns?format=openai.chat", `{"calls":[{"id":"a","name":"now"}]}`, 400, "format_mismatch", "no role"},
			{"anthropic body as chat", "POST", "/v1/sessions/s/turns?format=openai.chat", `{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"tool_use","id":"t","name":"now","input":{}}]}`, 400, "format_mismatch", `"type": "message"`},
			{"bare anthropic message as chat", "POST", "/v1/sessions/s/turns?format=openai.chat", `{"role":"assistant","content":[{"type":"text","text":"x"},{"type":"tool_use","id":"t","name":"now","input":{}}]}`, 400, "format_mismatch", "content[1] is a tool_use block"},
			{"responses item as chat", "POST", "/v1/sessions/s/turns?format=openai.chat", `{"type":"message","role":"assistant","content":[]}`, 400, "format_mismatch", `"type": "message"`},
			{"chat message as anthropic", "POST", "/v1/sessions/s/turns?format=anthropic.messages", `{"role":"assistant","content":"Let me look.","tool_calls":[{"id":"c","type":"function","function":{"name":"now","arguments":"{}"}}]}`, 400, "format_mismatch", "tool_calls"},
			{"chat response as anthropic", "POST", "/v1/sessions/s/turns?format=anthropic.messages", `{"id":"chatcmpl-1","role":"assistant","content":"x","choices":[]}`, 400, "format_mismatch", "choices"},
			{"responses response as anthropic", "POST", "/v1/sessions/s/turns?format=anthropic.messages", `{"id":"resp_1","role":"assistant","content":"x","output":[]}`, 400, "format_mismatch", "output"},
			{"custom chat call", "POST", "/v1/sessions/s/turns?format=openai.chat", `{"role":"assistant","tool_calls":[{"id":"f1","type":"function","function":{"name":"now","arguments":"{}"}},{"id":"x1","type":"custom","custom":{"name":"grammar","input":"a b"}}]}`, 422, "unsupported_tool_call", "(x1)"},
			{"custom responses call", "POST", "/v1/sessions/s/turns?format=openai.responses", `[{"type":"custom_tool_call","call_id":"x2","name":"grammar","input":"a"},{"type":"function_call","call_id":"f2","name":"now","arguments":"{}"}]`, 422, "unsupported_tool_call", "(x2)"},
			{"chat body as responses", "POST", "/v1/sessions/s/turns?format=openai.responses", okChat, 400, "format_mismatch", "no output array"},
			{"chat body as anthropic", "POST", "/v1/sessions/s/turns?format=anthropic.messages", okChat, 400, "format_mismatch", "it has tool_calls"},
			{"user message", "POST", "/v1/sessions/s/turns?format=anthropic.messages", `{"role":"user","content":"hi"}`, 400, "format_mismatch", `role "user"`},
			{"arguments not a string", "POST", "/v1/sessions/s/turns?format=openai.chat", `{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"now","arguments":{}}}]}`, 400, "format_mismatch", "arguments"},
			{"no tool calls", "POST", "/v1/sessions/s/turns?format=openai.chat", `{"id":"chatcmpl-x","choices":[{"index":0,"message":{"role":"assistant","content":"Hello!"}}]}`, 422, "no_tool_calls", ""},
			{"text only response", "POST", "/v1/sessions/s/turns?format=openai.responses", `{"id":"resp_x","output":[{"type":"message","role":"assistant","content":[]}]}`, 422, "no_tool_calls", ""},
			{"bad pending", "POST", "/v1/sessions/s/turns?format=openai.chat&pending=yes", okChat, 400, "invalid_query", "pending"},
			{"pending without format", "POST", "/v1/sessions/s/turns?pending=placeholder", `{"calls":[{"id":"a","name":"now"}]}`, 400, "invalid_query", "add format"},
			{"since without format", "GET", "/v1/sessions/done/turns/t1?since=placeholder", "", 400, "invalid_query", "add format"},
			{"bad since", "GET", "/v1/sessions/done/turns/t1?format=openai.chat&since=yesterday", "", 400, "invalid_query", "since"},
			{"bad turn_id", "POST", "/v1/sessions/s/turns?format=openai.chat&turn_id=a%2Fb", okChat, 422, "invalid_request", "id"},
			{"bad mode", "POST", "/v1/sessions/s/turns?format=openai.chat&mode=parallel", okChat, 422, "invalid_request", "mode"},
			{"call id with a control character", "POST", "/v1/sessions/s/turns?format=openai.chat", `{"role":"assistant","tool_calls":[{"id":"c\u0001","type":"function","function":{"name":"now","arguments":"{}"}}]}`, 422, "invalid_request", "calls[0].id"},
			{"follow-up of a turn without placeholders", "GET", "/v1/sessions/done/turns/t1?format=openai.chat&since=placeholder", "", 409, "no_placeholders", ""},
			{"follow-up of an unknown turn", "GET", "/v1/sessions/done/turns/nope?format=openai.chat&since=placeholder", "", 404, "not_found", ""},
			{"tools of an unknown session", "GET", "/v1/tools?format=openai.chat&session_id=nope", "", 404, "not_found", ""},
			{"body too large", "POST", "/v1/sessions/s/turns?format=openai.chat", `{"role":"assistant","content":"` + strings.Repeat("y", 5<<20) + `"}`, 413, "body_too_large", ""},
		} {
			t.Run(tc.name, func(t *testing.T) {
				var body any
				if tc.method == "POST" {
					body = tc.body
				}
				r := s.do(tc.method, tc.path, body)
				if r.status != tc.status || r.code(t) != tc.code {
					t.Fatalf("%d %s, want %d %s", r.status, r.body, tc.status, tc.code)
				}
				var p struct{ Detail string }
				r.json(t, &p)
				if !strings.Contains(p.Detail, tc.detail) {
					t.Fatalf("detail %q does not say %q", p.Detail, tc.detail)
				}
			})
		}
		if r := s.do("GET", "/v1/sessions/s", nil); r.status != 404 {
			t.Fatalf("a refused request created session s: %d", r.status)
		}
	})
}

// TestProviderOutputIsProjected: a provider rendering carries the budgeted
// projection of an oversized output, not the output.
func TestProviderOutputIsProjected(t *testing.T) {
	t.Parallel()
	s := newStack(t, teststores.Kinds[0].Open, stackOptions{})
	if r := s.do("POST", "/v1/sessions", `{"id":"small","budget":{"limit":64}}`); r.status != 201 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	r := s.do("POST", "/v1/sessions/small/turns?format=openai.responses",
		`[{"type":"function_call","call_id":"b","name":"big","arguments":"{}"}]`)
	var items []responses.ResponseInputItemUnionParam
	r.json(t, &items)
	if r.status != 200 || len(items) != 1 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	out := items[0].OfFunctionCallOutput.Output.OfString.Value
	if len(out) > 256 || !strings.Contains(out, "truncated") {
		t.Fatalf("the rendering is not the projection (%d bytes): %q", len(out), out)
	}
}

// checkToolNames lists the tools in format (with query's filters) and checks
// their names, in order, against want; name checks each tool and says its
// name.
func checkToolNames[T any](t *testing.T, s *stack, format, query string, want []string, name func(T) string) {
	t.Helper()
	var tools []T
	s.do("GET", "/v1/tools?format="+format+query, nil).json(t, &tools)
	var names []string
	for _, tool := range tools {
		names = append(names, name(tool))
	}
	if !slices.Equal(names, want) {
		t.Errorf("%s%s: %v, want %v", format, query, names, want)
	}
}
