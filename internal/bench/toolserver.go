package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The names of the tools the ToolServer backs, as ToolConfig registers
// them.
const (
	ToolRead     = "bench_read"
	ToolWrite    = "bench_write"
	ToolDeferred = "bench_deferred"
	// ToolWriteKeyed is bench_write with resource "bench:{/resource}":
	// its calls on different resources run at once.
	ToolWriteKeyed = "bench_write_keyed"
)

// toolArgs are the arguments of every call to the ToolServer's tools: the
// bench draws the latency and picks the output size per call, so that the
// tool itself holds no workload settings and a turnd elsewhere can point
// at it.
type toolArgs struct {
	// LatencyUS is how long the tool works before it answers, in
	// microseconds; for a deferred call, how long after its pending
	// answer it delivers the result.
	LatencyUS int64 `json:"latency_us"`
	// Bytes is the size of the output; 0 answers a small JSON object.
	Bytes int64 `json:"bytes"`
	// Resource is what a call of bench_write_keyed writes (its resource).
	Resource string `json:"resource,omitempty"`
	// Hold, for a deferred call, delivers nothing: the call's completion
	// key goes to the bench that expects it (ToolServer.expect), which
	// delivers the result itself (the completion workload).
	Hold bool `json:"hold,omitempty"`
}

// maxOutputBytes bounds the output a call may ask the ToolServer for.
const maxOutputBytes = 64 << 20

// ToolServer is the far end of the bench's HTTP tools, served on a
// loopback port:
//
//	POST /read, POST /write   sleep latency_us, then answer the output
//	POST /deferred            answer 202 {"pending": {...}} at once, then
//	                          after latency_us POST the output to the
//	                          call's completion URL; with hold, hand the
//	                          key to the bench instead (expect)
//
// An output of bytes > 0 is text/plain, lines of 64 characters, so that
// turnd projects it while it streams in; otherwise {"output": {"ok": true}}.
type ToolServer struct {
	srv    *http.Server
	ln     net.Listener
	done   chan error
	client *http.Client

	ctx    context.Context // cancelled by Close: ends deferred deliveries
	cancel context.CancelFunc
	wg     sync.WaitGroup // deferred deliveries in flight

	// onDelivery, when not nil, is called after each delivery with its
	// error (tests wait on it).
	onDelivery func(error)

	closeOnce sync.Once
	closeErr  error

	calls       atomic.Int64
	delivered   atomic.Int64
	deliverErrs atomic.Int64
	mu          sync.Mutex
	firstErr    error
	// held are the keys expected by the completion workload, by
	// "session/turn" (expect).
	held map[string]chan string
}

// StartToolServer serves the bench tools on addr (a loopback host:port;
// port 0 picks a free one).
func StartToolServer(addr string) (*ToolServer, error) { return startToolServer(addr, nil) }

func startToolServer(addr string, onDelivery func(error)) (*ToolServer, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("tool server: listening on %s: %w", addr, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ts := &ToolServer{
		ln: ln, done: make(chan error, 1), ctx: ctx, cancel: cancel, onDelivery: onDelivery,
		client: &http.Client{
			Transport: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second},
			Timeout:   time.Minute,
		},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /read", ts.serveNow)
	mux.HandleFunc("POST /write", ts.serveNow)
	mux.HandleFunc("POST /deferred", ts.serveDeferred)
	ts.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
	go func() { ts.done <- ts.srv.Serve(ln) }()
	return ts, nil
}

// URL is the server's base URL, such as http://127.0.0.1:41234.
func (ts *ToolServer) URL() string { return "http://" + ts.ln.Addr().String() }

// Stats returns how many calls the tools received, how many deferred
// results were delivered to turnd, and how many deliveries failed (with
// the first failure).
func (ts *ToolServer) Stats() (calls, delivered, failed int64, first error) {
	ts.mu.Lock()
	first = ts.firstErr
	ts.mu.Unlock()
	return ts.calls.Load(), ts.delivered.Load(), ts.deliverErrs.Load(), first
}

// Close stops the server: deliveries still waiting are abandoned, those
// in flight end, and Close returns when every goroutine it started has.
// Closing again returns the first Close's error.
func (ts *ToolServer) Close() error {
	ts.closeOnce.Do(func() {
		ts.cancel()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := ts.srv.Shutdown(sctx)
		ts.wg.Wait()
		if serr := <-ts.done; !errors.Is(serr, http.ErrServerClosed) {
			err = errors.Join(err, serr)
		}
		ts.client.CloseIdleConnections()
		ts.closeErr = err
	})
	return ts.closeErr
}

// toolRequest is what turnd POSTs to an HTTP tool (see package tool).
type toolRequest struct {
	SessionID  string   `json:"session_id"`
	TurnID     string   `json:"turn_id"`
	Arguments  toolArgs `json:"arguments"`
	Completion *struct {
		Key string `json:"key"`
		URL string `json:"url"`
	} `json:"completion"`
}

// expect returns a channel that receives the completion key of the held
// call of turn sessionID/turnID (one call a turn), and a function that
// forgets the turn (call it once the key arrived, or the turn gave up).
func (ts *ToolServer) expect(sessionID, turnID string) (<-chan string, func()) {
	id := sessionID + "/" + turnID
	ch := make(chan string, 1)
	ts.mu.Lock()
	if ts.held == nil {
		ts.held = map[string]chan string{}
	}
	ts.held[id] = ch
	ts.mu.Unlock()
	return ch, func() {
		ts.mu.Lock()
		if ts.held[id] == ch {
			delete(ts.held, id)
		}
		ts.mu.Unlock()
	}
}

// hand gives key to the bench expecting turn id's held call; false when
// none does. A second key for one turn (a retried attempt) replaces none:
// the first stays.
func (ts *ToolServer) hand(id, key string) bool {
	ts.mu.Lock()
	ch, ok := ts.held[id]
	ts.mu.Unlock()
	if !ok || key == "" {
		return false
	}
	select {
	case ch <- key:
	default:
	}
	return true
}

func (ts *ToolServer) decode(w http.ResponseWriter, r *http.Request) (toolRequest, bool) {
	ts.calls.Add(1)
	var req toolRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
		toolError(w, "bad_request", "the request is not the JSON turnd sends: "+err.Error())
		return req, false
	}
	a := req.Arguments
	if a.LatencyUS < 0 || a.LatencyUS > MaxLatency.Microseconds() || a.Bytes < 0 || a.Bytes > maxOutputBytes {
		toolError(w, "bad_arguments", fmt.Sprintf("latency_us must be 0…%d and bytes 0…%d", MaxLatency.Microseconds(), maxOutputBytes))
		return req, false
	}
	return req, true
}

