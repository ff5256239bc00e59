package client

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"time"
)

// Error is an answer the server gave as an RFC 9457 problem (or, rarely, any
// other 4xx/5xx answer). Code is the stable machine-readable code
// (not_found, turn_conflict, store_unavailable, …); Detail is for humans.
type Error struct {
	Status int    `json:"status"`
	Code   string `json:"code"`
	Title  string `json:"title"`
	Detail string `json:"detail,omitempty"`
	Type   string `json:"type"`

	// RetryAfter is the server's Retry-After, zero when it sent none.
	RetryAfter time.Duration `json:"-"`
	// RequestID is the answer's X-Request-Id, for the server's logs.
	RequestID string `json:"-"`
}

func (e *Error) Error() string {
	if e.Detail != "" {
		return fmt.Sprintf("turnd answered %d %s: %s", e.Status, e.Code, e.Detail)
	}
	return fmt.Sprintf("turnd answered %d %s", e.Status, e.Code)
}

// maxErrorBody bounds how much of an error answer is read.
const maxErrorBody = 64 << 10

// errorFrom reads an error answer into an *Error. A body that is not a
// problem still gives Status, and Code "http_<status>".
func errorFrom(resp *http.Response) *Error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	e := &Error{}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "application/problem+json" || mt == "application/json" {
		_ = json.Unmarshal(body, e)
	}
	e.Status = resp.StatusCode
	if e.Code == "" {
		e.Code = "http_" + strconv.Itoa(resp.StatusCode)
	}
	if e.Title == "" {
		e.Title = http.StatusText(resp.StatusCode)
	}
	if e.Detail == "" && len(body) > 0 && e.Type == "" {
		e.Detail = string(body)
	}
	e.RetryAfter = retryAfter(resp.Header.Get("Retry-After"), time.Now())
	e.RequestID = resp.Header.Get("X-Request-Id")
	return e
}

// retryAfter parses Retry-After: delay seconds or an HTTP date.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
