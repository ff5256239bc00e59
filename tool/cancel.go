package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/turnd/turnd/completion"
)

// Cancel requests are few and matter (they stop work someone pays for), so
// they are retried a little on transient failures, whatever the tool's own
// retry policy.
const (
	// CancelAttempts is how many times CancelExternal tries a cancel_url.
	CancelAttempts = 3
	// defaultCancelBackoff is the wait before the second attempt; it
	// doubles, and a Retry-After may lengthen it up to maxCancelBackoff.
	defaultCancelBackoff = 500 * time.Millisecond
	maxCancelBackoff     = 10 * time.Second
)

var (
	// ErrUnknownTool: the registry has no tool of that name (a reload may
	// have removed it since the call parked).
	ErrUnknownTool = errors.New("tool: unknown tool")
	// ErrCancelFailed: the tool's cancel_url did not accept the cancel
	// request (a non-2xx answer, or network errors through every attempt).
	ErrCancelFailed = errors.New("tool: cancel request failed")
)

// CancelRequest is the JSON body POSTed to a tool's cancel_url to cancel the
// external work of a parked call. Key is the call's completion key: it is
// how the tool finds the work, and it is sent only to the configured URL.
type CancelRequest struct {
	Key       string `json:"key"`
	SessionID string `json:"session_id"`
	TurnID    string `json:"turn_id"`
	CallID    string `json:"call_id"`
}

// fallbackClient sends the cancel requests of a tool that did not come from
// the config loader (a Spec built by hand with a CancelURL). Like
// NewHTTPClient's, it follows no redirects.
var fallbackClient = &http.Client{
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// CancelExternal POSTs body as JSON to the named tool's cancel_url (signed
// when signer is non-nil) to cancel a parked call's external work, retrying
// transient failures up to CancelAttempts in all; it returns nil once the
// tool answers 2xx, or at once when it has no cancel_url. An error matches
// ErrCancelFailed, ErrUnknownTool or ctx's error and never contains the key
// or the URL. See ARCHITECTURE.md, "Cancelling external work".
func (r *Registry) CancelExternal(ctx context.Context, toolName string, body CancelRequest, signer *completion.Signer) error {
	s, ok := r.Lookup(toolName)
	if !ok {
		return fmt.Errorf("tool: cancelling external work: %w %q", ErrUnknownTool, toolName)
	}
	if s.CancelURL == "" {
		return nil
	}
	data, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("tool: cancelling the external work of tool %q: encoding the request: %w", toolName, err)
	}
	c := cancelCall{url: s.CancelURL, body: data, signer: signer, client: r.client, timeout: DefaultTimeout, now: r.now}
	if ht, ok := s.Impl.(*httpTool); ok {
		c.client, c.header, c.timeout = ht.client, ht.header, ht.timeout
	}
	if c.client == nil {
		c.client = fallbackClient
	}
	if c.now == nil {
		c.now = time.Now
	}
	if signer != nil {
		c.id = completion.NewMessageID()
	}

	wait := r.cancelBackoff
	if wait <= 0 {
		wait = defaultCancelBackoff
	}
	for attempt := 1; ; attempt++ {
		retryAfter, retry, err := c.send(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("tool: cancelling the external work of tool %q: %w", toolName, context.Cause(ctx))
		}
		if !retry || attempt == CancelAttempts {
			return fmt.Errorf("%w: tool %q, attempt %d of %d: %v", ErrCancelFailed, toolName, attempt, CancelAttempts, err)
		}
		d := min(max(wait, retryAfter), maxCancelBackoff)
		wait *= 2
		timer := time.NewTimer(d)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return fmt.Errorf("tool: cancelling the external work of tool %q: %w", toolName, context.Cause(ctx))
		}
	}
}

// cancelCall is one cancel request, sent once per attempt.
type cancelCall struct {
	url     string
	body    []byte
	header  http.Header
	signer  *completion.Signer
	id      string // the webhook-id, the same for every attempt
	client  *http.Client
	timeout time.Duration
	now     func() time.Time
}

// send makes one attempt. Its error says what went wrong without the URL
// or the body; retry says whether another attempt may help.
func (c *cancelCall) send(ctx context.Context) (retryAfter time.Duration, retry bool, err error) {
	actx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodPost, c.url, bytes.NewReader(c.body))
	if err != nil {
		return 0, false, errors.New("cannot build the request")
	}
	if h := c.header.Clone(); h != nil {
		req.Header = h
	}
	req.Header.Set("Content-Type", "application/json")
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", "turnd")
	}
	if c.signer != nil {
		// Signed per attempt: the timestamp is the attempt's, so that a late
		// retry is not refused as a replay.
		for k, v := range c.signer.Headers(c.id, c.now(), c.body) {
			req.Header.Set(k, v)
		}
	}
	resp, err := c.client.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
			return 0, true, fmt.Errorf("no answer within %s", c.timeout)
		}
		// A *url.Error repeats the URL, which may carry a secret.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return 0, true, fmt.Errorf("request failed: %v", err)
	}
	defer resp.Body.Close()
	drain(resp.Body)
	status := fmt.Sprintf("HTTP %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		return 0, false, nil
	case code == http.StatusRequestTimeout, code == http.StatusTooManyRequests, code >= 500:
		return parseRetryAfter(resp.Header.Get("Retry-After"), c.now()), true, errors.New("the tool answered " + status)
	}
	return 0, false, errors.New("the tool answered " + status)
}
