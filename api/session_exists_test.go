package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/turnd/turnd/internal/teststores"
	"github.com/turnd/turnd/turn"
)

// TestCreateExistingSession: creating a session whose id exists answers
// 409 session_exists as openapi.yaml documents it, and leaves the
// existing session as it was: its tools, budget, callback URL and
// metadata are not overwritten by the second request's.
func TestCreateExistingSession(t *testing.T) {
	t.Parallel()
	teststores.Each(t, func(t *testing.T, open func(testing.TB) turn.Store) {
		s := newStack(t, open, stackOptions{})
		first := s.do("POST", "/v1/sessions", `{"id":"dup","tools":["echo"],"budget":{"limit":64},
			"callback_url":"https://hooks.example/first","metadata":{"who":"first"}}`)
		if first.status != 201 {
			t.Fatalf("create session: %d %s", first.status, first.body)
		}

		r := s.do("POST", "/v1/sessions", `{"id":"dup","tools":["echo","sleep"],"budget":{"limit":4096},
			"callback_url":"https://hooks.example/second","metadata":{"who":"second"}}`)
		if r.status != 409 {
			t.Fatalf("create existing session: %d %s, want 409", r.status, r.body)
		}
		if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
			t.Errorf("content type %q, want application/problem+json", ct)
		}
		if loc := r.header.Get("Location"); loc != "" {
			t.Errorf("a refused create names a Location: %q", loc)
		}
		var p struct {
			Type   string `json:"type"`
			Title  string `json:"title"`
			Status int    `json:"status"`
			Detail string `json:"detail"`
			Code   string `json:"code"`
		}
		r.json(t, &p)
		// The example of openapi.yaml's SessionExists response.
		want := struct{ Type, Title, Detail, Code string }{
			"urn:turnd:problem:session_exists", "Conflict", "a session with this id already exists", "session_exists"}
		if got := (struct{ Type, Title, Detail, Code string }{p.Type, p.Title, p.Detail, p.Code}); got != want || p.Status != 409 {
			t.Errorf("problem %s, want %+v with status 409", r.body, want)
		}

		// The session answered is the one first created, field for field.
		got := s.do("GET", "/v1/sessions/dup", nil)
		if got.status != 200 {
			t.Fatalf("get session: %d %s", got.status, got.body)
		}
		if !bytes.Equal(bytes.TrimSpace(got.body), bytes.TrimSpace(first.body)) {
			t.Errorf("session after the refused create:\n%s\nwant as created:\n%s", got.body, first.body)
		}
		var sess struct {
			Tools  []string `json:"tools"`
			Budget struct {
				Limit int `json:"limit"`
			} `json:"budget"`
			CallbackURL *string         `json:"callback_url"`
			Metadata    json.RawMessage `json:"metadata"`
		}
		got.json(t, &sess)
		if !slices.Equal(sess.Tools, []string{"echo"}) || sess.Budget.Limit != 64 ||
			sess.CallbackURL == nil || *sess.CallbackURL != "https://hooks.example/first" ||
			string(sess.Metadata) != `{"who":"first"}` {
			t.Errorf("session overwritten: %s", got.body)
		}

		// And so is the one the store holds.
		stored, err := s.store.GetSession(context.Background(), "dup")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(stored.Tools, []string{"echo"}) || stored.Budget.Limit != 64 {
			t.Errorf("stored session overwritten: tools %v, budget %+v", stored.Tools, stored.Budget)
		}
	})
}
