package loadtest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Client posts JSON requests to one plain-HTTP server over HTTP/1.1
// keep-alive connections of its own: one request at a time per connection,
// idle connections kept for the next request. It is what the load tools
// drive turnd with instead of net/http's client, whose transport hands
// every request and response between goroutines: on a machine whose cores
// the load generator shares with the server and the database, the client's
// CPU is taken from what it measures, so it is kept small (as wrk's or
// pgbench's is). It reads answers with a Content-Length, chunked, or
// ending with the connection. Safe for concurrent use.
type Client struct {
	addr    string // host:port dialled
	prefix  string // the base URL's path, prepended to every request's
	header  []byte // the header lines every request carries
	timeout time.Duration
	limit   int64
	dialer  net.Dialer

	mu     sync.Mutex
	idle   []*clientConn
	closed bool
}

type clientConn struct {
	c   net.Conn
	r   *bufio.Reader
	buf []byte // the request being written
}

// ClientOptions configure NewClient.
type ClientOptions struct {
	// Header is sent with every request (Content-Type: application/json is
	// always sent, unless ContentType names another).
	Header http.Header
	// ContentType is the requests' Content-Type. Default application/json.
	ContentType string
	// Timeout bounds one request from writing it to reading the whole
	// answer, within the context's deadline. Default: 1 minute.
	Timeout time.Duration
	// MaxBody is the largest answer body read; a larger one is an error.
	// Default: 4 MiB.
	MaxBody int64
}

// NewClient returns a client for the server at baseURL, an http:// URL
// (https is not spoken: use net/http for it).
func NewClient(baseURL string, o ClientOptions) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	if u.Scheme != "http" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("client: %q: want a plain http://host[:port][/path] URL", baseURL)
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "80")
	}
	var h bytes.Buffer
	ct := o.ContentType
	if ct == "" {
		ct = "application/json"
	}
	if !validHeader(ct) {
		return nil, fmt.Errorf("client: content type %q: not a valid header line", ct)
	}
	fmt.Fprintf(&h, "Host: %s\r\nContent-Type: %s\r\n", u.Host, ct)
	for k, vs := range o.Header {
		for _, v := range vs {
			if !validHeader(k) || !validHeader(v) {
				return nil, fmt.Errorf("client: header %q: not a valid header line", k)
			}
			fmt.Fprintf(&h, "%s: %s\r\n", http.CanonicalHeaderKey(k), v)
		}
	}
	c := &Client{addr: addr, prefix: u.EscapedPath(), header: h.Bytes(),
		timeout: o.Timeout, limit: o.MaxBody,
		dialer: net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}}
	if c.timeout <= 0 {
		c.timeout = time.Minute
	}
	if c.limit <= 0 {
		c.limit = 4 << 20
	}
	if len(c.prefix) > 0 && c.prefix[len(c.prefix)-1] == '/' {
		c.prefix = c.prefix[:len(c.prefix)-1]
	}
	return c, nil
}

func validHeader(s string) bool {
	for i := range len(s) {
		if s[i] == '\r' || s[i] == '\n' {
			return false
		}
	}
	return s != ""
}

// Post sends body to path (below the base URL's path, with its query if
// any) with the extra header lines given as name, value pairs, and appends
// the answer's body to dst. A request on a kept connection that is reset
// before any byte of an answer comes back (the server closed the connection
// while it was idle) is sent again, once, on a newly dialled connection.
// net/http's transport would not send a POST again; this client does
// because what it posts is turns, which turnd answers from its record when
// one comes twice: post nothing through it that is unsafe to repeat.
func (c *Client) Post(ctx context.Context, path string, body, dst []byte, header ...string) (status int, answer []byte, err error) {
	if len(header)%2 != 0 {
		return 0, dst, errors.New("client: header: want name, value pairs")
	}
	for _, h := range header {
		if !validHeader(h) {
			return 0, dst, fmt.Errorf("client: header %q: not a valid header line", h)
		}
	}
	for attempt := 0; ; attempt++ {
		cc, reused, err := c.conn(ctx, attempt > 0)
		if err != nil {
			return 0, dst, fmt.Errorf("posting %s: %w", path, err)
		}
		status, answer, keep, answered, err := c.roundTrip(ctx, cc, path, body, dst, header)
		if err == nil && keep && cc.r.Buffered() == 0 {
			c.put(cc)
		} else {
			// Broken, closing, or holding bytes past its answer that
			// the next request would read as its own.
			_ = cc.c.Close()
		}
		if err != nil && reused && !answered && attempt == 0 && isReset(err) && ctx.Err() == nil {
			continue // a kept connection the server closed: once more, on a new one
		}
		if err != nil {
			err = fmt.Errorf("posting %s: %w", path, err)
		}
		return status, answer, err
	}
}

