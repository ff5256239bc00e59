package api_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/turnd/turnd/api"
	"github.com/turnd/turnd/internal/streamfix"
	"github.com/turnd/turnd/internal/teststores"
	"github.com/turnd/turnd/metrics"
	"github.com/turnd/turnd/turn"
)

// Streamed turns over a real loopback server: the test writes the request
// body through a pipe, so it decides when each byte arrives, and a probe
// tool server logs each invocation in the same ordered log as the test's
// own writes. Timing is asserted from that order, never from sleeps.

// probe is an HTTP tool endpoint that logs each invocation: /read and
// /write answer their arguments at once; /hold answers once released.
type probe struct {
	srv       *httptest.Server
	mu        sync.Mutex
	log       []string
	invoked   chan string // each invocation's call id
	cancelled chan string // each /hold invocation cancelled by turnd
	release   chan struct{}
}

func newProbe(t *testing.T) *probe {
	p := &probe{invoked: make(chan string, 256), cancelled: make(chan string, 256), release: make(chan struct{})}
	mux := http.NewServeMux()
	handle := func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Arguments json.RawMessage `json:"arguments"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		key := r.Header.Get("Idempotency-Key")
		call := key[strings.LastIndex(key, "/")+1:]
		p.note("invoked " + call)
		p.invoked <- call
		if r.URL.Path == "/hold" {
			select {
			case <-p.release:
			case <-r.Context().Done():
				p.note("cancelled " + call)
				p.cancelled <- call
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"output": {"got": %s}}`, nonNull(req.Arguments))
	}
	mux.HandleFunc("POST /read", handle)
	mux.HandleFunc("POST /write", handle)
	mux.HandleFunc("POST /hold", handle)
	p.srv = httptest.NewServer(mux)
	t.Cleanup(p.srv.Close)
	return p
}

func nonNull(b json.RawMessage) string {
	if len(b) == 0 {
		return "null"
	}
	return string(b)
}

func (p *probe) note(s string) {
	p.mu.Lock()
	p.log = append(p.log, s)
	p.mu.Unlock()
}

func (p *probe) entries() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.log...)
}

// index is the position of entry in the log, or -1.
func (p *probe) index(entry string) int {
	for i, e := range p.entries() {
		if e == entry {
			return i
		}
	}
	return -1
}

// waitInvoked waits for the invocation of call id.
func (p *probe) waitInvoked(t *testing.T, id string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case got := <-p.invoked:
			if got == id {
				return
			}
		case <-deadline:
			t.Fatalf("call %s was not invoked; log %v", id, p.entries())
		}
	}
}

func probeYAML(p *probe) string {
	return fmt.Sprintf(`
  - name: pread
    effect: read
    input_schema: {type: object, properties: {q: {type: string}}, required: [q]}
    http: {url: "%[1]s/read", timeout: 5s}
  - name: pwrite
    effect: write
    http: {url: "%[1]s/write", timeout: 5s}
  - name: phold
    effect: read
    http: {url: "%[1]s/hold", timeout: 5s}
`, p.srv.URL)
}

// streamPost is a streamed POST in flight: write sends bytes, end closes
// the body cleanly, breakOff aborts it.
type streamPost struct {
	t    testing.TB
	pw   *io.PipeWriter
	resp chan response
}

