package storetest

import (
	"encoding/json"
	"testing"

	"github.com/turnd/turnd/budget"
	"github.com/turnd/turnd/turn"
)

func testPing(t *testing.T, s turn.Store) {
	must(t, "Ping", s.Ping(ctx(t)))
}

func testCreateGetSession(t *testing.T, s turn.Store) {
	full := session("s-full")
	tests := []struct {
		name string
		sess turn.Session
	}{
		{"full", full},
		{"nil tools grant every tool", turn.Session{ID: "s-nil-tools", CreatedAt: base}},
		{"empty tools grant none", turn.Session{ID: "s-no-tools", Tools: []string{}, CreatedAt: base}},
		{"one tool", turn.Session{ID: "s-one-tool", Tools: []string{"search"}, CreatedAt: base}},
		{"zero budget", turn.Session{ID: "s-zero-budget", Budget: budget.Config{}, CreatedAt: base}},
		{"empty metadata is nil", turn.Session{ID: "s-empty-meta", Metadata: json.RawMessage{}, CreatedAt: base}},
		{"metadata array", turn.Session{ID: "s-meta-array", Metadata: json.RawMessage(`[1,"two",null]`), CreatedAt: base}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			must(t, "CreateSession", s.CreateSession(ctx(t), tt.sess))
			got, err := s.GetSession(ctx(t), tt.sess.ID)
			must(t, "GetSession", err)
			same(t, "session", got, wantSession(tt.sess))
			if (got.Tools == nil) != (tt.sess.Tools == nil) {
				t.Errorf("Tools nil = %v, want %v: nil (every tool) and empty (none) must stay distinct",
					got.Tools == nil, tt.sess.Tools == nil)
			}
		})
	}
}

func testCreateSessionExists(t *testing.T, s turn.Store) {
	must(t, "CreateSession", s.CreateSession(ctx(t), session("s1")))
	other := session("s1")
	other.CallbackURL = "https://other.test/"
	isErr(t, "CreateSession again", s.CreateSession(ctx(t), other), turn.ErrSessionExists)
	got, err := s.GetSession(ctx(t), "s1")
	must(t, "GetSession", err)
	same(t, "session after the refused create", got, wantSession(session("s1")))
}

func testGetSessionNotFound(t *testing.T, s turn.Store) {
	_, err := s.GetSession(ctx(t), "nope")
	isErr(t, "GetSession", err, turn.ErrNotFound)
}
