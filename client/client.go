package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// DefaultURL is where a local turnd listens by default.
const DefaultURL = "http://127.0.0.1:8080"

// Client talks to one turnd. It is safe for concurrent use.
type Client struct {
	base   string
	token  string
	hc     *http.Client
	retry  RetryPolicy
	signer signer
}

// RetryPolicy bounds the client's own retries of a request whose answer it
// did not get (a connection error) or that the server could not take then
// (503, honouring Retry-After). A 4xx is never retried. Every retry sends the
// same request: a posted turn keeps its id, so a turn the server did record
// is replayed, not run again; deliveries and cancellations are idempotent
// too. CreateSession alone is not retried after a connection error.
type RetryPolicy struct {
	// MaxAttempts is the most attempts per request, the first included
	// (default 4; 1 disables retries).
	MaxAttempts int
	// MaxWait bounds the total time spent waiting between attempts
	// (default 30s).
	MaxWait time.Duration
	// Backoff is the first wait when the server gives no Retry-After,
	// doubled on each retry (default 200ms).
	Backoff time.Duration
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = 4
	}
	if p.MaxWait <= 0 {
		p.MaxWait = 30 * time.Second
	}
	if p.Backoff <= 0 {
		p.Backoff = 200 * time.Millisecond
	}
	return p
}

// Option configures a Client.
type Option func(*Client)

// WithToken sends a bearer token on /v1 requests (not on /v1/complete, whose
// key is the credential).
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithHTTPClient uses hc for every request (default: a client without a
// timeout, since waits and event streams are long; bound them with ctx).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithRetry sets the retry policy (zero fields take the defaults).
func WithRetry(p RetryPolicy) Option { return func(c *Client) { c.retry = p.withDefaults() } }

// WithSigningSecret signs completion deliveries and heartbeats with Standard
// Webhooks, as a server with TURND_COMPLETION_SIGNING_SECRET requires. The
// secret takes the forms the server accepts ("whsec_" + base64, or a raw
// string of at least 32 bytes); New fails on any other.
func WithSigningSecret(secret string) Option {
	return func(c *Client) { c.signer.secret = secret }
}

// New returns a client of the turnd at baseURL ("" is DefaultURL).
func New(baseURL string, opts ...Option) (*Client, error) {
	if baseURL == "" {
		baseURL = DefaultURL
	}
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("client: base URL %q: want http(s)://host[:port][/prefix]", baseURL)
	}
	c := &Client{base: strings.TrimRight(baseURL, "/"), hc: http.DefaultClient, retry: RetryPolicy{}.withDefaults()}
	for _, o := range opts {
		o(c)
	}
	if err := c.signer.init(); err != nil {
		return nil, err
	}
	return c, nil
}

// request is one API request; body is sent as it is on every attempt.
type request struct {
	method string
	path   string // escaped, with its query
	body   []byte // nil: none
	header http.Header
	noAuth bool // completion endpoints
	sign   bool // Standard Webhooks headers, when a secret is set
	// once: not retried after a connection error, whose request may
	// have been applied (creating a session is not idempotent).
	once bool
	// stream, when set, is the body, read as it arrives and sent with
	// contentType; such a request is sent once (its bytes are gone).
	stream      io.Reader
	contentType string
}

// do sends r, retrying as the policy allows, and returns a 2xx or 3xx
// answer with its body unread (the caller closes it); any other answer is
// an *Error.
func (c *Client) do(ctx context.Context, r request) (*http.Response, error) {
	var waited time.Duration
	backoff := c.retry.Backoff
	for attempt := 1; ; attempt++ {
		resp, err := c.send(ctx, r)
		var wait time.Duration
		switch {
		case err != nil:
			if ctx.Err() != nil || r.once {
				return nil, err
			}
			wait = backoff
		case resp.StatusCode < 400:
			return resp, nil
		default:
			apiErr := errorFrom(resp)
			resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable {
				return nil, apiErr
			}
			err, wait = apiErr, apiErr.RetryAfter
			if wait == 0 {
				wait = backoff
			}
		}
		if r.stream != nil || attempt >= c.retry.MaxAttempts || waited+wait > c.retry.MaxWait {
			return nil, err // a stream's bytes are gone: never sent twice
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%w (while waiting to retry after: %v)", ctx.Err(), err)
		case <-t.C:
		}
		waited += wait
		backoff *= 2
	}
}

func (c *Client) send(ctx context.Context, r request) (*http.Response, error) {
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	if r.stream != nil {
		body = r.stream
	}
	req, err := http.NewRequestWithContext(ctx, r.method, c.base+r.path, body)
	if err != nil {
		return nil, fmt.Errorf("client: %s %s: %w", r.method, r.path, err)
	}
	for k, v := range r.header {
		req.Header[k] = v
	}
	if r.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if r.stream != nil {
		req.Header.Set("Content-Type", r.contentType)
	}
	if req.Header.Get("Accept") == "" {
		req.Header.Set("Accept", "application/json, application/problem+json")
	}
	if c.token != "" && !r.noAuth {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if r.sign {
		c.signer.sign(req.Header, r.body)
	}
	return c.hc.Do(req)
}

// call sends r and decodes a JSON answer into out (nil: discarded).
func (c *Client) call(ctx context.Context, r request, out any) (*http.Response, error) {
	resp, err := c.do(ctx, r)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			return resp, fmt.Errorf("client: %s %s: decoding the answer: %w", r.method, r.path, err)
		}
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp, nil
}

// callJSON sends r and returns its JSON answer decoded as a T.
func callJSON[T any](ctx context.Context, c *Client, r request) (*T, error) {
	var v T
	if _, err := c.call(ctx, r, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

func jsonBody(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("client: encoding the request: %w", err)
	}
	return b, nil
}

// esc escapes one path segment.
func esc(s string) string { return url.PathEscape(s) }

// IsNotFound reports whether err is the server's 404.
func IsNotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == http.StatusNotFound
}
