package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// badRequest is one row of the bad-request table: a request turnd must
// refuse with a 4xx problem+json, never a 5xx.
type badRequest struct {
	name   string
	method string
	path   string // {s} (a session of the row's own), {key} and {output} are replaced
	body   string // sent as is (may hold invalid UTF-8)
	header []string
	want   []int // the statuses allowed; empty: any 4xx
}

// badRequests is the table. The statuses are those of openapi.yaml and
// of the hardening issue's fixes (400 invalid_json or 422 for bad bytes,
// 413, 416 and 431 as problem+json, 422 for a blocked callback_url).
func badRequests() []badRequest {
	turn := func(call string) string { return `{"id":"bt","calls":[` + call + `]}` }
	many := make([]string, 129)
	for i := range many {
		many[i] = fmt.Sprintf(`{"id":"m%d","name":"echo","arguments":{}}`, i)
	}
	bytes400or422 := []int{400, 422}
	return []badRequest{
		{"malformed JSON", "POST", "/v1/sessions/{s}/turns", `{"id":"t","calls":[`, nil, []int{400}},
		{"not an object", "POST", "/v1/sessions/{s}/turns", `[1,2]`, nil, []int{400, 422}},
		{"empty body", "POST", "/v1/sessions/{s}/turns", ``, nil, []int{400}},
		{"trailing data", "POST", "/v1/sessions/{s}/turns", turn(`{"id":"c","name":"echo","arguments":{}}`) + `{}`, nil, []int{400}},
		{"invalid UTF-8 in arguments", "POST", "/v1/sessions/{s}/turns", turn("{\"id\":\"c1\",\"name\":\"echo\",\"arguments\":{\"text\":\"a\xffb\"}}"), nil, bytes400or422},
		{"invalid UTF-8 in an argument's key", "POST", "/v1/sessions/{s}/turns", turn("{\"id\":\"c1\",\"name\":\"echo\",\"arguments\":{\"t\xfe\":1}}"), nil, bytes400or422},
		{"NUL in the call name", "POST", "/v1/sessions/{s}/turns", turn(`{"id":"c1","name":"ec\u0000ho","arguments":{}}`), nil, bytes400or422},
		{"invalid UTF-8 in the call id", "POST", "/v1/sessions/{s}/turns", turn("{\"id\":\"c\xff1\",\"name\":\"echo\",\"arguments\":{}}"), nil, bytes400or422},
		{"NUL in the call id", "POST", "/v1/sessions/{s}/turns", turn(`{"id":"c\u00001","name":"echo","arguments":{}}`), nil, bytes400or422},
		{"invalid UTF-8 in the turn id", "POST", "/v1/sessions/{s}/turns", "{\"id\":\"t\xc3\",\"calls\":[{\"id\":\"c1\",\"name\":\"echo\",\"arguments\":{}}]}", nil, bytes400or422},
		{"a turn id of 10000 bytes", "POST", "/v1/sessions/{s}/turns", `{"id":"` + strings.Repeat("t", 10000) + `","calls":[{"id":"c1","name":"echo","arguments":{}}]}`, nil, nil},
		{"arguments nested 10000 deep", "POST", "/v1/sessions/{s}/turns", turn(`{"id":"c1","name":"echo","arguments":{"a":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}}`), nil, nil},
		{"too many calls", "POST", "/v1/sessions/{s}/turns", `{"id":"many","calls":[` + strings.Join(many, ",") + `]}`, nil, []int{422}},
		{"a body over the limit", "POST", "/v1/sessions/{s}/turns", `{"id":"big","calls":[{"id":"c1","name":"echo","arguments":{"text":"` + strings.Repeat("x", 5<<20) + `"}}]}`, nil, []int{413}},
		{"invalid UTF-8 in session metadata", "POST", "/v1/sessions", "{\"id\":\"bm1\",\"metadata\":{\"k\":\"v\xff\"}}", nil, bytes400or422},
		{"invalid UTF-8 in a metadata key", "POST", "/v1/sessions", "{\"id\":\"bm2\",\"metadata\":{\"k\xff\":\"v\"}}", nil, bytes400or422},
		{"NUL in session metadata", "POST", "/v1/sessions", `{"id":"bm3","metadata":{"k":"a\u0000b"}}`, nil, []int{201, 400, 409, 422}},
		{"callback_url to the metadata address", "POST", "/v1/sessions", `{"id":"bc1","callback_url":"http://169.254.169.254/latest/meta-data"}`, nil, bytes400or422},
		{"callback_url to a link-local address", "POST", "/v1/sessions", `{"id":"bc2","callback_url":"http://[fe80::1]/hook"}`, nil, bytes400or422},
		{"callback_url to the metadata name", "POST", "/v1/sessions", `{"id":"bc3","callback_url":"http://metadata.google.internal/computeMetadata/v1/"}`, nil, bytes400or422},
		{"invalid UTF-8 in a delivered output", "POST", "/v1/complete/{key}", "{\"output\":{\"s\":\"a\xffb\"}}", nil, bytes400or422},
		// A string field decoded as a Go string is repaired (U+FFFD) by
		// the decoder: taking it is fine.
		{"invalid UTF-8 in a delivered error", "POST", "/v1/complete/{key}", "{\"error\":{\"code\":\"x\xff\",\"message\":\"m\"}}", nil, []int{200, 400, 422}},
		{"NUL in a delivered output's key", "POST", "/v1/complete/{key}", `{"output":{"a\u0000":1}}`, nil, []int{200, 400, 422}},
		{"a delivery with output and error", "POST", "/v1/complete/{key}", `{"output":1,"error":{"code":"x"}}`, nil, []int{422}},
		{"an empty delivery", "POST", "/v1/complete/{key}", `{}`, nil, []int{422}},
		{"a delivery to an unknown key", "POST", "/v1/complete/ck_nosuchkeynosuchkeynosuchkeynosuchkey00000", `{"output":1}`, nil, []int{404}},
		{"a delivery to a key of bad bytes", "POST", "/v1/complete/ck_%ff%00", `{"output":1}`, nil, []int{400, 404}},
		{"a heartbeat of an unknown key", "POST", "/v1/complete/ck_nosuch/heartbeat", ``, nil, []int{404}},
		{"a Range past the end of an output", "GET", "/v1/outputs/{output}", ``, []string{"Range", "bytes=1000000-2000000"}, []int{416}},
		{"a malformed Range", "GET", "/v1/outputs/{output}", ``, []string{"Range", "bytes=z-"}, []int{200, 206, 416}},
		{"a header of 200 KiB", "GET", "/v1/tools", ``, []string{"X-Padding", strings.Repeat("p", 200<<10)}, []int{431}},
		{"a ledger page limit of 0", "GET", "/v1/sessions/{s}/ledger?limit=0", ``, nil, []int{400}},
		{"a ledger page after -1", "GET", "/v1/sessions/{s}/ledger?after=-1", ``, nil, []int{400}},
		{"a ledger page limit of bad bytes", "GET", "/v1/sessions/{s}/ledger?limit=%ff", ``, nil, []int{400}},
		{"a turn that does not exist", "GET", "/v1/sessions/{s}/turns/nosuch", ``, nil, []int{404}},
		{"a Prefer wait of bad bytes", "GET", "/v1/sessions/{s}/turns/nosuch", ``, []string{"Prefer", "wait=\xff"}, []int{400, 404}},
		{"an unknown format", "POST", "/v1/sessions/{s}/turns?format=nope", `{}`, nil, []int{400}},
		{"an openai.chat body of bad bytes", "POST", "/v1/sessions/{s}/turns?format=openai.chat", "{\"id\":\"chatcmpl-x\",\"choices\":[{\"message\":{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"c\xff\",\"type\":\"function\",\"function\":{\"name\":\"echo\",\"arguments\":\"{\\\"t\\\":\\\"\xfe\\\"}\"}}]}}]}", nil, []int{200, 400, 422}},
		{"a NUL in a session id", "GET", "/v1/sessions/a%00b", ``, nil, []int{400, 404}},
		{"invalid UTF-8 in a session id", "POST", "/v1/sessions/a%ffb/turns", turn(`{"id":"c1","name":"echo","arguments":{}}`), nil, []int{400, 404, 422}},
		{"a method not allowed", "DELETE", "/v1/sessions", ``, nil, []int{405}},
	}
}

