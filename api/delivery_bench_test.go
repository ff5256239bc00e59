package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
)

// BenchmarkDeliveryAnswered is the completion workload of `turnd bench
// --completions` in one process, one delivery at a time: b.N turns, each
// of one deferred call, are posted with Prefer: wait and held (not timed);
// an op is then one POST /v1/complete/{key}, whose waiter is answered with
// the settled turn. With -benchmem it reports what an op allocates in the
// process, the client's side (a plain net/http client) included; a
// -memprofile focused on the server's frames (api.(*server), turn, store)
// tells the server's part.
func BenchmarkDeliveryAnswered(b *testing.B) {
	eachBenchStack(b, func(b *testing.B, s *stack) {
		// A plain client: the stack's own checks every answer against
		// the OpenAPI document, which would be most of what an op
		// allocates.
		tr := &http.Transport{MaxIdleConnsPerHost: 8}
		b.Cleanup(tr.CloseIdleConnections)
		s.client = &http.Client{Transport: tr}
		keys := make([]string, b.N)
		var (
			wg  sync.WaitGroup
			mu  sync.Mutex
			bad []string
		)
		for i := range b.N {
			wg.Go(func() {
				r := s.do("POST", fmt.Sprintf("/v1/sessions/d%d/turns", i),
					`{"id":"t","calls":[{"id":"c","name":"deferred","arguments":{}}]}`, "Prefer", "wait=60")
				var t wireTurn
				if r.status != 200 || json.Unmarshal(r.body, &t) != nil || t.Status != "completed" {
					mu.Lock()
					bad = append(bad, fmt.Sprintf("turn d%d: %d %.300s", i, r.status, r.body))
					mu.Unlock()
				}
			})
			keys[i] = (<-s.tools.keys)[0]
		}
		b.ReportAllocs()
		b.ResetTimer()
		for _, k := range keys {
			if r := s.do("POST", "/v1/complete/"+k, `{"output":{"n":1}}`); r.status != 200 {
				b.Fatalf("delivery: %d %s", r.status, r.body)
			}
		}
		wg.Wait()
		b.StopTimer()
		if len(bad) > 0 {
			b.Fatalf("%d waiters were not answered the completed turn; first: %s", len(bad), bad[0])
		}
	})
}
