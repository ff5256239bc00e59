package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/turnd/turnd/budget"
	"github.com/turnd/turnd/completion"
	"github.com/turnd/turnd/dispatch"
)

// Codes of the outcomes an HTTP tool produces itself. A tool's own
// {"error": {"code": ...}} passes through unchanged.
const (
	// CodeToolUnavailable marks a transient failure (408, 429, 5xx, timeout,
	// network error); the outcome is retryable.
	CodeToolUnavailable = "tool_unavailable"
	// CodeToolRejected: the tool answered 4xx (not 408/429) or redirected.
	CodeToolRejected = "tool_rejected"
	// CodeInvalidToolResponse: a 2xx answer that breaks the protocol.
	CodeInvalidToolResponse = "invalid_tool_response"
	// CodeOutputTooLarge: a JSON body (or a text body read without a
	// projector) over the keep cap.
	CodeOutputTooLarge = "output_too_large"
	// CodeToolError: a tool's {"error": ...} that named no code.
	CodeToolError = "tool_error"
	// CodeCompletionKeyUnavailable: a deferred tool could not take the
	// call's completion key (the turn offers none, or issuing it failed),
	// so the call cannot be parked and is not run. Not retried.
	CodeCompletionKeyUnavailable = "completion_key_unavailable"
)

// CallContext identifies the turn a call belongs to; the HTTP protocol
// sends it to the tool and derives the Idempotency-Key from it.
type CallContext struct {
	SessionID string
	TurnID    string
	// CompleteURL returns the URL where the result of a parked call is
	// delivered, given its completion key. The turn service builds it from
	// the server's public base URL; nil means the path "/v1/complete/{key}",
	// relative to wherever turnd is reached.
	CompleteURL func(key string) string
	// Progress receives the progress the wave's calls report (see
	// Progress); nil drops it.
	Progress ProgressReporter
}

// completeURL is where the call parked on key is completed.
func (cc CallContext) completeURL(key string) string {
	if cc.CompleteURL != nil {
		return cc.CompleteURL(key)
	}
	return "/v1/complete/" + url.PathEscape(key)
}

type callContextKey struct{}

// WithCallContext returns a context carrying cc. The turn service sets it
// on the context it runs a wave with.
func WithCallContext(ctx context.Context, cc CallContext) context.Context {
	return context.WithValue(ctx, callContextKey{}, cc)
}

// CallContextFrom returns the CallContext set by WithCallContext.
func CallContextFrom(ctx context.Context) (CallContext, bool) {
	cc, ok := ctx.Value(callContextKey{}).(CallContext)
	return cc, ok
}

