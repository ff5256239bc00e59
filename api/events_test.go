package api_test

import (
	"bufio"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

type sseEvent struct {
	id   int64
	kind string
	data string
}

// readEvents reads a Server-Sent Events stream until it closes, sending
// each event to out.
func readEvents(t *testing.T, s *stack, path, lastID string, out chan<- sseEvent) {
	t.Helper()
	req, err := http.NewRequest("GET", s.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		close(out)
		return
	}
	go func() {
		defer resp.Body.Close()
		defer close(out)
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			t.Errorf("events: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
			return
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.kind != "" {
					out <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "id: "):
				ev.id, _ = strconv.ParseInt(line[4:], 10, 64)
			case strings.HasPrefix(line, "event: "):
				ev.kind = line[7:]
			case strings.HasPrefix(line, "data: "):
				ev.data = line[6:]
			}
		}
	}()
}

func TestTurnEvents(t *testing.T) {
	t.Parallel()
	eachStack(t, func(t *testing.T, s *stack) {
		r := s.do("POST", "/v1/sessions/s/turns", `{"id":"t","calls":[{"id":"a","name":"echo"},{"id":"d","name":"deferred"}]}`)
		if r.status != 202 {
			t.Fatalf("post: %d %s", r.status, r.body)
		}
		key := (<-s.tools.keys)[0]
		events := make(chan sseEvent, 64)
		readEvents(t, s, "/v1/sessions/s/turns/t/events", "", events)
		var kinds []string
		var pendingSeq int64
		for ev := range events {
			kinds = append(kinds, ev.kind)
			if !strings.Contains(ev.data, `"seq":`+strconv.FormatInt(ev.id, 10)) {
				t.Fatalf("event id %d does not match its data %s", ev.id, ev.data)
			}
			if ev.kind == "call_pending" {
				pendingSeq = ev.id
				if d := s.do("POST", "/v1/complete/"+key, `{"output":"done"}`); d.status != 200 {
					t.Fatalf("deliver: %d %s", d.status, d.body)
				}
			}
		}
		want := "turn_received call_admitted call_answered call_admitted attempt_started call_pending call_answered turn_settled"
		if strings.Join(kinds, " ") != want {
			t.Fatalf("events\n got %s\nwant %s", strings.Join(kinds, " "), want)
		}
		// Resuming after the call_pending line gives only what followed.
		resumed := make(chan sseEvent, 8)
		readEvents(t, s, "/v1/sessions/s/turns/t/events", strconv.FormatInt(pendingSeq, 10), resumed)
		kinds = nil
		for ev := range resumed {
			kinds = append(kinds, ev.kind)
		}
		if strings.Join(kinds, " ") != "call_answered turn_settled" {
			t.Fatalf("resumed: %v", kinds)
		}
		// Through the contract checker: a settled turn's stream is documented.
		if r := s.do("GET", "/v1/sessions/s/turns/t/events", nil); r.status != 200 {
			t.Fatalf("contract: %d", r.status)
		}
		if r := s.do("GET", "/v1/sessions/s/turns/nope/events", nil); r.status != 404 {
			t.Fatalf("unknown turn: %d", r.status)
		}
	})
}
