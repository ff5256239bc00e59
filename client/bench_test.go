package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/turnd/turnd/client"
)

// BenchmarkPostTurn measures the client's cost per turn against raw
// net/http doing the same (encode, POST with Content-Type, decode into the
// same Turn), one turn of one instant call at a time:
//
//   - canned: a handler answering a recorded turn, in process — the
//     client's own overhead with nothing else in the way;
//   - turnd: a real `turnd serve` on SQLite — what that overhead is worth
//     next to a turn's real cost.
func BenchmarkPostTurn(b *testing.B) {
	canned := []byte(`{"id":"t","session_id":"s","status":"completed","mode":"ordered","failure_policy":"isolate","created_at":"2025-01-02T03:04:05Z","settled_at":"2025-01-02T03:04:05Z","results":[{"call_id":"c1","name":"now","status":"ok","output":"2025-01-02T03:04:05Z","truncated":false,"original_bytes":22,"original_lines":1,"attempts":1,"started_at":"2025-01-02T03:04:05Z","finished_at":"2025-01-02T03:04:05Z"}]}`)
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(canned)
	}))
	b.Cleanup(fake.Close)
	for _, target := range []string{"canned", "turnd"} {
		b.Run(target, func(b *testing.B) {
			url := fake.URL
			if target == "turnd" {
				url = startServer(b, sqlite).URL
			}
			calls := []client.Call{{ID: "c1", Name: "now"}}
			b.Run("client", func(b *testing.B) {
				c := newClient(b, url, client.WithRetry(client.RetryPolicy{MaxAttempts: 1}))
				ctx := context.Background()
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					if _, err := c.PostTurn(ctx, "bench", client.TurnRequest{Calls: calls}, nil); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("net-http", func(b *testing.B) {
				tr := &http.Transport{}
				b.Cleanup(tr.CloseIdleConnections)
				hc := &http.Client{Transport: tr}
				b.ReportAllocs()
				for b.Loop() {
					body, err := json.Marshal(client.TurnRequest{ID: client.NewTurnID(), Calls: calls})
					if err != nil {
						b.Fatal(err)
					}
					resp, err := hc.Post(url+"/v1/sessions/bench/turns", "application/json", bytes.NewReader(body))
					if err != nil {
						b.Fatal(err)
					}
					var t client.Turn
					err = json.NewDecoder(resp.Body).Decode(&t)
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if err != nil || resp.StatusCode != http.StatusOK {
						b.Fatalf("%d %v", resp.StatusCode, err)
					}
				}
			})
		})
	}
}
