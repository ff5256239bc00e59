package chaos

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"time"
)

// The tools the ToolServer serves, by turnd tool name. Every tool is at
// /tool/NAME; ToolConfig lists them for turnd.
const (
	ToolRead  = "read"  // effect read: answers {"output":{"key","n","tool"}} after arguments.ms
	ToolWrite = "write" // effect write, not idempotent: the same, counted per Idempotency-Key
	ToolDefer = "defer" // deferred: answers 202 {"pending": arguments.pending}

	PoisonUTF8   = "poison_utf8"   // an output string with invalid UTF-8
	PoisonNUL    = "poison_nul"    // an output string with \u0000
	PoisonError  = "poison_error"  // an error whose code and message hold invalid UTF-8 and \u0000
	PoisonHuge   = "poison_huge"   // a text/plain body of HugeBytes
	PoisonHang   = "poison_hang"   // never answers (its timeout is 1s)
	PoisonCut    = "poison_cut"    // closes the connection in the middle of the body
	PoisonBadKey = "poison_badkey" // an output object with a key of invalid UTF-8
)

// PoisonTools lists the poison tools; each is a write tool that turnd
// does not retry, so a second execution is a recovery re-running it.
var PoisonTools = []string{PoisonUTF8, PoisonNUL, PoisonError, PoisonHuge, PoisonHang, PoisonCut, PoisonBadKey}

// HugeBytes is the size of PoisonHuge's body: 1 GiB.
const HugeBytes = 1 << 30

// Parked is a call the deferred tool parked: what its key is and where to
// deliver it.
type Parked struct {
	SessionID, TurnID, CallID string
	Key, URL                  string
}

// ToolServer is the HTTP tools' endpoint, on loopback in the test
// process. It counts the executions of every call by its Idempotency-Key
// ({session}/{turn}/{call}).
type ToolServer struct {
	URL    string
	srv    *httptest.Server
	parked chan Parked
	quit   chan struct{}

	mu    sync.Mutex
	runs  map[string]int    // Idempotency-Key → executions
	tools map[string]string // Idempotency-Key → tool name
	huge  int64             // bytes of PoisonHuge bodies written
}

// NewToolServer starts a tool server; Close stops it.
func NewToolServer() *ToolServer {
	ts := &ToolServer{
		parked: make(chan Parked, 1<<16),
		quit:   make(chan struct{}),
		runs:   map[string]int{},
		tools:  map[string]string{},
	}
	ts.srv = httptest.NewServer(http.HandlerFunc(ts.serve))
	ts.URL = ts.srv.URL
	return ts
}

// Close releases held calls and stops the server.
func (ts *ToolServer) Close() {
	close(ts.quit)
	ts.srv.CloseClientConnections()
	ts.srv.Close()
}

// Parked returns the channel of parked calls, in the order they reached
// the deferred tool (reported before turnd reads the 202: a delivery may
// beat the park).
func (ts *ToolServer) Parked() <-chan Parked { return ts.parked }

// Config returns a tool config (YAML) naming every tool of the server,
// with builtin tools too.
func (ts *ToolServer) Config() string {
	var b strings.Builder
	b.WriteString("builtin: [echo, sleep, now]\ntools:\n")
	tool := func(name, effect, timeout, extra string) {
		fmt.Fprintf(&b, "  - name: %s\n    effect: %s\n    idempotent: false\n    http: {url: %s/tool/%s, timeout: %s}\n    retry: {max_attempts: 1}\n%s",
			name, effect, ts.URL, name, timeout, extra)
	}
	tool(ToolRead, "read", "30s", "")
	tool(ToolWrite, "write", "30s", "")
	tool(ToolDefer, "read", "30s", "    deferred: true\n")
	for _, name := range PoisonTools {
		timeout := "30s"
		switch name {
		case PoisonHang:
			timeout = "1s"
		case PoisonHuge:
			timeout = "120s"
		}
		tool(name, "write", timeout, "")
	}
	return b.String()
}

// Executions returns how many times the call with this Idempotency-Key ran.
func (ts *ToolServer) Executions(key string) int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.runs[key]
}

