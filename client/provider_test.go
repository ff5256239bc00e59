package client_test

import (
	"encoding/json"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/turnd/turnd/client"
	"github.com/turnd/turnd/client/sdk"
)

// The provider messages as the SDKs decode them from the APIs' answers.
const (
	chatJSON = `{"id":"chatcmpl-T1","object":"chat.completion","created":1,"model":"gpt-4.1",
	  "choices":[{"index":0,"finish_reason":"tool_calls","logprobs":null,"message":{"role":"assistant","content":null,"refusal":null,
	    "tool_calls":[{"id":"call_1","type":"function","function":{"name":"echo","arguments":"{\"text\":\"hi\"}"}},
	                  {"id":"call_2","type":"function","function":{"name":"now","arguments":"{\"tz\": "}}]}}]}`
	responseJSON = `{"id":"resp_T2","object":"response","created_at":1,"model":"gpt-4.1","status":"completed",
	  "output":[{"type":"reasoning","id":"rs_1","summary":[]},
	            {"type":"function_call","id":"fc_1","call_id":"call_3","name":"echo","arguments":"{\"text\":\"hi\"}","status":"completed"}]}`
	messageJSON = `{"id":"msg_T3","type":"message","role":"assistant","model":"claude","stop_reason":"tool_use","usage":{"input_tokens":1,"output_tokens":1},
	  "content":[{"type":"text","text":"Let me ask."},
	             {"type":"tool_use","id":"toolu_1","name":"echo","input":{"text":"hi"}},
	             {"type":"tool_use","id":"toolu_2","name":"approval","input":{"prompt":"Ship it?"}}]}`
)

func testProvider(t *testing.T, srv *server, c *client.Client) {
	ctx := ctxFor(t)

	var cc openai.ChatCompletion
	if err := json.Unmarshal([]byte(chatJSON), &cc); err != nil {
		t.Fatal(err)
	}
	chat, err := sdk.PostChatCompletion(ctx, c, "prov", &cc, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !chat.Ready || len(chat.Messages) != 2 {
		t.Fatalf("chat reply: %+v", chat)
	}
	tool := chat.Messages[0].OfTool
	if tool == nil || tool.ToolCallID != "call_1" || tool.Content.OfString.Value != `{"text":"hi"}` {
		t.Errorf("chat message 0: %+v", chat.Messages[0])
	}
	if m := chat.Messages[1].OfTool; m == nil || m.ToolCallID != "call_2" || !hasPrefix(m.Content.OfString.Value, "Refused (invalid_arguments)") {
		t.Errorf("chat message 1: %+v", chat.Messages[1])
	}
	// The messages go straight into the SDK's next request.
	next := openai.ChatCompletionNewParams{Model: "gpt-4.1", Messages: append([]openai.ChatCompletionMessageParamUnion{cc.Choices[0].Message.ToParam()}, chat.Messages...)}
	if _, err := json.Marshal(next); err != nil {
		t.Errorf("the next request does not encode: %v", err)
	}
	again, err := sdk.PostChatCompletion(ctx, c, "prov", &cc, nil)
	if err != nil || !again.Replayed {
		t.Errorf("the same completion again: replayed %v, %v", again != nil && again.Replayed, err)
	}

	var resp responses.Response
	if err := json.Unmarshal([]byte(responseJSON), &resp); err != nil {
		t.Fatal(err)
	}
	r, err := sdk.PostResponse(ctx, c, "prov", &resp, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Messages) != 1 || r.Messages[0].OfFunctionCallOutput == nil || r.Messages[0].OfFunctionCallOutput.CallID.Value != "call_3" ||
		r.Messages[0].OfFunctionCallOutput.Output.OfString.Value != `{"text":"hi"}` {
		t.Errorf("responses items: %+v", r.Messages)
	}

	var msg anthropic.Message
	if err := json.Unmarshal([]byte(messageJSON), &msg); err != nil {
		t.Fatal(err)
	}
	a, err := sdk.PostMessage(ctx, c, "prov", &msg, &client.ProviderOptions{Placeholders: true})
	if err != nil {
		t.Fatal(err)
	}
	if !a.Ready || a.Status != client.StatusWaiting || a.Placeholders != 1 || a.FollowUp == "" {
		t.Fatalf("anthropic reply: ready %v status %q placeholders %d follow-up %q", a.Ready, a.Status, a.Placeholders, a.FollowUp)
	}
	if a.Messages.Role != anthropic.MessageParamRoleUser || len(a.Messages.Content) != 2 {
		t.Fatalf("anthropic message: %+v", a.Messages)
	}
	if tr := a.Messages.Content[0].OfToolResult; tr == nil || tr.ToolUseID != "toolu_1" {
		t.Errorf("anthropic block 0: %+v", a.Messages.Content[0])
	}
	if _, err := c.Complete(ctx, srv.completeURL(t), map[string]bool{"approved": true}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Await(ctx, "prov", "msg_T3"); err != nil {
		t.Fatal(err)
	}
	f, err := c.ProviderResults(ctx, "prov", "msg_T3", client.FormatAnthropic, true)
	if err != nil || !f.Ready {
		t.Fatalf("follow-up: %+v %v", f, err)
	}
	var follow anthropic.MessageParam
	if err := json.Unmarshal(f.Messages, &follow); err != nil || len(follow.Content) != 1 || follow.Content[0].OfText == nil {
		t.Errorf("follow-up message %s: %v", f.Messages, err)
	}

	// Without placeholders, a waiting turn is not ready: the reply carries the turn.
	w, err := c.PostProviderJSON(ctx, "prov2", client.FormatAnthropic, []byte(messageJSON), &client.ProviderOptions{TurnID: "msg_T4", PostOptions: client.PostOptions{Async: true}})
	if err != nil {
		t.Fatal(err)
	}
	if w.Ready || w.Turn == nil || w.Turn.ID != "msg_T4" {
		t.Errorf("waiting reply: %+v", w)
	}
	// The async post answers before its approval call runs: wait for the
	// call's approval before cancelling, or the cancel can come first and
	// no approval is ever logged.
	srv.completeURL(t) // msg_T4's approval
	if _, err := c.CancelTurn(ctx, "prov2", "msg_T4"); err != nil {
		t.Fatal(err)
	}
}