// TestBadRequests sends the bad-request table to one turnd on PostgreSQL
// (which holds neither NUL nor invalid UTF-8), each row a few times
// (many in the long run): no row may answer 5xx, each answers one of its
// statuses with a problem+json body, and turnd serves an ordinary turn
// afterwards.
func TestBadRequests(t *testing.T) {
	t.Parallel()
	r := pgRig(t)
	p := r.start("turnd")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	began := time.Now()

	// A parked call's key and a kept output, for the rows that need them.
	mustDo := func(method, path, body string, want int, header ...string) []byte {
		t.Helper()
		a, err := client.Do(ctx, method, p.Base+path, []byte(body), header...)
		if err != nil || a.Status != want {
			t.Fatalf("%s %s: %v %d, want %d: %s", method, path, err, a.Status, want, clip(a.Body))
		}
		return a.Body
	}
	var keys []string // one parked call's key for each row that delivers
	rows := badRequests()
	var parks []string
	for i, row := range rows {
		if strings.Contains(row.path, "{key}") {
			parks = append(parks, fmt.Sprintf(`{"id":"d%d","name":"defer","arguments":{"pending":{"deadline":"1h"}}}`, i))
		}
	}
	mustDo("POST", "/v1/sessions/bad-setup/turns", `{"id":"park","mode":"concurrent","calls":[`+strings.Join(parks, ",")+`]}`, http.StatusAccepted, "Prefer", "respond-async")
	keyOf := map[string]string{} // call id → key
	for range parks {
		select {
		case pc := <-r.ts.Parked():
			keyOf[pc.CallID] = pc.Key
		case <-time.After(time.Minute):
			t.Fatal("the deferred calls never reached their tool")
		}
	}
	for i, row := range rows {
		if strings.Contains(row.path, "{key}") {
			keys = append(keys, keyOf[fmt.Sprintf("d%d", i)])
		} else {
			keys = append(keys, "")
		}
	}
	mustDo("POST", "/v1/sessions", `{"id":"bad-out","budget":{"limit":64}}`, http.StatusCreated)
	var out Turn
	if err := json.Unmarshal(mustDo("POST", "/v1/sessions/bad-out/turns", `{"id":"o","calls":[{"id":"e1","name":"echo","arguments":{"text":"`+strings.Repeat("y", 4096)+`"}}]}`, http.StatusOK), &out); err != nil {
		t.Fatal(err)
	}
	var res struct {
		OutputID string `json:"output_id"`
	}
	_ = json.Unmarshal(out.Results[0], &res)
	if res.OutputID == "" {
		t.Fatalf("the echo's output was not kept: %s", out.Results[0])
	}

	var bad tally
	defer bad.report(t)
	repeats := size(3, 200)
	sent, fivexx := 0, 0
	for i := 0; i < repeats; i++ {
		for j, row := range rows {
			path := strings.NewReplacer("{s}", fmt.Sprintf("bad%d", j), "{key}", keys[j], "{output}", res.OutputID).Replace(row.path)
			var body []byte
			if row.body != "" || row.method == "POST" {
				body = []byte(row.body)
			}
			a, err := client.Do(ctx, row.method, p.Base+path, body, row.header...)
			sent++
			if err != nil {
				bad.add("no answer to: "+row.name, "%v", err)
				continue
			}
			if a.Status >= 500 {
				fivexx++
				bad.add("5xx to: "+row.name, "%d %s", a.Status, clip(a.Body))
				continue
			}
			if len(row.want) > 0 && !slices.Contains(row.want, a.Status) {
				bad.add("an unexpected status to: "+row.name, "%d, want one of %v: %s", a.Status, row.want, clip(a.Body))
			} else if len(row.want) == 0 && a.Status < 400 {
				bad.add("taken: "+row.name, "%d: %s", a.Status, clip(a.Body))
			}
			if a.Status >= 400 && !strings.HasPrefix(a.Header.Get("Content-Type"), "application/problem+json") {
				bad.add("not problem+json: "+row.name, "%d with Content-Type %q: %s", a.Status, a.Header.Get("Content-Type"), clip(a.Body))
			}
		}
	}
	// Whatever a bad request left behind reads back without a 5xx.
	for j, row := range rows {
		if !strings.Contains(row.path, "{s}") {
			continue
		}
		for _, path := range []string{"/v1/sessions/bad%d/ledger", "/v1/sessions/bad%d/turns/bt"} {
			a, err := client.Do(ctx, http.MethodGet, p.Base+fmt.Sprintf(path, j), nil)
			if err != nil || a.Status >= 500 {
				bad.add("5xx reading back after: "+row.name, "GET %s: %v %d %s", fmt.Sprintf(path, j), err, a.Status, clip(a.Body))
			}
		}
	}
	// Still serving, and nothing jammed.
	mustDo("POST", "/v1/sessions/bad-after/turns", `{"id":"ok","calls":[{"id":"c1","name":"read","arguments":{}},{"id":"c2","name":"write","arguments":{}}]}`, http.StatusOK)
	r.rec.Posted("bad-after", "ok")
	r.check(p, CheckOptions{})
	t.Logf("chaos: badrequests: %d rows × %d = %d bad requests in %v, %d answered 5xx", len(rows), repeats, sent, time.Since(began).Round(time.Second), fivexx)
}

// TestSlowBody sends a request body one byte and then nothing: turnd must
// answer 408 (problem+json) rather than hold the connection until its
// read timeout and drop it without an answer.
func TestSlowBody(t *testing.T) {
	t.Parallel()
	r := pgRig(t)
	p := r.start("turnd")
	began := time.Now()
	conn, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/sessions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{", p.Addr)
	_ = conn.SetReadDeadline(time.Now().Add(90 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a slow body within %v: %v", time.Since(began).Round(time.Second), err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") {
		t.Errorf("a slow body: %d %q, want 408 application/problem+json", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	t.Logf("chaos: slowbody: answered %d after %v", resp.StatusCode, time.Since(began).Round(time.Second))
}
