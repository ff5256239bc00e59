package client

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// NewTurnID returns a fresh turn id: "turn_" and 26 characters carrying 128
// random bits.
func NewTurnID() string { return "turn_" + rand.Text() }

// PostOptions are the request preferences of a posted turn.
type PostOptions struct {
	// Wait holds the request until the turn settles (waiting included) or
	// this long passes (Prefer: wait, whole seconds, capped by the server).
	// Zero uses the server's default hold: until the turn leaves running.
	Wait time.Duration
	// Async answers at once with the turn as recorded (Prefer:
	// respond-async); it takes precedence over Wait.
	Async bool
}

func (o *PostOptions) header() http.Header {
	h := http.Header{}
	if o == nil {
		return h
	}
	switch {
	case o.Async:
		h.Set("Prefer", "respond-async")
	case o.Wait > 0:
		h.Set("Prefer", "wait="+strconv.Itoa(waitSeconds(o.Wait)))
	}
	return h
}

func waitSeconds(d time.Duration) int {
	s := int((d + time.Second - 1) / time.Second)
	return max(s, 1)
}

// CreateSession creates a session explicitly (a turn posted to an unknown
// session creates it with every tool and the default budget).
func (c *Client) CreateSession(ctx context.Context, req SessionRequest) (*Session, error) {
	body, err := jsonBody(req)
	if err != nil {
		return nil, err
	}
	return callJSON[Session](ctx, c, request{method: http.MethodPost, path: "/v1/sessions", body: body, once: true})
}

// Session reads a session.
func (c *Client) Session(ctx context.Context, sessionID string) (*Session, error) {
	return callJSON[Session](ctx, c, request{method: http.MethodGet, path: "/v1/sessions/" + esc(sessionID)})
}

// PostTurn posts a native turn to a session (created on first use) and
// returns the turn: settled, or running or waiting when the server's hold or
// opts.Wait ran out first (see Await). An empty req.ID is filled with
// NewTurnID before the first attempt, so the client's own retries (see
// RetryPolicy) replay the turn rather than run it twice; the caller's req is
// not modified.
func (c *Client) PostTurn(ctx context.Context, sessionID string, req TurnRequest, opts *PostOptions) (*Turn, error) {
	if req.ID == "" {
		req.ID = NewTurnID()
	}
	if req.Calls == nil {
		req.Calls = []Call{}
	}
	body, err := jsonBody(req)
	if err != nil {
		return nil, err
	}
	var t Turn
	resp, err := c.call(ctx, request{method: http.MethodPost, path: "/v1/sessions/" + esc(sessionID) + "/turns", body: body, header: opts.header()}, &t)
	if err != nil {
		return nil, err
	}
	t.Replayed = resp.Header.Get("Turnd-Replayed") == "true"
	return &t, nil
}

// Turn reads a turn's recorded state.
func (c *Client) Turn(ctx context.Context, sessionID, turnID string) (*Turn, error) {
	return c.getTurn(ctx, sessionID, turnID, 0)
}

// maxWaitPerRequest is the longest wait asked for in one request; Await
// asks again until its own wait is over. Below the server's usual cap (10
// minutes) and proxies' idle timeouts.
const maxWaitPerRequest = 60 * time.Second

// Await holds until the turn settles (completed, failed, cancelled) or ctx
// ends, by long polls (Prefer: wait) of at most a minute each, and returns
// the settled turn. A turn waiting on pending calls is not settled: Await
// keeps holding until they are delivered, time out or are cancelled.
func (c *Client) Await(ctx context.Context, sessionID, turnID string) (*Turn, error) {
	for {
		wait := maxWaitPerRequest
		if dl, ok := ctx.Deadline(); ok {
			wait = min(wait, time.Until(dl))
		}
		t, err := c.getTurn(ctx, sessionID, turnID, wait)
		if err != nil {
			return nil, err
		}
		if t.Settled() {
			return t, nil
		}
		if err := ctx.Err(); err != nil {
			return t, err
		}
	}
}

func (c *Client) getTurn(ctx context.Context, sessionID, turnID string, wait time.Duration) (*Turn, error) {
	h := http.Header{}
	if wait > 0 {
		h.Set("Prefer", "wait="+strconv.Itoa(waitSeconds(wait)))
	}
	return callJSON[Turn](ctx, c, request{method: http.MethodGet, path: turnPath(sessionID, turnID), header: h})
}

// CancelTurn cancels a running or waiting turn and returns it once it has
// stopped (a settled turn is returned as it is).
func (c *Client) CancelTurn(ctx context.Context, sessionID, turnID string) (*Turn, error) {
	return callJSON[Turn](ctx, c, request{method: http.MethodPost, path: turnPath(sessionID, turnID) + "/cancel"})
}

// Tools lists the registered tools; with a session id, only those it may
// call.
func (c *Client) Tools(ctx context.Context, sessionID string) ([]Tool, error) {
	path := "/v1/tools"
	if sessionID != "" {
		path += "?session_id=" + url.QueryEscape(sessionID)
	}
	var l ToolList
	if _, err := c.call(ctx, request{method: http.MethodGet, path: path}, &l); err != nil {
		return nil, err
	}
	return l.Tools, nil
}

// Output opens a call's full output (a truncated result's OutputID); the
// caller reads and closes it. contentType is the tool's (text/plain or
// application/json).
func (c *Client) Output(ctx context.Context, outputID string) (body io.ReadCloser, contentType string, err error) {
	resp, err := c.do(ctx, request{method: http.MethodGet, path: "/v1/outputs/" + esc(outputID)})
	if err != nil {
		return nil, "", err
	}
	return resp.Body, resp.Header.Get("Content-Type"), nil
}

// Health reads /healthz (the process is up).
func (c *Client) Health(ctx context.Context) (*Health, error) {
	return callJSON[Health](ctx, c, request{method: http.MethodGet, path: "/healthz"})
}

func turnPath(sessionID, turnID string) string {
	return fmt.Sprintf("/v1/sessions/%s/turns/%s", esc(sessionID), esc(turnID))
}

// Ready reads /readyz: nil when the server takes traffic, else an *Error
// (503 while its database is unreachable or it is shutting down). It is
// not retried.
func (c *Client) Ready(ctx context.Context) error {
	resp, err := c.send(ctx, request{method: http.MethodGet, path: "/readyz"})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errorFrom(resp)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return nil
}

// OpenAPI reads the server's HTTP contract (openapi.yaml).
func (c *Client) OpenAPI(ctx context.Context) ([]byte, error) {
	resp, err := c.do(ctx, request{method: http.MethodGet, path: "/openapi.yaml"})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}