func (s *stack) stream(path, contentType string, header ...string) *streamPost {
	s.t.Helper()
	pr, pw := io.Pipe()
	req, err := http.NewRequest("POST", s.url+path, pr)
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Authorization", "Bearer "+s.token)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	sp := &streamPost{t: s.t, pw: pw, resp: make(chan response, 1)}
	go func() {
		resp, err := s.client.Do(req)
		if err != nil {
			_ = pr.CloseWithError(err)
			sp.resp <- response{status: -1, body: []byte(err.Error())}
			return
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		_ = pr.Close()
		sp.resp <- response{status: resp.StatusCode, header: resp.Header, body: data}
	}()
	return sp
}

func (sp *streamPost) write(s string) {
	sp.t.Helper()
	if _, err := io.WriteString(sp.pw, s); err != nil {
		sp.t.Fatalf("writing the stream: %v", err)
	}
}

// writeChunked writes s in pieces of the sizes next returns.
func (sp *streamPost) writeChunked(s string, next func() int) {
	sp.t.Helper()
	for len(s) > 0 {
		n := min(max(next(), 1), len(s))
		sp.write(s[:n])
		s = s[n:]
	}
}

func (sp *streamPost) end() response {
	sp.t.Helper()
	_ = sp.pw.Close()
	return sp.wait()
}

func (sp *streamPost) breakOff() response {
	sp.t.Helper()
	_ = sp.pw.CloseWithError(io.ErrClosedPipe)
	return sp.wait()
}

func (sp *streamPost) wait() response {
	sp.t.Helper()
	select {
	case r := <-sp.resp:
		return r
	case <-time.After(30 * time.Second):
		sp.t.Fatal("no answer to the streamed post")
		return response{}
	}
}

func ndLine(v any) string {
	b, _ := json.Marshal(v)
	return string(b) + "\n"
}

func ndCall(id, name, args string) string {
	return ndLine(map[string]any{"id": id, "name": name, "arguments": json.RawMessage(args)})
}

// ledgerOf returns the session's ledger lines as "turn call kind data",
// with what differs between runs (times, seqs, output ids, keys, the
// streamed mark of turn_received, which streamedMarks counts) left out.
func ledgerOf(t *testing.T, s *stack, sid string) []string {
	t.Helper()
	lines := rawLedger(t, s, sid)
	out := make([]string, 0, len(lines))
	for _, l := range lines {
		call := ""
		if l.CallID != nil {
			call = *l.CallID
		}
		data := string(l.Data)
		if l.Kind == "turn_received" {
			data = strings.Replace(data, streamedMark, "", 1)
		}
		out = append(out, l.TurnID+" "+call+" "+l.Kind+" "+normalizeData(data, sid))
	}
	return out
}

// streamedMark ends the data of a streamed turn's turn_received line.
const streamedMark = `,"streamed":true`

// streamedMarks counts the session's turn_received lines that say their
// turn was streamed, and those that do not.
func streamedMarks(t *testing.T, s *stack, sid string) (streamed, whole int) {
	t.Helper()
	for _, l := range rawLedger(t, s, sid) {
		switch {
		case l.Kind != "turn_received":
		case strings.HasSuffix(string(l.Data), streamedMark+"}"):
			streamed++
		default:
			whole++
		}
	}
	return streamed, whole
}

type ledgerLine struct {
	TurnID string          `json:"turn_id"`
	CallID *string         `json:"call_id"`
	Kind   string          `json:"kind"`
	Data   json.RawMessage `json:"data"`
}

func rawLedger(t *testing.T, s *stack, sid string) []ledgerLine {
	t.Helper()
	r := s.do("GET", "/v1/sessions/"+sid+"/ledger?limit=1000", nil)
	if r.status != 200 {
		t.Fatalf("ledger: %d %s", r.status, r.body)
	}
	var page struct {
		Lines []ledgerLine `json:"lines"`
	}
	r.json(t, &page)
	return page.Lines
}

var volatile = regexp.MustCompile(`"(output_id|key|owner|complete_url|deadline|at|started_at|finished_at)":"[^"]*"`)

func normalizeData(d, sid string) string {
	d = volatile.ReplaceAllString(d, `"$1":"-"`)
	return strings.ReplaceAll(d, sid, "SID")
}

func TestStreamedNDJSON(t *testing.T) {
	t.Parallel()
	teststores.Each(t, func(t *testing.T, open func(testing.TB) turn.Store) {
		p := newProbe(t)
		reg := prometheus.NewRegistry()
		m, err := metrics.New(reg, metrics.Options{})
		if err != nil {
			t.Fatal(err)
		}
		s := newStack(t, open, stackOptions{yaml: probeYAML(p), observer: m})
		sp := s.stream("/v1/sessions/sess-streamed/turns", "application/x-ndjson")
		sp.write(ndLine(map[string]any{"id": "t1"}))
		sp.write(ndCall("r1", "pread", `{"q":"a"}`))
		// The read starts before the stream ends.
		p.waitInvoked(t, "r1")
		sp.write(ndCall("r2", "pread", `{"q":"b"}`))
		p.waitInvoked(t, "r2")
		sp.write(ndCall("w1", "pwrite", `{"x":1}`))
		sp.write(ndCall("r3", "pread", `{"q":"c"}`)) // after a write: not early
		p.note("end of stream")
		r := sp.end()
		if r.status != 200 {
			t.Fatalf("streamed turn: %d %s", r.status, r.body)
		}
		var tr wireTurn
		r.json(t, &tr)
		if tr.ID != "t1" || tr.Status != "completed" || summary(tr) != "r1=ok r2=ok w1=ok r3=ok" {
			t.Fatalf("turn %s %s: %s", tr.ID, tr.Status, summary(tr))
		}
		end := p.index("end of stream")
		if i := p.index("invoked r1"); i < 0 || i > end {
			t.Errorf("r1 invoked at %d, the stream ended at %d: %v", i, end, p.entries())
		}
		if i := p.index("invoked w1"); i < end {
			t.Errorf("the write w1 was invoked at %d, before the stream ended at %d: %v", i, end, p.entries())
		}
		if i := p.index("invoked r3"); i < end {
			t.Errorf("r3 (after a write) was invoked at %d, before the stream ended at %d: %v", i, end, p.entries())
		}
		if n := strings.Count(strings.Join(p.entries(), ","), "invoked r1"); n != 1 {
			t.Errorf("r1 invoked %d times: %v", n, p.entries())
		}

		// The same calls posted whole record the same ledger.
		whole := s.do("POST", "/v1/sessions/sess-whole/turns", `{"id":"t1","calls":[
			{"id":"r1","name":"pread","arguments":{"q":"a"}},
			{"id":"r2","name":"pread","arguments":{"q":"b"}},
			{"id":"w1","name":"pwrite","arguments":{"x":1}},
			{"id":"r3","name":"pread","arguments":{"q":"c"}}]}`)
		if whole.status != 200 {
			t.Fatalf("whole post: %d %s", whole.status, whole.body)
		}
		a, b := ledgerOf(t, s, "sess-streamed"), ledgerOf(t, s, "sess-whole")
		if strings.Join(a, "\n") != strings.Join(b, "\n") {
			t.Fatalf("ledgers differ:\nstreamed:\n%s\nwhole:\n%s", strings.Join(a, "\n"), strings.Join(b, "\n"))
		}
		if sm, sw := streamedMarks(t, s, "sess-streamed"); sm != 1 || sw != 0 {
			t.Errorf("the streamed turn's turn_received: %d marked streamed, %d not; want 1, 0", sm, sw)
		}
		if wm, ww := streamedMarks(t, s, "sess-whole"); wm != 0 || ww != 1 {
			t.Errorf("the whole turn's turn_received: %d marked streamed, %d not; want 0, 1", wm, ww)
		}

		// A repost of the same turn, streamed, replays: nothing starts.
		before := len(p.entries())
		sp = s.stream("/v1/sessions/sess-streamed/turns", "application/x-ndjson")
		sp.write(ndLine(map[string]any{"id": "t1"}) + ndCall("r1", "pread", `{"q":"a"}`) + ndCall("r2", "pread", `{"q":"b"}`) +
			ndCall("w1", "pwrite", `{"x":1}`) + ndCall("r3", "pread", `{"q":"c"}`))
		r = sp.end()
		if r.status != 200 || r.header.Get("Turnd-Replayed") != "true" {
			t.Fatalf("replayed stream: %d %v %s", r.status, r.header, r.body)
		}
		if got := p.entries()[before:]; len(got) != 0 {
			t.Fatalf("a replayed stream invoked tools: %v", got)
		}
		// A second turnd over the same store, whose caches know nothing of
		// the session, reads the store before starting anything: a repost
		// there replays too, and starts nothing.
		s2 := stackOn(t, s.store, stackOptions{yaml: probeYAML(p)})
		before = len(p.entries())
		sp = s2.stream("/v1/sessions/sess-streamed/turns", "application/x-ndjson")
		sp.write(ndLine(map[string]any{"id": "t1"}) + ndCall("r1", "pread", `{"q":"a"}`) + ndCall("r2", "pread", `{"q":"b"}`) +
			ndCall("w1", "pwrite", `{"x":1}`) + ndCall("r3", "pread", `{"q":"c"}`))
		r = sp.end()
		if r.status != 200 || r.header.Get("Turnd-Replayed") != "true" {
			t.Fatalf("replayed stream on another turnd: %d %v %s", r.status, r.header, r.body)
		}
		if got := p.entries()[before:]; len(got) != 0 {
			t.Fatalf("a replayed stream invoked tools on another turnd: %v", got)
		}
		// With other calls: 409.
		sp = s.stream("/v1/sessions/sess-streamed/turns", "application/x-ndjson")
		sp.write(ndLine(map[string]any{"id": "t1"}) + ndCall("r1", "pread", `{"q":"other"}`))
		if r := sp.end(); r.status != 409 || r.code(t) != "turn_conflict" {
			t.Fatalf("conflicting stream: %d %s", r.status, r.body)
		}
		// A broken one.
		sp = s.stream("/v1/sessions/sess-streamed/turns", "application/x-ndjson")
		sp.write(ndLine(map[string]any{"id": "t9"}) + "{")
		if r := sp.end(); r.status != 422 {
			t.Fatalf("broken stream: %d %s", r.status, r.body)
		}
		for series, want := range map[string]float64{
			`turnd_streamed_turns_total{format="ndjson",outcome="completed"}`:  1,
			`turnd_streamed_turns_total{format="ndjson",outcome="replayed"}`:   1,
			`turnd_streamed_turns_total{format="ndjson",outcome="incomplete"}`: 2, // the conflict and the broken one
			`turnd_early_calls_total{outcome="used"}`:                          2,
			`turnd_early_calls_total{outcome="discarded"}`:                     0,
			`turnd_early_lead_seconds_count`:                                   2,
		} {
			if got := scrapeValue(t, reg, series); got != want {
				t.Errorf("%s = %v, want %v", series, got, want)
			}
		}
	})
}

// scrapeValue is the value of one series (name{labels} as the text format
// writes it) in reg's scrape.
func scrapeValue(t *testing.T, reg *prometheus.Registry, series string) float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			var f float64
			fmt.Sscan(v, &f)
			return f
		}
	}
	return -1
}