// Twice returns the keys of write and poison calls that ran more than
// once, sorted, and how many write and poison calls ran at all.
func (ts *ToolServer) Twice() (twice []string, writes int) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for key, n := range ts.runs {
		if ts.tools[key] == ToolRead || ts.tools[key] == ToolDefer {
			continue
		}
		writes++
		if n > 1 {
			twice = append(twice, fmt.Sprintf("%s (%s, %d times)", key, ts.tools[key], n))
		}
	}
	sort.Strings(twice)
	return twice, writes
}

// Totals returns how many executions each tool had.
func (ts *ToolServer) Totals() map[string]int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	m := map[string]int{}
	for key, n := range ts.runs {
		m[ts.tools[key]] += n
	}
	return m
}

// HugeWritten returns how many bytes of PoisonHuge bodies turnd read.
func (ts *ToolServer) HugeWritten() int64 {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.huge
}

type toolRequest struct {
	SessionID string `json:"session_id"`
	TurnID    string `json:"turn_id"`
	CallID    string `json:"call_id"`
	Arguments struct {
		MS      int             `json:"ms"`
		Pending json.RawMessage `json:"pending"`
	} `json:"arguments"`
	Completion *struct {
		Key string `json:"key"`
		URL string `json:"url"`
	} `json:"completion"`
}

func (ts *ToolServer) serve(w http.ResponseWriter, r *http.Request) {
	name, ok := strings.CutPrefix(r.URL.Path, "/tool/")
	if !ok {
		http.NotFound(w, r)
		return
	}
	var req toolRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		key = req.SessionID + "/" + req.TurnID + "/" + req.CallID
	}
	ts.mu.Lock()
	ts.runs[key]++
	n := ts.runs[key]
	ts.tools[key] = name
	ts.mu.Unlock()

	if req.Arguments.MS > 0 {
		select {
		case <-time.After(time.Duration(req.Arguments.MS) * time.Millisecond):
		case <-r.Context().Done():
			return
		case <-ts.quit:
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	switch name {
	case ToolRead, ToolWrite:
		out, _ := json.Marshal(map[string]any{"output": map[string]any{"key": key, "n": n, "tool": name}})
		w.Write(out)
	case ToolDefer:
		if req.Completion == nil {
			http.Error(w, "a deferred call without a completion", http.StatusBadRequest)
			return
		}
		pending := req.Arguments.Pending
		if len(pending) == 0 {
			pending = json.RawMessage(`{}`)
		}
		select {
		case ts.parked <- Parked{req.SessionID, req.TurnID, req.CallID, req.Completion.Key, req.Completion.URL}:
		default: // nobody reads them: the experiment does not deliver
		}
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprintf(w, `{"pending": %s}`, pending)
	case PoisonUTF8:
		w.Write([]byte("{\"output\":{\"s\":\"bad \xff\xfe bytes\",\"n\":1}}"))
	case PoisonNUL:
		w.Write([]byte(`{"output":{"s":"nul \u0000 here","t":"\u0000"}}`))
	case PoisonError:
		w.Write([]byte("{\"error\":{\"code\":\"bad\xffcode\",\"message\":\"nul \\u0000 and \xc3\"}}"))
	case PoisonBadKey:
		w.Write([]byte("{\"output\":{\"k\xff\":1,\"\\u0000\":2}}"))
	case PoisonHuge:
		ts.writeHuge(w)
	case PoisonHang:
		select {
		case <-r.Context().Done():
		case <-ts.quit:
		}
	case PoisonCut:
		ts.cut(w)
	default:
		http.NotFound(w, r)
	}
}

// writeHuge streams HugeBytes of text until turnd stops reading.
func (ts *ToolServer) writeHuge(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	chunk := []byte(strings.Repeat("0123456789abcdef", 4096)) // 64 KiB
	for sent := 0; sent < HugeBytes; sent += len(chunk) {
		if _, err := w.Write(chunk); err != nil {
			return
		}
		ts.mu.Lock()
		ts.huge += int64(len(chunk))
		ts.mu.Unlock()
	}
}

// cut promises a body it does not send: the headers and a part of the
// JSON, then the connection closes.
func (ts *ToolServer) cut(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "cannot hijack", http.StatusInternalServerError)
		return
	}
	conn, buf, err := hj.Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"output\":{\"s\":\"the body stops he")
	buf.Flush()
}