// roundTrip writes the request on cc and reads its answer. answered says
// whether any byte of an answer came back.
func (c *Client) roundTrip(ctx context.Context, cc *clientConn, path string, body, dst []byte, header []string) (status int, answer []byte, keep, answered bool, err error) {
	deadline := time.Now().Add(c.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := cc.c.SetDeadline(deadline); err != nil {
		return 0, dst, false, false, err
	}
	// A cancelled context ends the request at once: the deadline moves to
	// the past and the connection is not kept.
	stop := context.AfterFunc(ctx, func() { _ = cc.c.SetDeadline(time.Unix(1, 0)) })
	defer func() {
		if !stop() {
			// The deadline may have moved after the answer was read: the
			// answer stands, the connection goes.
			keep = false
			if err != nil {
				err = context.Cause(ctx)
			}
		}
	}()

	b := append(cc.buf[:0], "POST "...)
	b = append(b, c.prefix...)
	b = append(b, path...)
	b = append(b, " HTTP/1.1\r\n"...)
	b = append(b, c.header...)
	for i := 0; i < len(header); i += 2 {
		b = append(b, header[i]...)
		b = append(b, ": "...)
		b = append(b, header[i+1]...)
		b = append(b, "\r\n"...)
	}
	b = append(b, "Content-Length: "...)
	b = strconv.AppendInt(b, int64(len(body)), 10)
	b = append(b, "\r\n\r\n"...)
	b = append(b, body...)
	cc.buf = b
	if _, werr := cc.c.Write(b); werr != nil {
		// The server may have answered before reading the whole request
		// (413 for a body over its limit) and closed the connection: that
		// answer, when it came, is the outcome.
		if status, answer, _, err := c.readAnswer(cc.r, dst); err == nil {
			return status, answer, false, true, nil
		}
		return 0, dst, false, false, werr
	}
	if _, err := cc.r.Peek(1); err != nil {
		return 0, dst, false, false, err
	}
	status, answer, keep, err = c.readAnswer(cc.r, dst)
	if err != nil {
		return status, answer, false, true, fmt.Errorf("reading the answer: %w", err)
	}
	return status, answer, keep, true, nil
}

// readAnswer reads one HTTP/1.1 response from r and appends its body to
// dst: the status line, the header fields it needs (Content-Length,
// Transfer-Encoding: chunked, Connection: close), then a body of that
// length, or chunked, or (neither) up to the end of the connection. keep
// says the connection may carry the next request.
func (c *Client) readAnswer(r *bufio.Reader, dst []byte) (status int, answer []byte, keep bool, err error) {
	base := len(dst) // the body starts here
	line, err := readLine(r)
	if err != nil {
		return 0, dst, false, err
	}
	proto, rest, _ := bytes.Cut(line, []byte(" "))
	code, _, _ := bytes.Cut(rest, []byte(" "))
	if !bytes.HasPrefix(proto, []byte("HTTP/1.")) || len(code) != 3 {
		return 0, dst, false, fmt.Errorf("malformed status line %q", line)
	}
	if status, err = strconv.Atoi(string(code)); err != nil || status < 100 {
		return 0, dst, false, fmt.Errorf("malformed status line %q", line)
	}
	length, chunked := int64(-1), false
	keep = string(proto) == "HTTP/1.1"
	for {
		line, err := readLine(r)
		if err != nil {
			return status, dst, false, err
		}
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return status, dst, false, fmt.Errorf("malformed header line %q", line)
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.ParseInt(string(value), 10, 64); err != nil || length < 0 {
				return status, dst, false, fmt.Errorf("malformed Content-Length %q", value)
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			if !bytes.EqualFold(value, []byte("chunked")) {
				return status, dst, false, fmt.Errorf("unsupported Transfer-Encoding %q", value)
			}
			chunked = true
		case bytes.EqualFold(name, []byte("Connection")):
			if bytes.EqualFold(value, []byte("close")) {
				keep = false
			}
		}
	}
	if status < 200 || status == http.StatusNoContent || status == http.StatusNotModified {
		if status < 200 {
			return status, dst, false, fmt.Errorf("unexpected interim answer %d", status)
		}
		return status, dst, keep, nil
	}
	switch {
	case chunked:
		for {
			line, err := readLine(r)
			if err != nil {
				return status, dst, false, err
			}
			size, _, _ := bytes.Cut(line, []byte(";"))
			n, err := strconv.ParseInt(string(bytes.TrimSpace(size)), 16, 64)
			if err != nil || n < 0 {
				return status, dst, false, fmt.Errorf("malformed chunk size %q", line)
			}
			if n == 0 {
				for { // trailer fields, up to the blank line
					line, err := readLine(r)
					if err != nil {
						return status, dst, false, err
					}
					if len(line) == 0 {
						return status, dst, keep, nil
					}
				}
			}
			if dst, err = c.readBody(r, dst, base, n); err != nil {
				return status, dst, false, err
			}
			if line, err := readLine(r); err != nil || len(line) != 0 {
				return status, dst, false, fmt.Errorf("malformed chunk end: %v", err)
			}
		}
	case length >= 0:
		dst, err = c.readBody(r, dst, base, length)
		return status, dst, keep && err == nil, err
	default:
		dst, err = c.readBody(r, dst, base, -1)
		return status, dst, false, err
	}
}

// readBody appends n bytes of r to dst (n < 0: up to the end), within the
// client's limit on the body, which starts at dst[base].
func (c *Client) readBody(r *bufio.Reader, dst []byte, base int, n int64) ([]byte, error) {
	room := c.limit - int64(len(dst)-base)
	if n < 0 {
		buf := bytes.NewBuffer(dst)
		m, err := buf.ReadFrom(io.LimitReader(r, room+1))
		if err == nil && m > room {
			err = fmt.Errorf("the answer exceeds %d bytes", c.limit)
		}
		return buf.Bytes(), err
	}
	if n > room {
		return dst, fmt.Errorf("the answer exceeds %d bytes", c.limit)
	}
	start := len(dst)
	dst = append(dst, make([]byte, n)...)
	_, err := io.ReadFull(r, dst[start:])
	return dst, err
}

// readLine returns the next line of r without its CRLF (or LF); the slice
// is valid until r is read again.
func readLine(r *bufio.Reader) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, errors.New("a header line is too long")
		}
		return nil, err
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, nil
}

// conn returns an idle connection (unless fresh), or a new one.
func (c *Client) conn(ctx context.Context, fresh bool) (cc *clientConn, reused bool, err error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, false, errors.New("client: closed")
	}
	if n := len(c.idle); n > 0 && !fresh {
		cc = c.idle[n-1]
		c.idle = c.idle[:n-1]
		c.mu.Unlock()
		return cc, true, nil
	}
	c.mu.Unlock()
	conn, err := c.dialer.DialContext(ctx, "tcp", c.addr)
	if err != nil {
		return nil, false, err
	}
	return &clientConn{c: conn, r: bufio.NewReaderSize(conn, 16<<10)}, false, nil
}

func (c *Client) put(cc *clientConn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		_ = cc.c.Close()
		return
	}
	c.idle = append(c.idle, cc)
}

// Close closes the idle connections; requests in flight close theirs when
// they end. Posting after Close is an error.
func (c *Client) Close() {
	c.mu.Lock()
	idle := c.idle
	c.idle, c.closed = nil, true
	c.mu.Unlock()
	for _, cc := range idle {
		_ = cc.c.Close()
	}
}

// isReset reports a connection the peer closed or reset.
func isReset(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