// TestStreamedDiscarded: an early read that admission does not clear is
// discarded: its tool was not granted... it never starts, and a read whose
// call id was answered before replays instead of running.
func TestStreamedNoEarlyStart(t *testing.T) {
	t.Parallel()
	teststores.Each(t, func(t *testing.T, open func(testing.TB) turn.Store) {
		p := newProbe(t)
		s := newStack(t, open, stackOptions{yaml: probeYAML(p)})
		if r := s.do("POST", "/v1/sessions", `{"id":"g","tools":["pwrite","pread"]}`); r.status != 201 {
			t.Fatalf("session: %d %s", r.status, r.body)
		}
		if r := s.do("POST", "/v1/sessions/g/turns", `{"id":"t0","calls":[{"id":"old","name":"pread","arguments":{"q":"x"}}]}`); r.status != 200 {
			t.Fatalf("first turn: %d %s", r.status, r.body)
		}
		<-p.invoked
		before := len(p.entries())
		sp := s.stream("/v1/sessions/g/turns", "application/x-ndjson")
		sp.write(ndLine(map[string]any{"id": "t1"}))
		sp.write(ndCall("old", "pread", `{"q":"x"}`))  // answered before: replays
		sp.write(ndCall("bad", "pread", `{"nope":1}`)) // fails the schema
		sp.write(ndCall("ng", "phold", `{}`))          // not granted
		sp.write(ndCall("unk", "nosuch", `{}`))        // unknown
		sp.write(ndCall("late", "pread", `{"q":"y"}`)) // after an unknown tool: not leading
		p.note("end of stream")
		r := sp.end()
		var tr wireTurn
		r.json(t, &tr)
		want := "old=ok bad=refused(invalid_arguments) ng=refused(tool_not_granted) unk=refused(unknown_tool) late=ok"
		if r.status != 200 || summary(tr) != want {
			t.Fatalf("turn: %d %s\n got %s\nwant %s", r.status, r.body, summary(tr), want)
		}
		got := p.entries()[before:]
		if len(got) != 2 || got[0] != "end of stream" || got[1] != "invoked late" {
			t.Fatalf("invocations %v, want only late after the end", got)
		}
	})
}

