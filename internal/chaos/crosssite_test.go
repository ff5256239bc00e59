package chaos

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// crossSite is one request a browser on another site could make (or a
// DNS-rebound name could carry) to a turnd without tokens on loopback.
type crossSite struct {
	name   string
	method string
	path   string
	body   string
	header []string // Content-Type is application/json unless set here
	want   []int
}

// TestCrossSite sends the requests of a page on another site to a
// loopback turnd without tokens: POSTs of a form's or a text's
// Content-Type (415), a Host that is not a loopback name (refused), an
// Origin not allowed (403), and what --cors-origins allows. None may run
// a tool or create a session.
func TestCrossSite(t *testing.T) {
	t.Parallel()
	r := pgRig(t)
	p := r.start("turnd")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	began := time.Now()
	turn := func(id string) string {
		return `{"id":"` + id + `","calls":[{"id":"` + id + `-w","name":"write","arguments":{}}]}`
	}
	port := p.Addr[strings.LastIndexByte(p.Addr, ':')+1:]
	refused := []int{400, 403, 421}
	rows := []crossSite{
		{"a form POST of a turn", "POST", "/v1/sessions/x1/turns", turn("t"), []string{"Content-Type", "application/x-www-form-urlencoded"}, []int{415}},
		{"a multipart POST of a turn", "POST", "/v1/sessions/x2/turns", turn("t"), []string{"Content-Type", "multipart/form-data; boundary=x"}, []int{415}},
		{"a text/plain POST of a turn", "POST", "/v1/sessions/x3/turns", turn("t"), []string{"Content-Type", "text/plain"}, []int{415}},
		{"a text/plain POST of a session", "POST", "/v1/sessions", `{"id":"x4"}`, []string{"Content-Type", "text/plain"}, []int{415}},
		{"a form POST of a cancel", "POST", "/v1/sessions/x5/turns/t/cancel", `a=b`, []string{"Content-Type", "application/x-www-form-urlencoded"}, []int{404, 415}},
		{"a Host that is not loopback", "POST", "/v1/sessions/x6/turns", turn("t"), []string{"Host", "evil.example:" + port}, refused},
		{"a rebound Host reading the ledger", "GET", "/v1/sessions/x6/ledger", ``, []string{"Host", "attacker.example"}, refused},
		{"an Origin not allowed", "POST", "/v1/sessions/x7/turns", turn("t"), []string{"Origin", "https://evil.example"}, []int{403}},
		{"an Origin not allowed reading", "GET", "/v1/tools", ``, []string{"Origin", "https://evil.example"}, []int{403}},
		{"a null Origin", "POST", "/v1/sessions/x8/turns", turn("t"), []string{"Origin", "null"}, []int{403}},
		// A preflight refused either way (403, or no CORS route at all)
		// is refused; it must not carry Access-Control-Allow-Origin.
		{"a preflight from an Origin not allowed", "OPTIONS", "/v1/sessions/x9/turns", ``, []string{"Origin", "https://evil.example", "Access-Control-Request-Method", "POST"}, []int{403, 405}},
	}
	allowed := []crossSite{
		{"a loopback Host by name", "GET", "/v1/tools", ``, []string{"Host", "localhost:" + port}, []int{200}},
		{"a loopback Host without a port", "GET", "/v1/tools", ``, []string{"Host", "localhost"}, []int{200}},
		{"an IPv6 loopback Host", "GET", "/v1/tools", ``, []string{"Host", "[::1]:" + port}, []int{200}},
		{"the same origin", "POST", "/v1/sessions/ok1/turns", turn("t"), []string{"Origin", p.Base}, []int{200}},
		{"a delivery's text/plain is not refused for its type", "POST", "/v1/complete/ck_nosuchkeynosuchkeynosuchkeynosuchkey00000", `{"output":1}`, []string{"Content-Type", "text/plain"}, []int{404}},
	}
	var bad tally
	defer bad.report(t)
	repeats := size(3, 100)
	sent := 0
	send := func(p *Turnd, row crossSite) (Answer, bool) {
		var body []byte
		if row.body != "" {
			body = []byte(row.body)
		}
		a, err := client.Do(ctx, row.method, p.Base+row.path, body, row.header...)
		sent++
		if err != nil {
			bad.add("no answer to: "+row.name, "%v", err)
			return a, false
		}
		if !slices.Contains(row.want, a.Status) {
			bad.add("an unexpected status to: "+row.name, "%d, want one of %v: %s", a.Status, row.want, clip(a.Body))
			return a, false
		}
		return a, true
	}
	for i := 0; i < repeats; i++ {
		for _, row := range rows {
			a, ok := send(p, row)
			if ok && !strings.HasPrefix(a.Header.Get("Content-Type"), "application/problem+json") {
				bad.add("not problem+json: "+row.name, "%d with Content-Type %q", a.Status, a.Header.Get("Content-Type"))
			}
			if acao := a.Header.Get("Access-Control-Allow-Origin"); acao != "" {
				bad.add("a refusal allows an origin: "+row.name, "Access-Control-Allow-Origin %q", acao)
			}
		}
	}
	for _, row := range allowed {
		send(p, row)
	}
	// What --cors-origins allows, on a turnd of its own (the flag is new).
	cors := []crossSite{
		{"an Origin --cors-origins allows", "POST", "/v1/sessions/ok2/turns", turn("t"), []string{"Origin", "https://app.example"}, []int{200}},
		{"a preflight --cors-origins allows", "OPTIONS", "/v1/sessions/ok3/turns", ``, []string{"Origin", "https://app.example", "Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "content-type"}, []int{200, 204}},
		{"an Origin --cors-origins does not allow", "POST", "/v1/sessions/x10/turns", turn("t"), []string{"Origin", "https://evil.example"}, []int{403}},
	}
	withCORS, err := NewTurnd("turnd-cors", binary(t), append(append([]string(nil), r.args...), "--cors-origins", "https://app.example"), nil)
	if err != nil {
		t.Fatal(err)
	}
	r.all = append(r.all, withCORS)
	if err := withCORS.Start(ctx); err != nil {
		bad.add("turnd does not start with --cors-origins", "%v", strings.SplitN(err.Error(), "\n", 3)[:2])
	} else {
		for _, row := range cors {
			a, ok := send(withCORS, row)
			if ok && a.Status < 400 && a.Header.Get("Access-Control-Allow-Origin") != "https://app.example" {
				bad.add("no CORS answer to: "+row.name, "Access-Control-Allow-Origin %q", a.Header.Get("Access-Control-Allow-Origin"))
			}
		}
		allowed = append(allowed, cors[0])
	}
	for _, row := range allowed {
		if strings.HasSuffix(row.path, "/turns") && row.method == "POST" {
			r.rec.Posted(strings.Split(row.path, "/")[3], "t")
		}
	}
	// Nothing refused ran a tool or made a session.
	for _, s := range []string{"x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8", "x9", "x10"} {
		if n := r.ts.Executions(s + "/t/t-w"); n > 0 {
			bad.add("a refused request ran a tool", "session %s: %d executions", s, n)
		}
		a, err := client.Do(ctx, http.MethodGet, p.Base+"/v1/sessions/"+s, nil)
		if err == nil && a.Status != http.StatusNotFound {
			bad.add("a refused request made a session", "session %s: GET answered %d", s, a.Status)
		}
	}
	r.check(p, CheckOptions{})
	t.Logf("chaos: crosssite: %d requests (%d refusal rows × %d, %d allowed rows) in %v", sent, len(rows), repeats, len(allowed)+len(cors)-1, time.Since(began).Round(time.Second))
}
