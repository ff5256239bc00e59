package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Client does the suite's HTTP requests. Its connections are kept alive;
// CloseIdle drops them (the tests check for leaked goroutines).
type Client struct {
	hc *http.Client
}

// NewClient returns a client whose requests time out after timeout.
func NewClient(timeout time.Duration) *Client {
	return &Client{hc: &http.Client{
		Timeout:   timeout,
		Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true},
	}}
}

// CloseIdle closes the idle connections.
func (c *Client) CloseIdle() { c.hc.CloseIdleConnections() }

// Answer is a response with its body read.
type Answer struct {
	Status int
	Header http.Header
	Body   []byte
}

// Do sends a request (body nil: none) with header pairs (name, value, …);
// a body gets Content-Type application/json unless a header sets one.
func (c *Client) Do(ctx context.Context, method, url string, body []byte, header ...string) (Answer, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return Answer{}, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		if http.CanonicalHeaderKey(header[i]) == "Host" {
			req.Host = header[i+1]
			continue
		}
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return Answer{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return Answer{}, fmt.Errorf("%s %s: reading the body: %w", method, url, err)
	}
	return Answer{Status: resp.StatusCode, Header: resp.Header, Body: data}, nil
}

// The wire shapes the suite reads (see openapi.yaml).
type (
	// Turn is a turn as GET and POST answer it; Results are kept raw, to
	// compare re-reads byte for byte after canonicalising.
	Turn struct {
		ID        string            `json:"id"`
		SessionID string            `json:"session_id"`
		Status    string            `json:"status"`
		Results   []json.RawMessage `json:"results"`
	}
	// Result is the part of a result the checks read.
	Result struct {
		CallID string          `json:"call_id"`
		Name   string          `json:"name"`
		Status string          `json:"status"`
		Output json.RawMessage `json:"output"`
		Error  *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	// Line is a ledger line.
	Line struct {
		Seq    int64           `json:"seq"`
		TurnID string          `json:"turn_id"`
		CallID *string         `json:"call_id"`
		Kind   string          `json:"kind"`
		Data   json.RawMessage `json:"data"`
	}
	ledgerPage struct {
		Lines     []Line `json:"lines"`
		NextAfter int64  `json:"next_after"`
	}
)

// Settled reports whether a turn status is final.
func Settled(status string) bool {
	return status == "completed" || status == "failed" || status == "cancelled"
}

// answered reports whether a call status is final.
func answered(status string) bool {
	switch status {
	case "ok", "error", "refused", "cancelled", "timed_out":
		return true
	}
	return false
}

// GetTurn reads a turn.
func (c *Client) GetTurn(ctx context.Context, base, session, turn string, header ...string) (Turn, Answer, error) {
	a, err := c.Do(ctx, http.MethodGet, base+"/v1/sessions/"+session+"/turns/"+turn, nil, header...)
	if err != nil {
		return Turn{}, a, err
	}
	if a.Status != http.StatusOK {
		return Turn{}, a, fmt.Errorf("GET turn %s/%s: status %d: %s", session, turn, a.Status, clip(a.Body))
	}
	var t Turn
	if err := json.Unmarshal(a.Body, &t); err != nil {
		return Turn{}, a, fmt.Errorf("GET turn %s/%s: %w", session, turn, err)
	}
	return t, a, nil
}

// Ledger reads a session's whole ledger, page by page.
func (c *Client) Ledger(ctx context.Context, base, session string) ([]Line, error) {
	var lines []Line
	after := int64(0)
	for pages := 0; pages < 100000; pages++ {
		a, err := c.Do(ctx, http.MethodGet, fmt.Sprintf("%s/v1/sessions/%s/ledger?after=%d&limit=1000", base, session, after), nil)
		if err != nil {
			return nil, err
		}
		if a.Status != http.StatusOK {
			return nil, fmt.Errorf("ledger of %s after %d: status %d: %s", session, after, a.Status, clip(a.Body))
		}
		var p ledgerPage
		if err := json.Unmarshal(a.Body, &p); err != nil {
			return nil, fmt.Errorf("ledger of %s: %w", session, err)
		}
		if len(p.Lines) == 0 {
			return lines, nil
		}
		lines = append(lines, p.Lines...)
		after = p.NextAfter
	}
	return nil, fmt.Errorf("ledger of %s: too many pages", session)
}

// clip shortens a body for a message.
func clip(b []byte) string {
	if len(b) > 400 {
		return string(b[:400]) + "…"
	}
	return string(b)
}