func TestStreamedBroken(t *testing.T) {
	t.Parallel()
	teststores.Each(t, func(t *testing.T, open func(testing.TB) turn.Store) {
		p := newProbe(t)
		s := newStack(t, open, stackOptions{yaml: probeYAML(p), config: func(c *api.Config) {
			c.StreamIdleTimeout = 300 * time.Millisecond
			c.MaxBodyBytes = 64 << 10
		}})
		header := ndLine(map[string]any{"id": "tb"})
		hold := ndCall("h1", "phold", `{}`)
		cases := []struct {
			name string
			run  func(sp *streamPost) response
			want int
		}{
			{"malformed line", func(sp *streamPost) response {
				sp.write(header + hold)
				p.waitInvoked(t, "h1")
				sp.write("{not json\n")
				return sp.wait()
			}, 422},
			{"no header", func(sp *streamPost) response {
				sp.write(ndCall("x", "pread", `{"q":"a"}`))
				return sp.end()
			}, 422},
			{"idle", func(sp *streamPost) response {
				sp.write(header + hold)
				p.waitInvoked(t, "h1")
				return sp.wait() // nothing more: the idle timeout ends it
			}, 422},
			{"too large", func(sp *streamPost) response {
				sp.write(header + hold)
				p.waitInvoked(t, "h1")
				big := ndCall("big", "pread", `{"q":"`+strings.Repeat("x", 70<<10)+`"}`)
				_, _ = io.WriteString(sp.pw, big)
				return sp.wait()
			}, 413},
			{"too many calls", func(sp *streamPost) response {
				sp.write(header + hold)
				p.waitInvoked(t, "h1")
				for i := range 128 {
					sp.write(ndCall(fmt.Sprintf("n%d", i), "now", `{}`))
				}
				return sp.wait()
			}, 422},
			{"client gone", func(sp *streamPost) response {
				sp.write(header + hold)
				p.waitInvoked(t, "h1")
				return sp.breakOff()
			}, -1},
		}
		for _, c := range cases {
			sp := s.stream("/v1/sessions/sb/turns", "application/x-ndjson")
			r := c.run(sp)
			_ = sp.pw.Close()
			if r.status != c.want {
				t.Fatalf("%s: %d %s, want %d", c.name, r.status, r.body, c.want)
			}
			if want := map[bool]string{true: "too_many_calls", false: "stream_incomplete"}[c.name == "too many calls"]; r.status == 422 && r.code(t) != want {
				t.Fatalf("%s: code %s, want %s", c.name, r.body, want)
			}
			if strings.HasPrefix(c.name, "malformed") || c.name == "idle" || c.name == "client gone" || c.name == "too large" || c.name == "too many calls" {
				// The early read was cancelled.
				select {
				case <-p.cancelled:
				case <-time.After(10 * time.Second):
					t.Fatalf("%s: the early read was not cancelled: %v", c.name, p.entries())
				}
			}
			if r := s.do("GET", "/v1/sessions/sb/turns/tb", nil); r.status != 404 {
				t.Fatalf("%s: the broken turn is readable: %d %s", c.name, r.status, r.body)
			}
		}
		if r := s.do("GET", "/v1/sessions/sb/ledger", nil); r.status == 200 && strings.Contains(string(r.body), `"kind"`) {
			t.Fatalf("a broken stream left ledger lines: %s", r.body)
		}
		// The turn id stays free: streamed again, it runs.
		sp := s.stream("/v1/sessions/sb/turns", "application/x-ndjson")
		sp.write(header + ndCall("r", "pread", `{"q":"a"}`))
		if r := sp.end(); r.status != 200 {
			t.Fatalf("repost: %d %s", r.status, r.body)
		}
	})
}

