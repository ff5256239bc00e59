package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
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

// PostProviderJSON posts a provider message given as JSON (format is one of
// the Format constants) and answers the rendering as JSON.
func (c *Client) PostProviderJSON(ctx context.Context, sessionID, format string, body []byte, opts *ProviderOptions) (*ProviderReply[json.RawMessage], error) {
	return providerCall[json.RawMessage](ctx, c, providerRequest(sessionID, format, body, opts))
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

// PostProviderStream posts a turn as the model streams it: r is the
// provider API's event stream as it sent it (format one of the Format
// constants), forwarded to turnd as it is read, so that turnd starts the
// turn's leading read calls while the model still generates. The answer is
// the one PostProviderJSON gives for the whole message. A stream is sent
// once, never retried: its bytes are gone.
func (c *Client) PostProviderStream(ctx context.Context, sessionID, format string, r io.Reader, opts *ProviderOptions) (*ProviderReply[json.RawMessage], error) {
	req := providerRequest(sessionID, format, nil, opts)
	req.stream, req.contentType, req.once = r, "text/event-stream", true
	return providerCall[json.RawMessage](ctx, c, req)
}

// TeeProviderStream returns a reader of r, the provider API's event
// stream, for the caller to read as the SDK would, while every byte it
// reads also goes to turnd as a streamed turn. wait, called once the
// caller has read r to its end (or given up on it: then turnd answers 422
// stream_incomplete), gives turnd's answer.
func (c *Client) TeeProviderStream(ctx context.Context, sessionID, format string, r io.Reader, opts *ProviderOptions) (io.Reader, func() (*ProviderReply[json.RawMessage], error)) {
	pr, pw := io.Pipe()
	type result struct {
		reply *ProviderReply[json.RawMessage]
		err   error
	}
	done := make(chan result, 1)
	go func() {
		reply, err := c.PostProviderStream(ctx, sessionID, format, pr, opts)
		_ = pr.CloseWithError(err) // turnd answered: writes fail fast
		done <- result{reply, err}
	}()
	tee := &teeReader{r: r, w: pw}
	return tee, func() (*ProviderReply[json.RawMessage], error) {
		tee.finish()
		res := <-done
		return res.reply, res.err
	}
}

// teeReader reads r and writes what it read to w; once r ends (or the
// caller stops reading), finish closes w with what ended r.
type teeReader struct {
	r    io.Reader
	w    *io.PipeWriter
	once sync.Once
	err  error // what ended r
	dead bool  // w failed: turnd stopped reading
}

func (t *teeReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if n > 0 && !t.dead {
		if _, werr := t.w.Write(p[:n]); werr != nil {
			t.dead = true
		}
	}
	if err != nil {
		if err != io.EOF {
			t.err = err
		}
		t.finish()
	}
	return n, err
}

func (t *teeReader) finish() {
	t.once.Do(func() { _ = t.w.CloseWithError(t.err) })
}

// PostTurnStream posts a native turn as NDJSON while it is produced: r
// gives the header line ({"id", "mode"?, "failure_policy"?}) and then one
// call ({"id","name","arguments"}) per line; the end of r ends the turn.
// It is sent once, never retried.
func (c *Client) PostTurnStream(ctx context.Context, sessionID string, r io.Reader, opts *PostOptions) (*Turn, error) {
	return callJSON[Turn](ctx, c, request{method: http.MethodPost, path: "/v1/sessions/" + esc(sessionID) + "/turns",
		stream: r, contentType: "application/x-ndjson", once: true, header: opts.header()})
}

// providerRequest is the POST of a turn in a provider format.
func providerRequest(sessionID, format string, body []byte, opts *ProviderOptions) request {
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
	return request{
		method: http.MethodPost, path: "/v1/sessions/" + esc(sessionID) + "/turns?" + q.Encode(),
		body: body, header: opts.PostOptions.header(),
	}
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
