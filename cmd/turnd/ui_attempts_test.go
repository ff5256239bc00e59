package main

// The timeline's attempts and streams in a real browser: a retried call's
// attempts as segments with their backoff between them, and a streamed
// turn's end marked, with the reads that started before it.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// flakyServer answers an HTTP tool's attempts in turn: the first one too
// late (past the tool's 500 ms timeout), the second 503, the third ok.
func flakyServer(t *testing.T) string {
	t.Helper()
	var attempts atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch attempts.Add(1) {
		case 1:
			select {
			case <-r.Context().Done():
			case <-time.After(2 * time.Second):
			}
			return
		case 2:
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"output": {"fine": true}}`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// retryConfig is the tools of these tests: builtins, the flaky read
// (three attempts, 150 ms apart) and the slow write of uiTools.
func retryConfig(t *testing.T, flakyURL string, ut *uiTools) string {
	return writeFile(t, t.TempDir(), "tools.yaml", `builtin: [echo, sleep]
tools:
  - name: flaky
    effect: read
    http: {url: "`+flakyURL+`", timeout: 500ms}
    retry: {max_attempts: 3, initial_interval: 150ms, multiplier: 1, jitter: 0}
  - name: save
    effect: write
    http: {url: "`+ut.url+`/write", timeout: 5s}
`)
}

// segment is an attempt bar as the page draws it.
type segment struct {
	L, R    float64
	Outcome string
	Class   string
}

// segmentsJS returns the attempt bars of call i, in attempt order.
func segmentsJS(i int) string {
	return fmt.Sprintf(`[...document.querySelectorAll('rect[data-kind="attempt"][data-call="%d"]')]
		.sort((a, b) => Number(a.dataset.attempt) - Number(b.dataset.attempt))
		.map((e) => { const r = e.getBoundingClientRect(); return {L: r.left, R: r.right, Outcome: e.dataset.outcome, Class: e.getAttribute('class')}; })`, i)
}

// checkRetried fails the test unless segs are the flaky tool's three
// attempts: in order, apart, coloured timed out, error, ok.
func checkRetried(t *testing.T, segs []segment) {
	t.Helper()
	var outcomes, classes []string
	for _, s := range segs {
		outcomes = append(outcomes, s.Outcome)
		classes = append(classes, s.Class)
	}
	if want := []string{"timed_out", "tool_unavailable", "ok"}; !slices.Equal(outcomes, want) {
		t.Fatalf("attempt segments %v, want outcomes %v", segs, want)
	}
	if want := []string{"bar st-timed_out", "bar st-error", "bar st-ok"}; !slices.Equal(classes, want) {
		t.Errorf("attempt segments coloured %v, want %v", classes, want)
	}
	for k := 1; k < len(segs); k++ {
		// 150 ms of backoff on an axis of well under two seconds and
		// about 900 px: tens of pixels.
		if gap := segs[k].L - segs[k-1].R; gap < 10 {
			t.Errorf("attempt %d starts %.1f px after attempt %d ends, want a visible gap: %+v", k+1, gap, k, segs)
		}
	}
}

// TestUIRetriedAttempts: a call whose tool timed out, then answered 503,
// then ok is drawn as three segments in order, with the backoff between
// them empty, each coloured by how its attempt ended; the call tried once
// beside it is one bar. On both stores.
func TestUIRetriedAttempts(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			br, _, p := startUI(t, b, func(ut *uiTools) string { return retryConfig(t, flakyServer(t), ut) })
			p.must(200, "POST", "/v1/sessions/retries/turns", `{"id":"retried","calls":[
				{"id":"flaky-a","name":"flaky","arguments":{}},
				{"id":"echo-b","name":"echo","arguments":{"text":"once"}}]}`)

			tb := br.tab(t)
			tb.open(p.base + "/ui/#/turn/retries/retried")
			tb.waitFor("the settled timeline", `document.querySelectorAll('rect[data-kind="attempt"]').length === 4 && !document.getElementById('live')`, 20*time.Second)
			var segs []segment
			tb.eval(segmentsJS(0), &segs)
			checkRetried(t, segs)
			var once []segment
			tb.eval(segmentsJS(1), &once)
			if len(once) != 1 || once[0].Outcome != "ok" {
				t.Errorf("the call tried once is drawn %+v, want one ok bar", once)
			}
			tb.eval(`document.querySelector('.label[data-index="0"]').click(), true`, nil)
			tb.waitFor("the attempts in the call's details", `!!document.getElementById('detail-tries') && document.getElementById('detail-tries').textContent.includes('3: ok')`, 5*time.Second)
			var detail string
			tb.eval(`document.getElementById('detail-tries').textContent`, &detail)
			if !strings.HasPrefix(detail, "1: timed_out") || strings.Count(detail, "waited") != 2 {
				t.Errorf("the call's details read %q", detail)
			}
			tb.screenshot("timeline-retries-" + b.name)
		})
	}
}

// TestUIStreamEnd: a turn posted as an NDJSON stream whose first two
// calls, reads, arrive 300 ms before the rest: the stream's end is
// marked, the reads' bars start left of it (the fast one ends there too,
// the flaky one's later attempts come after it), and the write that came
// with the stream's end starts right of it.
func TestUIStreamEnd(t *testing.T) {
	t.Parallel()
	br, _, p := startUI(t, backends[0], func(ut *uiTools) string { return retryConfig(t, flakyServer(t), ut) })

	pr, pw := io.Pipe()
	req, err := http.NewRequest("POST", p.base+"/v1/sessions/streams/turns", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-ndjson")
	answered := make(chan int, 1)
	go func() {
		resp, err := httpClient.Do(req)
		if err != nil {
			answered <- 0
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		answered <- resp.StatusCode
	}()
	line := func(v any) {
		data, _ := json.Marshal(v)
		if _, err := pw.Write(append(data, '\n')); err != nil {
			t.Fatalf("writing the stream: %v", err)
		}
	}
	line(map[string]any{"id": "streamed"})
	line(map[string]any{"id": "read-a", "name": "sleep", "arguments": map[string]any{"ms": 60}})
	line(map[string]any{"id": "flaky-b", "name": "flaky", "arguments": map[string]any{}})
	time.Sleep(300 * time.Millisecond) // the model is still writing: the subject of the test
	line(map[string]any{"id": "write-c", "name": "save", "arguments": map[string]any{"path": "notes.txt"}})
	_ = pw.Close()
	select {
	case code := <-answered:
		if code != 200 {
			t.Fatalf("the streamed turn answered %d", code)
		}
	case <-time.After(settleTimeout):
		t.Fatal("no answer to the streamed turn")
	}

	tb := br.tab(t)
	tb.open(p.base + "/ui/#/turn/streams/streamed")
	tb.waitFor("the settled timeline with its stream's end", `!!document.querySelector('line[data-kind="stream-end"]') && document.querySelectorAll('rect[data-kind="attempt"]').length === 5 && !document.getElementById('live')`, 20*time.Second)
	var end float64
	tb.eval(`document.querySelector('line[data-kind="stream-end"]').getBoundingClientRect().left`, &end)
	var read, flaky, write []segment
	tb.eval(segmentsJS(0), &read)
	tb.eval(segmentsJS(1), &flaky)
	tb.eval(segmentsJS(2), &write)
	if len(read) != 1 || len(write) != 1 {
		t.Fatalf("bars: read %+v, write %+v", read, write)
	}
	// 300 ms of stream after the reads started, on an axis of about a
	// second and 900 px: far more than 10 px.
	if read[0].L > end-10 || read[0].R > end {
		t.Errorf("the early read's bar runs from %.1f to %.1f, the stream ends at %.1f: want it to start and end before", read[0].L, read[0].R, end)
	}
	checkRetried(t, flaky)
	if flaky[0].L > end-10 || flaky[1].L < end {
		t.Errorf("the flaky read's attempts %+v, the stream ends at %.1f: want its first attempt before, its retries after", flaky, end)
	}
	if write[0].L < end-0.5 {
		t.Errorf("the write starts at %.1f, before the stream's end at %.1f", write[0].L, end)
	}
	var label string
	tb.eval(`document.querySelector('.streamendlabel').textContent`, &label)
	if label != "stream end" {
		t.Errorf("the marker is labelled %q", label)
	}
	tb.eval(`document.querySelector('.label[data-index="1"]').click(), true`, nil)
	tb.waitFor("the flaky read's attempts in its details", `!!document.getElementById('detail-tries')`, 5*time.Second)
	tb.screenshot("timeline-streamed")
}