func (ts *ToolServer) serveNow(w http.ResponseWriter, r *http.Request) {
	req, ok := ts.decode(w, r)
	if !ok {
		return
	}
	if d := time.Duration(req.Arguments.LatencyUS) * time.Microsecond; d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return // turnd gave up on the attempt (its timeout, a cancel)
		}
	}
	if n := req.Arguments.Bytes; n > 0 {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write(textOutput(n))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"output":{"ok":true}}`))
}

func (ts *ToolServer) serveDeferred(w http.ResponseWriter, r *http.Request) {
	req, ok := ts.decode(w, r)
	if !ok {
		return
	}
	if req.Completion == nil || req.Completion.URL == "" {
		toolError(w, "no_completion", "the request carries no completion URL: the tool must be configured with deferred: true")
		return
	}
	body := []byte(`{"output":{"ok":true}}`)
	if n := req.Arguments.Bytes; n > 0 {
		body, _ = json.Marshal(struct {
			Output string `json:"output"`
		}{string(textOutput(n))})
	}
	if req.Arguments.Hold {
		if !ts.hand(req.SessionID+"/"+req.TurnID, req.Completion.Key) {
			toolError(w, "not_expected", "a held call of a turn the bench does not expect")
			return
		}
	} else {
		delay := time.Duration(req.Arguments.LatencyUS) * time.Microsecond
		ts.wg.Add(1)
		go ts.deliver(req.Completion.URL, delay, body)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	_, _ = w.Write([]byte(`{"pending":{"deadline":"15m"}}`))
}

// deliver POSTs a deferred call's result after delay. The result may reach
// turnd before the call is recorded as pending; turnd keeps it until then.
func (ts *ToolServer) deliver(url string, delay time.Duration, body []byte) {
	defer ts.wg.Done()
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ts.ctx.Done():
		return
	}
	err := ts.post(url, body)
	if ts.onDelivery != nil {
		defer ts.onDelivery(err)
	}
	if err == nil {
		ts.delivered.Add(1)
		return
	}
	if errors.Is(err, context.Canceled) && ts.ctx.Err() != nil {
		return // closing: not the delivery's fault
	}
	ts.deliverErrs.Add(1)
	ts.mu.Lock()
	if ts.firstErr == nil {
		ts.firstErr = err
	}
	ts.mu.Unlock()
}

func (ts *ToolServer) post(url string, body []byte) error {
	req, err := http.NewRequestWithContext(ts.ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("delivering a completion: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := ts.client.Do(req)
	if err != nil {
		return fmt.Errorf("delivering a completion: %w", err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("delivering a completion: answer %d: %.300s", resp.StatusCode, got)
	}
	return nil
}

func toolError(w http.ResponseWriter, code, msg string) {
	b, _ := json.Marshal(map[string]any{"error": map[string]string{"code": code, "message": msg}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_, _ = w.Write(b)
}

// textOutput is n bytes of text in lines of 64 characters, newline
// included.
func textOutput(n int64) []byte {
	const line = "bench output line, padded to sixty-four characters ............\n"
	b := bytes.Repeat([]byte(line), int(n/int64(len(line)))+1)
	return b[:n]
}

// ToolConfig returns the turnd tool config (YAML) that registers the bench
// tools served at base (a ToolServer's URL) and the builtins echo and
// sleep. bench_deferred is a write, as deferred jobs (deploys, approvals)
// usually are.
func ToolConfig(base string) []byte {
	base = strings.TrimRight(base, "/")
	return fmt.Appendf(nil, `# The tools of turnd bench: a loopback HTTP tool served by the bench itself.
tools:
  - name: %[2]s
    description: A read-only bench tool; sleeps latency_us, answers bytes of output.
    effect: read
    idempotent: true
    http: {url: %[1]s/read, timeout: 11m}
  - name: %[3]s
    description: A bench tool with side effects; sleeps latency_us, answers bytes of output.
    effect: write
    idempotent: true
    http: {url: %[1]s/write, timeout: 11m}
  - name: %[4]s
    description: A deferred bench tool; parks the call and delivers its result after latency_us.
    effect: write
    idempotent: true
    deferred: true
    pending: {deadline: 15m}
    http: {url: %[1]s/deferred, timeout: 1m}
  - name: %[5]s
    description: bench_write on a resource; calls on different resources run at once.
    effect: write
    idempotent: true
    resource: "bench:{/resource}"
    input_schema:
      type: object
      required: [resource]
      properties: {resource: {type: string}, latency_us: {type: integer}, bytes: {type: integer}}
    http: {url: %[1]s/write, timeout: 11m}
builtin: [echo, sleep]
`, base, ToolRead, ToolWrite, ToolDeferred, ToolWriteKeyed)
}
