package api_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/turnd/turnd/internal/teststores"
)

// HTTP conventions: a 405 lists the methods its resource allows (Allow),
// and the answers that depend on Prefer say so (Vary: Prefer).
func TestHTTPConventions(t *testing.T) {
	t.Parallel()
	s := newStack(t, teststores.Kinds[0].Open, stackOptions{})
	if r := s.do("POST", "/v1/sessions/s/turns", `{"id":"t1","calls":[{"id":"a","name":"echo"}]}`); r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	for _, tt := range []struct {
		method, path string
		allow        []string
	}{
		{"DELETE", "/v1/sessions/s", []string{"GET"}},
		{"PUT", "/v1/sessions/s/turns", []string{"GET", "POST"}},
		{"DELETE", "/v1/sessions/s/turns/t1", []string{"GET"}},
		{"PUT", "/v1/complete/ck_x", []string{"GET", "POST"}},
		{"POST", "/healthz", []string{"GET"}},
	} {
		r := s.do(tt.method, tt.path, nil)
		got := strings.Split(r.header.Get("Allow"), ", ")
		slices.Sort(got)
		if r.status != http.StatusMethodNotAllowed || !slices.Equal(got, tt.allow) {
			t.Errorf("%s %s: %d with Allow %q, want 405 with %v", tt.method, tt.path, r.status, r.header.Get("Allow"), tt.allow)
		}
	}
	for _, tt := range []struct {
		method, path string
		body         any
		vary         bool
	}{
		{"GET", "/v1/sessions/s/turns/t1", nil, true},
		{"GET", "/v1/sessions/s/turns/t1?format=openai.chat", nil, true},
		{"POST", "/v1/sessions/s/turns", `{"id":"t2","calls":[{"id":"b","name":"echo"}]}`, true},
		{"GET", "/v1/sessions/s", nil, false},
	} {
		r := s.do(tt.method, tt.path, tt.body)
		if got := slices.Contains(r.header.Values("Vary"), "Prefer"); got != tt.vary {
			t.Errorf("%s %s: Vary %q, want Prefer in it: %v", tt.method, tt.path, r.header.Values("Vary"), tt.vary)
		}
	}
}
