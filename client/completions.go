package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
)

// The completion endpoints take no bearer token: the key is the
// credential. With WithSigningSecret each request is signed (Standard
// Webhooks). Keys are accepted bare (ck_…) or as the complete URL a tool
// received; a URL's own host is ignored in favour of the client's.

// Complete delivers a deferred call's output (any JSON value) and returns
// the server's acknowledgement: accepted, or already_completed when the
// same output had been delivered. A different result for a completed key is
// a 409 completion_conflict; one for a key that timed out or was cancelled
// a 410 completion_gone.
func (c *Client) Complete(ctx context.Context, key string, output any) (*DeliveryAck, error) {
	raw, err := jsonBody(output)
	if err != nil {
		return nil, err
	}
	return c.Deliver(ctx, key, Delivery{Output: raw})
}

// CompleteError delivers a deferred call's failure: its result becomes
// status error with this code and message.
func (c *Client) CompleteError(ctx context.Context, key, code, message string) (*DeliveryAck, error) {
	return c.Deliver(ctx, key, Delivery{Error: &DeliveryError{Code: code, Message: message}})
}

// Deliver posts a Delivery as it is (exactly one of Output and Error).
func (c *Client) Deliver(ctx context.Context, key string, d Delivery) (*DeliveryAck, error) {
	if d.Error == nil && d.Output == nil {
		d.Output = json.RawMessage("null")
	}
	body, err := jsonBody(d)
	if err != nil {
		return nil, err
	}
	return c.DeliverRaw(ctx, key, body)
}

// DeliverRaw posts body, a Delivery's JSON, byte for byte (the signature
// covers these bytes).
func (c *Client) DeliverRaw(ctx context.Context, key string, body []byte) (*DeliveryAck, error) {
	return callJSON[DeliveryAck](ctx, c, request{method: http.MethodPost, path: completePath(key), body: body, noAuth: true, sign: true})
}

// Heartbeat tells turnd the external work behind key is alive, moving its
// heartbeat deadline, and returns the key's state.
func (c *Client) Heartbeat(ctx context.Context, key string) (*CompletionInfo, error) {
	return callJSON[CompletionInfo](ctx, c, request{method: http.MethodPost, path: completePath(key) + "/heartbeat", body: []byte{}, noAuth: true, sign: true})
}

// CompletionStatus reads a key's state and deadlines.
func (c *Client) CompletionStatus(ctx context.Context, key string) (*CompletionInfo, error) {
	return callJSON[CompletionInfo](ctx, c, request{method: http.MethodGet, path: completePath(key), noAuth: true})
}

// completePath is the path of key, given bare or as a completion URL.
func completePath(key string) string {
	if u, err := url.Parse(key); err == nil && u.Scheme != "" {
		if rest, ok := strings.CutPrefix(u.EscapedPath(), "/v1/complete/"); ok {
			key, _ = url.PathUnescape(rest)
		}
	}
	return "/v1/complete/" + esc(key)
}
