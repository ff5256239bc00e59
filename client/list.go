package client

import (
	"context"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// The listing endpoints (GET /v1/sessions, GET /v1/sessions/{id}/turns,
// GET /v1/pending) are newer than some servers: an older turnd answers
// them 404 or 405.

// SessionSummary is a session in a listing: the session, its number of
// turns, its calls parked now, and the time of its newest ledger line.
type SessionSummary struct {
	Session
	Turns        int       `json:"turns"`
	Pending      int       `json:"pending"`
	LastActivity time.Time `json:"last_activity"`
}

// SessionPage is a page of sessions, newest first. NextAfter is the cursor
// of the next page, empty on the last one.
type SessionPage struct {
	Sessions  []SessionSummary `json:"sessions"`
	NextAfter string           `json:"next_after"`
}

// TurnSummary is a turn in a listing, without its results.
type TurnSummary struct {
	ID        string     `json:"id"`
	Status    string     `json:"status"`
	Calls     int        `json:"calls"`
	Pending   int        `json:"pending"`
	CreatedAt time.Time  `json:"created_at"`
	SettledAt *time.Time `json:"settled_at"`
}

// TurnPage is a page of a session's turns, newest first.
type TurnPage struct {
	Turns     []TurnSummary `json:"turns"`
	NextAfter string        `json:"next_after"`
}

// ListOptions select a listing page: after is the previous page's
// NextAfter ("" for the first page), Limit at most 500 (0: the server's
// default), Status keeps only turns in that status (turns only).
type ListOptions struct {
	After  string
	Limit  int
	Status string
}

func (o ListOptions) query() string {
	q := url.Values{}
	if o.After != "" {
		q.Set("after", o.After)
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.Status != "" {
		q.Set("status", o.Status)
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// SessionsPage reads one page of sessions, newest first.
func (c *Client) SessionsPage(ctx context.Context, opts ListOptions) (*SessionPage, error) {
	opts.Status = ""
	return callJSON[SessionPage](ctx, c, request{method: http.MethodGet, path: "/v1/sessions" + opts.query()})
}

// TurnsPage reads one page of a session's turns, newest first.
func (c *Client) TurnsPage(ctx context.Context, sessionID string, opts ListOptions) (*TurnPage, error) {
	return callJSON[TurnPage](ctx, c, request{method: http.MethodGet, path: "/v1/sessions/" + esc(sessionID) + "/turns" + opts.query()})
}

// ParkedCall is a call parked on a completion key, as the pending listing
// gives it: never the key itself.
type ParkedCall struct {
	SessionID         string     `json:"session_id"`
	TurnID            string     `json:"turn_id"`
	CallIndex         int        `json:"call_index"`
	CallID            string     `json:"call_id"`
	Tool              string     `json:"tool"`
	ParkedAt          time.Time  `json:"parked_at"`
	Deadline          *time.Time `json:"deadline"`
	HeartbeatTimeout  string     `json:"heartbeat_timeout,omitempty"`
	HeartbeatDeadline *time.Time `json:"heartbeat_deadline"`
	OnTimeout         string     `json:"on_timeout"`
	OnCancel          string     `json:"on_cancel"`
	// Reason is "approval" for a call waiting for a decision; "" for one
	// waiting for its tool's external work.
	Reason string `json:"reason,omitempty"`
}

// PendingPage is a page of parked calls across sessions, newest first.
type PendingPage struct {
	Pending   []ParkedCall `json:"pending"`
	NextAfter string       `json:"next_after"`
}

// PendingPage reads one page of the calls parked now, across sessions.
func (c *Client) PendingPage(ctx context.Context, opts ListOptions) (*PendingPage, error) {
	opts.Status = ""
	return callJSON[PendingPage](ctx, c, request{method: http.MethodGet, path: "/v1/pending" + opts.query()})
}

// Sessions iterates over every session, newest first, page by page.
func (c *Client) Sessions(ctx context.Context, opts ListOptions) iter.Seq2[SessionSummary, error] {
	return pages(opts, func(o ListOptions) (*SessionPage, error) { return c.SessionsPage(ctx, o) })
}

// Turns iterates over a session's turns, newest first, page by page.
func (c *Client) Turns(ctx context.Context, sessionID string, opts ListOptions) iter.Seq2[TurnSummary, error] {
	return pages(opts, func(o ListOptions) (*TurnPage, error) { return c.TurnsPage(ctx, sessionID, o) })
}

// Pending iterates over the calls parked now, newest first, page by page.
func (c *Client) Pending(ctx context.Context, opts ListOptions) iter.Seq2[ParkedCall, error] {
	return pages(opts, func(o ListOptions) (*PendingPage, error) { return c.PendingPage(ctx, o) })
}

func (p *SessionPage) page() ([]SessionSummary, string) { return p.Sessions, p.NextAfter }
func (p *TurnPage) page() ([]TurnSummary, string)       { return p.Turns, p.NextAfter }
func (p *PendingPage) page() ([]ParkedCall, string)     { return p.Pending, p.NextAfter }

// pages iterates over a listing's rows, reading its pages with read from
// opts on: each page's rows, then the page after its NextAfter, until a
// page without one. An error is yielded once, with a zero row, and ends
// the iteration.
func pages[T any, P interface{ page() ([]T, string) }](opts ListOptions, read func(ListOptions) (P, error)) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		for {
			p, err := read(opts)
			if err != nil {
				var zero T
				yield(zero, err)
				return
			}
			rows, next := p.page()
			for _, row := range rows {
				if !yield(row, nil) {
					return
				}
			}
			if next == "" {
				return
			}
			opts.After = next
		}
	}
}

// TurnCalls reads a turn's calls as posted, arguments included.
func (c *Client) TurnCalls(ctx context.Context, sessionID, turnID string) ([]Call, error) {
	var body struct {
		Calls []Call `json:"calls"`
	}
	if _, err := c.call(ctx, request{method: http.MethodGet, path: turnPath(sessionID, turnID) + "/calls"}, &body); err != nil {
		return nil, err
	}
	return body.Calls, nil
}
