package api_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestSessionProjection: a session's window, patterns and turn_limit
// round-trip, and a turn's outputs share the turn budget.
func TestSessionProjection(t *testing.T) {
	t.Parallel()
	eachStack(t, func(t *testing.T, s *stack) {
		r := s.do("POST", "/v1/sessions", `{"id":"p","budget":{"limit":4096,"window":"errors","patterns":["FAIL","panic:"],"turn_limit":600}}`)
		if r.status != 201 {
			t.Fatalf("create session: %d %s", r.status, r.body)
		}
		var sess struct {
			Budget struct {
				Window    string   `json:"window"`
				Patterns  []string `json:"patterns"`
				TurnLimit int      `json:"turn_limit"`
			} `json:"budget"`
		}
		s.do("GET", "/v1/sessions/p", nil).json(t, &sess)
		if b := sess.Budget; b.Window != "errors" || strings.Join(b.Patterns, ",") != "FAIL,panic:" || b.TurnLimit != 600 {
			t.Fatalf("session budget %+v", b)
		}
		text := strings.Repeat("y", 1000)
		body := `{"id":"t1","calls":[
			{"id":"c1","name":"echo","arguments":{"text":"short"}},
			{"id":"c2","name":"echo","arguments":{"text":"` + text + `"}},
			{"id":"c3","name":"echo","arguments":{"text":"` + text + `"}}]}`
		r = s.do("POST", "/v1/sessions/p/turns", body)
		if r.status != 200 {
			t.Fatalf("post turn: %d %s", r.status, r.body)
		}
		var tr wireTurn
		r.json(t, &tr)
		if summary(tr) != "c1=ok c2=ok c3=ok" {
			t.Fatalf("turn: %s", summary(tr))
		}
		total := 0
		for _, res := range tr.Results {
			total += len(res.Output)
		}
		// c1 passes whole; c2 and c3 share what it left: 600 in all.
		if tr.Results[0].Truncated || !tr.Results[1].Truncated || !tr.Results[2].Truncated || total > 600 {
			t.Fatalf("outputs not within the turn budget (%d bytes): %+v", total, tr.Results)
		}
		var ledger struct {
			Lines []struct {
				CallID string          `json:"call_id"`
				Kind   string          `json:"kind"`
				Data   json.RawMessage `json:"data"`
			} `json:"lines"`
		}
		s.do("GET", "/v1/sessions/p/ledger", nil).json(t, &ledger)
		noted := 0
		for _, l := range ledger.Lines {
			if l.Kind == "call_answered" && strings.Contains(string(l.Data), `"projection":{"kept":`) {
				noted++
			}
		}
		if noted != 2 {
			t.Fatalf("%d call_answered lines record their projection, want 2", noted)
		}
	})
}
