package api_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/turnd/turnd/turn"
)

// BenchmarkLateLedgerPage posts 50 identical late deliveries of about
// 4 MB to one cancelled key (the reproduction), then reads the
// session's ledger with limit=1000 (ledger), or the turn's whole event
// stream (events), per iteration. It reports the completion_late lines
// recorded, the line data they hold, the bytes of one ledger page or
// stream and (with -benchmem) what reading it allocates in the process
// (server and client).
func BenchmarkLateLedgerPage(b *testing.B) {
	eachBenchStack(b, func(b *testing.B, s *stack) {
		if r := s.do("POST", "/v1/sessions/s/turns", `{"id":"t","calls":[{"id":"d","name":"deferred","arguments":{"on_cancel":"ignore"}}]}`); r.status != 202 {
			b.Fatalf("post: %d %s", r.status, r.body)
		}
		key := (<-s.tools.keys)[0]
		if r := s.do("POST", "/v1/sessions/s/turns/t/cancel", nil); r.status != 200 {
			b.Fatalf("cancel: %d %s", r.status, r.body)
		}
		body := `{"output":"` + strings.Repeat("x", 4_000_000) + `"}`
		for range 50 {
			if r := s.do("POST", "/v1/complete/"+key, body); r.status != 410 {
				b.Fatalf("late post: %d %.200s", r.status, r.body)
			}
		}
		get := func(path string) []byte {
			req, err := http.NewRequest("GET", s.url+path, nil)
			if err != nil {
				b.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+s.token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil || resp.StatusCode != 200 {
				b.Fatalf("%s: %d %v", path, resp.StatusCode, err)
			}
			return body
		}
		b.Run("ledger", func(b *testing.B) {
			var page wireLedger
			first := get("/v1/sessions/s/ledger?limit=1000")
			if err := json.Unmarshal(first, &page); err != nil {
				b.Fatal(err)
			}
			late, data := 0, 0
			for _, l := range page.Lines {
				data += len(l.Data)
				if l.Kind == string(turn.LineCompletionLate) {
					late++
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				get("/v1/sessions/s/ledger?limit=1000")
			}
			b.ReportMetric(float64(late), "late_lines")
			b.ReportMetric(float64(data), "page_data_bytes")
			b.ReportMetric(float64(len(first)), "page_bytes")
		})
		// The settled turn's whole event stream.
		b.Run("events", func(b *testing.B) {
			stream := get("/v1/sessions/s/turns/t/events")
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				get("/v1/sessions/s/turns/t/events")
			}
			b.ReportMetric(float64(len(stream)), "stream_bytes")
		})
	})
}
