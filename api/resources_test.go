package api_test

import (
	"strings"
	"testing"

	"github.com/turnd/turnd/internal/teststores"
	"github.com/turnd/turnd/turn"
)

// TestResourcesOverHTTP: a keyed tool's templates and caps show in GET
// /v1/tools, its calls' ledger lines carry their resources and waits, and a
// call missing the pointed field is refused invalid_arguments while the
// turn's other calls run — every exchange held to openapi.yaml.
func TestResourcesOverHTTP(t *testing.T) {
	t.Parallel()
	teststores.Each(t, func(t *testing.T, open func(testing.TB) turn.Store) {
		s := newStack(t, open, stackOptions{yaml: `  - name: lookup
    effect: read
    resource: "doc:{/q}"
    max_concurrency: 2
    max_concurrency_per_session: 1
    input_schema: {type: object, properties: {q: {type: string}}}
    http: {url: "{{TOOLS}}/search", timeout: 5s}
`})
		r := s.do("GET", "/v1/tools", nil)
		if r.status != 200 || !strings.Contains(string(r.body), `"resources":["doc:{/q}"],"max_concurrency":2,"max_concurrency_per_session":1`) {
			t.Fatalf("tools: %d %s", r.status, r.body)
		}
		if r := s.do("POST", "/v1/sessions", `{"id":"k"}`); r.status != 201 {
			t.Fatalf("session: %d %s", r.status, r.body)
		}
		r = s.do("POST", "/v1/sessions/k/turns", `{"id":"t","calls":[
			{"id":"a","name":"lookup","arguments":{"q":"pgx"}},
			{"id":"b","name":"lookup","arguments":{}},
			{"id":"c","name":"lookup","arguments":{"q":"chi"}}]}`)
		if r.status != 200 {
			t.Fatalf("turn: %d %s", r.status, r.body)
		}
		var tr wireTurn
		r.json(t, &tr)
		if summary(tr) != "a=ok b=refused(invalid_arguments) c=ok" {
			t.Fatalf("turn: %s", summary(tr))
		}
		if e := tr.Results[1].Error; e == nil || e.Code != "invalid_arguments" || !strings.Contains(e.Message, `resource "doc:{/q}": argument /q is missing`) {
			t.Fatalf("b: %+v", tr.Results[1].Error)
		}
		if n := s.tools.searches.Load(); n != 2 {
			t.Fatalf("the tool ran %d times, want 2 (b refused before running)", n)
		}
		led := s.do("GET", "/v1/sessions/k/ledger", nil)
		for _, want := range []string{`"resources":["doc:pgx"]`, `"admitted_at":`, `"ready_at":`} {
			if !strings.Contains(string(led.body), want) {
				t.Fatalf("ledger lacks %s: %s", want, led.body)
			}
		}
	})
}
