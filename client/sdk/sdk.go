// Package sdk posts the messages the official OpenAI and Anthropic Go SDKs
// return as turnd turns, and answers what to append as the SDKs' own param
// types. It is apart from package client so that a program that does not
// use the SDKs (turnd's own command line among them) does not link them:
// they doubled the turnd binary.
package sdk

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/turnd/turnd/client"
)

// PostChatCompletion posts an OpenAI Chat Completion (as the official SDK
// returns it) as a turn and answers the tool messages to append, one per
// tool call, in call order.
func PostChatCompletion(ctx context.Context, c *client.Client, sessionID string, completion *openai.ChatCompletion, opts *client.ProviderOptions) (*client.ProviderReply[[]openai.ChatCompletionMessageParamUnion], error) {
	body, err := sdkJSON(completion.RawJSON(), completion)
	if err != nil {
		return nil, err
	}
	return typed[[]openai.ChatCompletionMessageParamUnion](c.PostProviderJSON(ctx, sessionID, client.FormatOpenAIChat, body, opts))
}

// PostResponse posts an OpenAI Responses API response as a turn and answers
// the function_call_output items to append as the next request's input.
func PostResponse(ctx context.Context, c *client.Client, sessionID string, resp *responses.Response, opts *client.ProviderOptions) (*client.ProviderReply[[]responses.ResponseInputItemUnionParam], error) {
	body, err := sdkJSON(resp.RawJSON(), resp)
	if err != nil {
		return nil, err
	}
	return typed[[]responses.ResponseInputItemUnionParam](c.PostProviderJSON(ctx, sessionID, client.FormatOpenAIResponses, body, opts))
}

// PostMessage posts an Anthropic message as a turn and answers the user
// message of tool_result blocks to append.
func PostMessage(ctx context.Context, c *client.Client, sessionID string, msg *anthropic.Message, opts *client.ProviderOptions) (*client.ProviderReply[anthropic.MessageParam], error) {
	body, err := sdkJSON(msg.RawJSON(), msg)
	if err != nil {
		return nil, err
	}
	return typed[anthropic.MessageParam](c.PostProviderJSON(ctx, sessionID, client.FormatAnthropic, body, opts))
}

// sdkJSON is the message as the API sent it when the SDK kept that, else
// the SDK's own encoding.
func sdkJSON(raw string, v any) ([]byte, error) {
	if raw != "" {
		return []byte(raw), nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("sdk: encoding the message: %w", err)
	}
	return b, nil
}

// typed decodes a reply's rendering into the SDK's param type M.
func typed[M any](r *client.ProviderReply[json.RawMessage], err error) (*client.ProviderReply[M], error) {
	if err != nil {
		return nil, err
	}
	out := &client.ProviderReply[M]{Ready: r.Ready, Status: r.Status, Placeholders: r.Placeholders,
		FollowUp: r.FollowUp, Replayed: r.Replayed, Turn: r.Turn}
	if r.Ready {
		if err := json.Unmarshal(r.Messages, &out.Messages); err != nil {
			return nil, fmt.Errorf("sdk: decoding the provider messages: %w", err)
		}
	}
	return out, nil
}