// NewHTTPClient returns the client Open and Parse give HTTP tools when
// Options.HTTPClient is nil: bounded dial, TLS and idle timeouts, proxies
// from the environment, and no redirects (a redirect would re-send the
// configured headers, secrets included, to wherever it points). It has no
// overall timeout: each attempt is bounded by its tool's http.timeout.
func NewHTTPClient() *http.Client {
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Client{
		Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           dialer.DialContext,
			ForceAttemptHTTP2:     true,
			MaxIdleConns:          100,
			MaxIdleConnsPerHost:   16,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   10 * time.Second,
			ExpectContinueTimeout: time.Second,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// httpTool runs a tool by POSTing its calls to an HTTP endpoint. It is
// immutable once built and safe for concurrent calls.
type httpTool struct {
	url     string
	timeout time.Duration
	header  http.Header // configured headers, ${VAR} already expanded
	client  *http.Client
	now     func() time.Time

	// deferred tools take a completion key before each request and may
	// answer pending; pending are their default options.
	deferred  bool
	pending   completion.Options
	cancelURL string
	// projection is the tool's own window and patterns (Spec.Projection).
	projection budget.Projection
}

// request is the body POSTed to the tool.
type request struct {
	SessionID  string             `json:"session_id"`
	TurnID     string             `json:"turn_id"`
	CallID     string             `json:"call_id"`
	Name       string             `json:"name"`
	Arguments  json.RawMessage    `json:"arguments"`
	Attempt    int                `json:"attempt"`
	Completion *requestCompletion `json:"completion,omitempty"`
}

// requestCompletion tells a deferred tool how to complete the call later:
// POST the result to URL (which carries Key) before Deadline, the default
// deadline, which a pending answer may change.
type requestCompletion struct {
	Key      string `json:"key"`
	URL      string `json:"url"`
	Deadline string `json:"deadline"`
}

// acceptHeader states what the protocol understands.
const acceptHeader = "application/json, " + progressStreamType + ", text/*;q=0.9"

// errorBodyLimit bounds what is read of a body that is not the output: an
// error answer, or one drained so that its connection can be reused.
const errorBodyLimit = 64 << 10

// Invoke runs one attempt: one POST with the attempt's timeout.
func (t *httpTool) Invoke(ctx context.Context, call dispatch.Call, at *dispatch.Attempt) dispatch.Outcome {
	cc, _ := CallContextFrom(ctx)
	attempt := 1
	if at != nil {
		attempt = at.Number()
	}
	req0 := request{
		SessionID: cc.SessionID, TurnID: cc.TurnID, CallID: call.ID, Name: call.Name,
		Arguments: normalizeArguments(call.Arguments), Attempt: attempt,
	}
	var d *deferral
	if t.deferred {
		var fail dispatch.Outcome
		if d, fail = t.takeKey(ctx, at); d == nil {
			return fail
		}
		req0.Completion = &requestCompletion{Key: d.key, URL: cc.completeURL(d.key), Deadline: d.deadline.Format(time.RFC3339Nano)}
	}
	body, err := json.Marshal(req0)
	if err != nil {
		return dispatch.Fail(dispatch.CodeInvalidArguments, "arguments are not valid JSON")
	}

	actx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodPost, t.url, bytes.NewReader(body))
	if err != nil {
		// The URL was checked when the config was loaded.
		return dispatch.Fail(CodeToolRejected, "cannot build the request to the tool")
	}
	if h := t.header.Clone(); h != nil {
		req.Header = h
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", cc.SessionID+"/"+cc.TurnID+"/"+call.ID)
	if req.Header.Get("Accept") == "" {
		req.Header.Set("Accept", acceptHeader)
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", "turnd")
	}

	resp, err := t.client.Do(req)
	if err != nil {
		return t.failure(ctx, err, "request failed")
	}
	defer resp.Body.Close()
	return t.answer(ctx, resp, d, call.ID)
}

// answer reads the tool's response; d is the call's deferral, nil unless
// the tool is deferred.
func (t *httpTool) answer(ctx context.Context, resp *http.Response, d *deferral, callID string) dispatch.Outcome {
	status := fmt.Sprintf("HTTP %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
	case code == http.StatusRequestTimeout, code == http.StatusTooManyRequests, code >= 500:
		drain(resp.Body)
		return dispatch.FailRetryable(CodeToolUnavailable, "the tool answered "+status,
			parseRetryAfter(resp.Header.Get("Retry-After"), t.now()))
	case code >= 300 && code < 400:
		drain(resp.Body)
		return dispatch.Fail(CodeToolRejected, "the tool answered with a redirect ("+status+"), which turnd does not follow")
	default:
		return t.rejected(ctx, resp, status)
	}

	ctype := resp.Header.Get("Content-Type")
	mt, _, _ := mime.ParseMediaType(ctype)
	switch {
	case mt == "application/json" || strings.HasSuffix(mt, "+json"):
		return t.readJSON(ctx, resp, d)
	case strings.HasPrefix(mt, "text/"):
		return t.readText(ctx, resp, ctype)
	case mt == progressStreamType:
		return t.readProgressStream(ctx, resp, d, callID)
	}
	drain(resp.Body)
	if ctype == "" {
		ctype = "none"
	}
	return dispatch.Fail(CodeInvalidToolResponse,
		fmt.Sprintf("unsupported content type %q; the tool must answer application/json or text/*", ctype))
}

// envelope is a JSON answer: exactly one of output, error and pending.
type envelope struct {
	Output  json.RawMessage `json:"output"`
	Error   json.RawMessage `json:"error"`
	Pending json.RawMessage `json:"pending"`
}

// reply is a JSON answer that keeps the protocol: one of its fields is set.
type reply struct {
	output  json.RawMessage
	err     *toolError
	pending json.RawMessage // the pending options object, unparsed
}

type toolError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// readJSON reads a JSON answer of at most the keep cap.
func (t *httpTool) readJSON(ctx context.Context, resp *http.Response, d *deferral) dispatch.Outcome {
	limit := keepCap(ctx)
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return t.failure(ctx, err, "reading the response failed")
	}
	if int64(len(data)) > limit {
		return dispatch.Fail(CodeOutputTooLarge, fmt.Sprintf("the tool's JSON output exceeds %d bytes", limit))
	}
	r, msg := decodeEnvelope(data)
	switch {
	case msg != "":
		return dispatch.Fail(CodeInvalidToolResponse, msg)
	case r.pending != nil:
		return t.pendingAnswer(resp.StatusCode, r.pending, d)
	case r.err != nil:
		return dispatch.Fail(r.err.Code, r.err.Message)
	}
	return dispatch.OK(r.output, true)
}

// decodeEnvelope checks a JSON answer: its output, the tool's error or its
// pending options, or (msg) why it breaks the protocol.
func decodeEnvelope(data []byte) (r reply, msg string) {
	var env envelope
	if err := json.Unmarshal(data, &env); err != nil {
		return reply{}, "the tool's response is not a JSON object: " + err.Error()
	}
	switch {
	case env.Pending != nil && (env.Output != nil || env.Error != nil):
		return reply{}, `the tool's response has "pending" together with "output" or "error"`
	case env.Pending != nil:
		return reply{pending: env.Pending}, ""
	case env.Output != nil && env.Error != nil:
		return reply{}, `the tool's response has both "output" and "error"`
	case env.Output != nil:
		return reply{output: env.Output}, ""
	case env.Error != nil:
		var e toolError
		if err := json.Unmarshal(env.Error, &e); err != nil {
			return reply{}, `the tool's "error" is not {"code": string, "message": string}`
		}
		if e.Code == "" {
			e.Code = CodeToolError
		}
		return reply{err: &e}, ""
	}
	return reply{}, `the tool's response has neither "output" nor "error"`
}

// readText streams a text answer. With a projector in ctx the body goes
// through the projector's stream as it arrives, and only the first keep
// cap bytes are held; without one, the body is read whole up to the cap.
func (t *httpTool) readText(ctx context.Context, resp *http.Response, ctype string) dispatch.Outcome {
	p, keep, ok := ProjectorFrom(ctx)
	if keep <= 0 {
		keep = DefaultKeepCap
	}
	if !ok {
		data, err := io.ReadAll(io.LimitReader(resp.Body, keep+1))
		if err != nil {
			return t.failure(ctx, err, "reading the response failed")
		}
		if int64(len(data)) > keep {
			return dispatch.Fail(CodeOutputTooLarge, fmt.Sprintf("the tool's text output exceeds %d bytes", keep))
		}
		return dispatch.OK(data, false)
	}

	if pp, err := p.With(t.projection); err == nil {
		p = pp // the tool's own window and patterns
	}
	stream := p.NewStream()
	var full bytes.Buffer
	if n := resp.ContentLength; n > 0 {
		full.Grow(int(min(n, keep)))
	}
	total, err := pump(resp.Body, stream, &full, keep)
	if err != nil {
		var we *writeError
		if errors.As(err, &we) {
			return dispatch.Fail(CodeInvalidToolResponse, "projecting the output failed: "+we.err.Error())
		}
		return t.failure(ctx, err, "reading the response failed")
	}
	out := dispatch.OK(nil, false)
	out.Detail = &Projected{
		Result:      stream.Result(),
		Full:        full.Bytes(),
		Complete:    total <= keep,
		ContentType: ctype,
		Stream:      stream,
	}
	return out
}

// writeError marks a failure of the projector's stream (not of the body).
type writeError struct{ err error }

func (e *writeError) Error() string { return e.err.Error() }

// pump copies r into w entirely and into full up to keep bytes, and
// returns the bytes read. The spool stops growing at the cap while w keeps
// seeing everything, so the projector's counts stay exact.
func pump(r io.Reader, w io.Writer, full *bytes.Buffer, keep int64) (int64, error) {
	buf := make([]byte, 32<<10)
	var total int64
	for {
		n, rerr := r.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			if room := keep - int64(full.Len()); room > 0 {
				full.Write(chunk[:min(int64(n), room)])
			}
			if _, err := w.Write(chunk); err != nil {
				return total, &writeError{err}
			}
			total += int64(n)
		}
		switch {
		case rerr == io.EOF:
			return total, nil
		case rerr != nil:
			return total, rerr
		}
	}
}