// TestStreamedAnswers: a streamed turn is answered as a whole post is,
// Prefer: respond-async and pending=placeholder included.
func TestStreamedAnswers(t *testing.T) {
	t.Parallel()
	eachStack(t, func(t *testing.T, s *stack) {
		sp := s.stream("/v1/sessions/ans/turns", "application/x-ndjson", "Prefer", "respond-async")
		sp.write(ndLine(map[string]any{"id": "async"}) + ndCall("e", "echo", `{"x":1}`))
		r := sp.end()
		if r.status != 202 || r.header.Get("Preference-Applied") != "respond-async" || r.header.Get("Location") != "/v1/sessions/ans/turns/async" {
			t.Fatalf("respond-async: %d %v %s", r.status, r.header, r.body)
		}
		stop, drained := make(chan struct{}), make(chan struct{})
		go func() { // the deferred call's key; nobody completes it
			defer close(drained)
			for {
				select {
				case <-s.tools.keys:
				case <-stop:
					return
				}
			}
		}()
		t.Cleanup(func() { close(stop); <-drained })
		body := streamfix.Messages("msg_pending", []streamfix.Call{
			{ID: "toolu_1", Name: "echo", Arguments: `{"text":"hi"}`},
			{ID: "toolu_2", Name: "deferred", Arguments: `{"deadline":"1h"}`},
		}, "tool_use").String()
		sp = s.stream("/v1/sessions/ans/turns?format=anthropic.messages&pending=placeholder", "text/event-stream")
		sp.write(body)
		r = sp.end()
		if r.status != 200 || r.header.Get("Turnd-Placeholders") != "1" || r.header.Get("Turnd-Turn-Status") != "waiting" {
			t.Fatalf("pending=placeholder: %d %v %s", r.status, r.header, r.body)
		}
		if ids := renderedIDs(t, "anthropic.messages", r.body); strings.Join(ids, ",") != "toolu_1,toolu_2" {
			t.Fatalf("rendered %v", ids)
		}
	})
}

