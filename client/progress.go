package client

import (
	"context"
	"net/http"
	"time"
)

// Progress is how far a deferred call's external work has come: Progress
// should grow with each report; Total is 0 when unknown; Message is for a
// person (at most 512 bytes).
type Progress struct {
	Progress float64 `json:"progress"`
	Total    float64 `json:"total,omitempty"`
	Message  string  `json:"message,omitempty"`
}

// ReportProgress tells turnd how far the work behind key has come; the
// turn's event stream shows it as a call_progress event (it is never
// journaled). It returns the key's state; a key whose call has its result
// fails with a *Error of status 410.
func (c *Client) ReportProgress(ctx context.Context, key string, p Progress) (*CompletionInfo, error) {
	body, err := jsonBody(p)
	if err != nil {
		return nil, err
	}
	return callJSON[CompletionInfo](ctx, c, request{method: http.MethodPost, path: completePath(key) + "/progress", body: body, noAuth: true, sign: true})
}

// ProgressEvent is the data of a call_progress event, which the event
// stream of a turn carries when asked (GET …/events?progress=true): a
// running call's latest progress. Events reads ledger lines only.
type ProgressEvent struct {
	CallID   string    `json:"call_id"`
	Progress float64   `json:"progress"`
	Total    float64   `json:"total,omitempty"`
	Message  string    `json:"message,omitempty"`
	At       time.Time `json:"at"`
}