// rejected is the outcome of a 4xx other than 408 and 429: not retryable.
// A JSON {"error": ...} body speaks for itself; otherwise the status and
// the start of a text body tell the model what went wrong.
func (t *httpTool) rejected(ctx context.Context, resp *http.Response, status string) dispatch.Outcome {
	data, err := io.ReadAll(io.LimitReader(resp.Body, errorBodyLimit))
	if err != nil && ctx.Err() != nil {
		return t.failure(ctx, err, "reading the response failed")
	}
	drain(resp.Body)
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	msg := "the tool rejected the call: " + status
	switch {
	case mt == "application/json" || strings.HasSuffix(mt, "+json"):
		if r, bad := decodeEnvelope(data); bad == "" && r.err != nil {
			return dispatch.Fail(r.err.Code, r.err.Message)
		}
	case strings.HasPrefix(mt, "text/"):
		if s := snippet(data, 300); s != "" {
			msg += ": " + s
		}
	}
	return dispatch.Fail(CodeToolRejected, msg)
}

// failure classifies an error of the request or of reading its response.
func (t *httpTool) failure(ctx context.Context, err error, doing string) dispatch.Outcome {
	if ctx.Err() != nil {
		// The wave, not the tool, ended the call.
		return dispatch.Cancelled("the call was cancelled while waiting for the tool: " + context.Cause(ctx).Error())
	}
	if errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
		return timedOut(fmt.Sprintf("the tool did not answer within %s", t.timeout))
	}
	// A *url.Error repeats the URL, which may carry a secret: keep its cause.
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return dispatch.FailRetryable(CodeToolUnavailable, doing+": "+err.Error(), 0)
}