// TestStreamedOutlastsReadTimeout: the server's ReadTimeout does not cut a
// stream that keeps arriving; its own idle timeout governs it.
func TestStreamedOutlastsReadTimeout(t *testing.T) {
	t.Parallel()
	teststores.Each(t, func(t *testing.T, open func(testing.TB) turn.Store) {
		p := newProbe(t)
		s := newStack(t, open, stackOptions{yaml: probeYAML(p), readTimeout: 200 * time.Millisecond})
		sp := s.stream("/v1/sessions/long/turns", "application/x-ndjson")
		sp.write(ndLine(map[string]any{"id": "long"}))
		// A model's pace: a call every 60 ms, for well past the ReadTimeout.
		sp.write(ndCall("h", "phold", `{}`))
		p.waitInvoked(t, "h")
		tick := time.NewTicker(60 * time.Millisecond)
		defer tick.Stop()
		for i := range 8 {
			<-tick.C
			sp.write(ndCall(fmt.Sprintf("r%d", i), "pread", `{"q":"x"}`))
		}
		close(p.release)
		if r := sp.end(); r.status != 200 {
			t.Fatalf("a long stream: %d %s", r.status, r.body)
		}
	})
}

// TestStreamedCallLineKeys: an NDJSON call line is taken alike whether
// the call scanner reads it or encoding/json does (an escape in its id
// sends it there), other keys (a header's among them) ignored as a whole
// post's calls ignore them.
func TestStreamedCallLineKeys(t *testing.T) {
	t.Parallel()
	eachStack(t, func(t *testing.T, s *stack) {
		sp := s.stream("/v1/sessions/keys/turns", "application/x-ndjson")
		sp.write(ndLine(map[string]any{"id": "t1"}))
		sp.write(`{"id":"k1","name":"echo","arguments":{"text":"a"},"mode":"parallel"}` + "\n")
		sp.write(`{"id":"k\u0032","name":"echo","arguments":{"text":"b"},"failure_policy":"continue"}` + "\n")
		r := sp.end()
		var tr wireTurn
		r.json(t, &tr)
		if want := "k1=ok k2=ok"; r.status != 200 || summary(tr) != want {
			t.Fatalf("turn: %d %s\n got %s\nwant %s", r.status, r.body, summary(tr), want)
		}
	})
}
