package api_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/turnd/turnd/turn"
)

// TestListings: sessions, a session's turns and the parked calls page
// newest first to their end on both stores, the parked calls carry no
// completion key, and bad queries are 400 invalid_query.
func TestListings(t *testing.T) {
	t.Parallel()
	eachStack(t, func(t *testing.T, s *stack) {
		for i := range 7 {
			if r := s.do("POST", "/v1/sessions", fmt.Sprintf(`{"id":"s%d"}`, i)); r.status != 201 {
				t.Fatalf("creating s%d: %d %s", i, r.status, r.body)
			}
		}
		for i := range 3 {
			body := fmt.Sprintf(`{"id":"t%d","calls":[{"id":"c%d","name":"echo","arguments":{"text":"hi"}}]}`, i, i)
			if r := s.do("POST", "/v1/sessions/s6/turns", body); r.status != 200 {
				t.Fatalf("turn t%d: %d %s", i, r.status, r.body)
			}
		}
		// A synchronous post answers once the turn waits.
		r := s.do("POST", "/v1/sessions/s5/turns", `{"id":"w","calls":[{"id":"d1","name":"deferred","arguments":{"deadline":"1h"}}]}`)
		if !strings.Contains(string(r.body), `"waiting"`) {
			t.Fatalf("deferred turn: %d %s", r.status, r.body)
		}
		key := (<-s.tools.keys)[0]

		var ids []string
		after := ""
		for range 10 {
			var page struct {
				Sessions []struct {
					ID      string `json:"id"`
					Turns   int    `json:"turns"`
					Pending int    `json:"pending"`
				} `json:"sessions"`
				NextAfter string `json:"next_after"`
			}
			r := s.do("GET", "/v1/sessions?limit=3&after="+url.QueryEscape(after), nil)
			if r.status != 200 {
				t.Fatalf("listing sessions: %d %s", r.status, r.body)
			}
			r.json(t, &page)
			for _, x := range page.Sessions {
				ids = append(ids, fmt.Sprintf("%s:%d:%d", x.ID, x.Turns, x.Pending))
			}
			if after = page.NextAfter; after == "" {
				break
			}
		}
		if got := strings.Join(ids, " "); !strings.Contains(got, "s6:3:0") || !strings.Contains(got, "s5:1:1") || len(ids) != 7 {
			t.Errorf("sessions: %s", got)
		}

		var turns struct {
			Turns []struct {
				ID     string `json:"id"`
				Status string `json:"status"`
				Calls  int    `json:"calls"`
			} `json:"turns"`
			NextAfter string `json:"next_after"`
		}
		r = s.do("GET", "/v1/sessions/s6/turns?limit=2", nil)
		r.json(t, &turns)
		if len(turns.Turns) != 2 || turns.Turns[0].ID != "t2" || turns.Turns[0].Calls != 1 || turns.Turns[0].Status != "completed" || turns.NextAfter == "" {
			t.Errorf("first page of turns: %s", r.body)
		}
		r = s.do("GET", "/v1/sessions/s6/turns?limit=2&after="+url.QueryEscape(turns.NextAfter), nil)
		r.json(t, &turns)
		if len(turns.Turns) != 1 || turns.Turns[0].ID != "t0" || turns.NextAfter != "" {
			t.Errorf("second page of turns: %s", r.body)
		}
		// A last page that is full says it is the last.
		r = s.do("GET", "/v1/sessions/s6/turns?limit=3", nil)
		r.json(t, &turns)
		if len(turns.Turns) != 3 || turns.NextAfter != "" {
			t.Errorf("a full last page of turns: %s", r.body)
		}
		if r := s.do("GET", "/v1/sessions/s5/turns?status=waiting", nil); !strings.Contains(string(r.body), `"id":"w"`) {
			t.Errorf("waiting turns: %s", r.body)
		}
		if r := s.do("GET", "/v1/sessions/nobody/turns", nil); r.status != 404 {
			t.Errorf("turns of an unknown session: %d", r.status)
		}

		r = s.do("GET", "/v1/pending", nil)
		var pending struct {
			Pending []struct {
				SessionID string `json:"session_id"`
				TurnID    string `json:"turn_id"`
				CallID    string `json:"call_id"`
				Tool      string `json:"tool"`
			} `json:"pending"`
		}
		r.json(t, &pending)
		if len(pending.Pending) != 1 || pending.Pending[0].CallID != "d1" || pending.Pending[0].Tool != "deferred" {
			t.Errorf("pending: %s", r.body)
		}
		if strings.Contains(string(r.body), key) {
			t.Errorf("the pending listing carries the completion key: %s", r.body)
		}

		for _, q := range []string{"/v1/sessions?limit=0", "/v1/sessions?limit=501", "/v1/sessions?after=nope", "/v1/pending?after=" + url.QueryEscape(turn.Cursor{At: time.Unix(1e9, 0), ID: "x"}.String()), "/v1/sessions/s6/turns?status=done"} {
			if r := s.do("GET", q, nil); r.status != 400 || r.code(t) != "invalid_query" {
				t.Errorf("GET %s: %d %s", q, r.status, r.body)
			}
		}
	})
}