func isTimeout(err error) bool {
	var te interface{ Timeout() bool }
	return errors.As(err, &te) && te.Timeout()
}

// maxRetryAfter bounds a Retry-After header before dispatch applies its own
// cap; it only keeps absurd values from overflowing a Duration.
const maxRetryAfter = 24 * time.Hour

// parseRetryAfter reads a Retry-After header: delay-seconds or an
// HTTP-date. Missing, malformed or past values give 0 (no hint).
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	switch secs, err := strconv.ParseUint(v, 10, 64); {
	case err == nil && secs <= uint64(maxRetryAfter/time.Second):
		return time.Duration(secs) * time.Second
	case err == nil, errors.Is(err, strconv.ErrRange):
		return maxRetryAfter
	}
	if at, err := http.ParseTime(v); err == nil {
		return min(max(at.Sub(now), 0), maxRetryAfter)
	}
	return 0
}

// keepCap is the byte cap for one output, from ctx or the default.
func keepCap(ctx context.Context) int64 {
	if _, c, _ := ProjectorFrom(ctx); c > 0 {
		return c
	}
	return DefaultKeepCap
}

// drain reads a little of an unwanted body so that its connection can be
// reused; the caller closes it.
func drain(body io.Reader) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, errorBodyLimit))
}

// snippet is the start of a text body on one line, valid UTF-8.
func snippet(data []byte, n int) string {
	s := strings.ToValidUTF8(string(data), "")
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}

// timedOut is the outcome of an attempt the tool (an HTTP tool or an MCP
// server) did not answer within its timeout: a retryable tool_unavailable
// marked TimedOut.
func timedOut(msg string) dispatch.Outcome {
	out := dispatch.FailRetryable(CodeToolUnavailable, msg, 0)
	out.Err.TimedOut = true
	return out
}
