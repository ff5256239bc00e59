package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
)

// Provider formats (?format=).
const (
	FormatOpenAIChat      = "openai.chat"
	FormatOpenAIResponses = "openai.responses"
	FormatAnthropic       = "anthropic.messages"
)

// ProviderOptions are the options of a turn posted in a provider format.
type ProviderOptions struct {
	PostOptions
	// TurnID overrides the turn id, which is otherwise the message's own
	// (chatcmpl-…, resp_…, msg_…), so that a retried post replays.
	TurnID string
	// Placeholders answers a turn with parked calls at once, each parked
	// call's result a placeholder (pending=placeholder); the real results
	// come later from FollowUp.
	Placeholders bool
	// Mode and FailurePolicy are as in a native turn.
	Mode, FailurePolicy string
}

// ProviderReply is what a provider-format post answers. Messages is what to
// append to the conversation when Ready; when the turn cannot be rendered
// yet (running, or waiting without Placeholders) Ready is false and Turn is
// the turn as it stands: Await it, then read the rendering with
// ProviderResults.
type ProviderReply[M any] struct {
	Ready    bool
	Messages M
	// Status is the turn's status (Turnd-Turn-Status).
	Status string
	// Placeholders counts the placeholder results in Messages; FollowUp
	// (a path) gives the user message with their real results later.
	Placeholders int
	FollowUp     string
	Replayed     bool
	Turn         *Turn
}

// PostChatCompletion posts an OpenAI Chat Completion (as the official SDK
// returns it) as a turn and answers the tool messages to append, one per
// tool call, in call order.
func (c *Client) PostChatCompletion(ctx context.Context, sessionID string, completion *openai.ChatCompletion, opts *ProviderOptions) (*ProviderReply[[]openai.ChatCompletionMessageParamUnion], error) {
	body, err := sdkJSON(completion.RawJSON(), completion)
	if err != nil {
		return nil, err
	}
	return postProvider[[]openai.ChatCompletionMessageParamUnion](ctx, c, sessionID, FormatOpenAIChat, body, opts)
}

// PostResponse posts an OpenAI Responses API response as a turn and answers
// the function_call_output items to append as the next request's input.
func (c *Client) PostResponse(ctx context.Context, sessionID string, resp *responses.Response, opts *ProviderOptions) (*ProviderReply[[]responses.ResponseInputItemUnionParam], error) {
	body, err := sdkJSON(resp.RawJSON(), resp)
	if err != nil {
		return nil, err
	}
	return postProvider[[]responses.ResponseInputItemUnionParam](ctx, c, sessionID, FormatOpenAIResponses, body, opts)
}

// PostMessage posts an Anthropic message as a turn and answers the user
// message of tool_result blocks to append.
func (c *Client) PostMessage(ctx context.Context, sessionID string, msg *anthropic.Message, opts *ProviderOptions) (*ProviderReply[anthropic.MessageParam], error) {
	body, err := sdkJSON(msg.RawJSON(), msg)
	if err != nil {
		return nil, err
	}
	return postProvider[anthropic.MessageParam](ctx, c, sessionID, FormatAnthropic, body, opts)
}

// PostProviderJSON posts a provider message given as JSON (format is one of
// the Format constants) and answers the rendering as JSON.
func (c *Client) PostProviderJSON(ctx context.Context, sessionID, format string, body []byte, opts *ProviderOptions) (*ProviderReply[json.RawMessage], error) {
	return postProvider[json.RawMessage](ctx, c, sessionID, format, body, opts)
}

// ProviderResults reads a turn's rendering in a provider format (the same
// answer its post gave). With followUp it is the follow-up of a placeholder
// rendering: the real results of the calls that had placeholders.
func (c *Client) ProviderResults(ctx context.Context, sessionID, turnID, format string, followUp bool) (*ProviderReply[json.RawMessage], error) {
	q := url.Values{"format": {format}}
	if followUp {
		q.Set("since", "placeholder")
	}
	return providerCall[json.RawMessage](ctx, c, request{method: http.MethodGet, path: turnPath(sessionID, turnID) + "?" + q.Encode()})
}

func sdkJSON(raw string, v any) ([]byte, error) {
	if raw != "" {
		return []byte(raw), nil
	}
	return jsonBody(v)
}

func postProvider[M any](ctx context.Context, c *Client, sessionID, format string, body []byte, opts *ProviderOptions) (*ProviderReply[M], error) {
	if opts == nil {
		opts = &ProviderOptions{}
	}
	q := url.Values{"format": {format}}
	if opts.TurnID != "" {
		q.Set("turn_id", opts.TurnID)
	}
	if opts.Placeholders {
		q.Set("pending", "placeholder")
	}
	if opts.Mode != "" {
		q.Set("mode", opts.Mode)
	}
	if opts.FailurePolicy != "" {
		q.Set("failure_policy", opts.FailurePolicy)
	}
	return providerCall[M](ctx, c, request{
		method: http.MethodPost, path: "/v1/sessions/" + esc(sessionID) + "/turns?" + q.Encode(),
		body: body, header: opts.PostOptions.header(),
	})
}

// providerCall sends r: 200 is a rendering, 202 the Turn.
func providerCall[M any](ctx context.Context, c *Client, r request) (*ProviderReply[M], error) {
	resp, err := c.do(ctx, r)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	reply := &ProviderReply[M]{
		Status:   resp.Header.Get("Turnd-Turn-Status"),
		FollowUp: resp.Header.Get("Turnd-Follow-Up"),
		Replayed: resp.Header.Get("Turnd-Replayed") == "true",
	}
	reply.Placeholders, _ = strconv.Atoi(resp.Header.Get("Turnd-Placeholders"))
	dec := json.NewDecoder(resp.Body)
	if resp.StatusCode == http.StatusAccepted {
		var t Turn
		if err := dec.Decode(&t); err != nil {
			return nil, fmt.Errorf("client: decoding the turn: %w", err)
		}
		reply.Turn = &t
		if reply.Status == "" {
			reply.Status = t.Status
		}
		return reply, nil
	}
	if err := dec.Decode(&reply.Messages); err != nil {
		return nil, fmt.Errorf("client: decoding the provider messages: %w", err)
	}
	reply.Ready = true
	return reply, nil
}
