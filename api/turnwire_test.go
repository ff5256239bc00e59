package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/turnd/turnd/dispatch"
	"github.com/turnd/turnd/internal/rawjson"
	"github.com/turnd/turnd/turn"
)

// The encoding/json paths the hand-written ones in turnwire.go replace,
// kept as the reference they are held to.

// referenceWriteTurn answers t as postTurn and getTurn did before
// writeTurnJSON.
func referenceWriteTurn(w http.ResponseWriter, status int, t turn.Turn) {
	writeJSON(w, status, toTurnWire(t))
}

// referenceDecodeTurn decodes a turn request as postTurn did before
// decodeTurnRequest.
func referenceDecodeTurn(r *http.Request, req *turnRequest) error {
	return decodeJSON(r, req)
}

// recorded is a response as a client sees it.
type recorded struct {
	status int
	header http.Header
	body   string
}

func record(write func(http.ResponseWriter, int, turn.Turn), status int, t turn.Turn) recorded {
	rec := httptest.NewRecorder()
	write(rec, status, t)
	return recorded{rec.Code, rec.Header(), rec.Body.String()}
}

// checkTurnWire fails t unless writeTurnJSON answers tt exactly as the
// reference does. It returns whether the fast path took it.
func checkTurnWire(t testing.TB, tt turn.Turn) bool {
	t.Helper()
	for _, status := range []int{http.StatusOK, http.StatusAccepted} {
		want := record(referenceWriteTurn, status, tt)
		got := record(writeTurnJSON, status, tt)
		if got.status != want.status || !reflect.DeepEqual(got.header, want.header) || got.body != want.body {
			t.Fatalf("writeTurnJSON differs from encoding/json\n got: %d %v %q\nwant: %d %v %q", got.status, got.header, got.body, want.status, want.header, want.body)
		}
	}
	_, fast := appendTurnJSON(nil, tt)
	return fast
}

var (
	wireT0   = time.Date(2025, 3, 14, 15, 9, 26, 535897932, time.UTC)
	berlin   = time.FixedZone("CET", 3600)
	awkwards = []string{
		"",
		"plain",
		"ünïcödé ✓ 日本語 🚀",
		"<script>&amp;</script>",
		"quote \" backslash \\ slash /",
		"\x00\x01\x07\b\t\n\v\f\r\x0e\x1b\x1f\x7f",
		"line\u2028separator\u2029paragraph",
		"invalid \xff\xfe utf-8 \xc3 \xe2\x80 end",
		"surrogate \xed\xa0\x80 half",
		"replacement \ufffd char",
		"overlong \xc0\xaf slash",
		"\xf4\x90\x80\x80 above U+10FFFF",
		strings.Repeat("long ", 2000),
	}
	awkwardOutputs = []string{
		``,
		`null`,
		`{"a":1}`,
		` { "a" : [ 1 , 2 , { "b" : "x  y" } ] , "c" : true } `,
		"\t\r\n[\n\t1,\r\n\t2\n]\n",
		`"text with \"escapes\" \\ \/ \b\f\n\r\t \u00e9 \uD83D\uDE80"`,
		`"<>& raw \u2028 escaped" `,
		"\"raw \u2028\u2029 separators\"",
		"\"raw invalid \xff utf-8\"",
		`123456789012345678901234567890123456789e-400`,
		`-0.0E+5`,
		`[1e999999, -1E-999999, 0, -0, 0.5]`,
		`{"": {"": [[], {}, [{}]]}}`,
		`true`,
		`false`,
		`{"a":}`,
		`{"a":1}x`,
		`{"a":1} {}`,
		`[1,]`,
		`01`,
		`"unterminated`,
		"\"control \x01 char\"",
		`nul`,
		` `,
		strings.Repeat("[", 600) + strings.Repeat("]", 600),
		strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
	}
)

// wireTurn is a settled four-call turn with every field set.
func wireTurn() turn.Turn {
	tt := turn.Turn{
		SessionID: "s_01JABCDEF", ID: "t_01JGHIJKL", Status: turn.StatusCompleted,
		Mode: dispatch.ModeConcurrent, FailurePolicy: dispatch.PolicyIsolate,
		CreatedAt: wireT0, SettledAt: wireT0.Add(42 * time.Millisecond),
	}
	for i, out := range []string{`{"echo":{"text":"hello"}}`, `"a text output\nwith two lines"`, `[1,2,3]`, ``} {
		r := turn.Result{
			Index: i, CallID: "call_" + string(rune('a'+i)), Name: "echo", Status: turn.CallOK,
			Output: json.RawMessage(out), OriginalBytes: int64(len(out)), OriginalLines: 1, Attempts: 1,
			StartedAt: wireT0.Add(time.Millisecond), FinishedAt: wireT0.Add(time.Duration(i+2) * time.Millisecond),
		}
		if out == "" {
			r.Output = nil
			r.Status = turn.CallFailed
			r.Error = &turn.CallError{Code: "tool_unavailable", Message: "down <x> & \"y\""}
		}
		tt.Results = append(tt.Results, r)
	}
	return tt
}

func TestWriteTurnJSONMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	type tc struct {
		name string
		turn func() turn.Turn
		fast bool // the hand-written path answers it (else encoding/json must)
	}
	cases := []tc{
		{"four results", wireTurn, true},
		{"zero turn", func() turn.Turn { return turn.Turn{} }, true},
		{"no results", func() turn.Turn { t := wireTurn(); t.Results = []turn.Result{}; return t }, true},
		{"running, nothing settled", func() turn.Turn {
			t := wireTurn()
			t.Status, t.SettledAt = turn.StatusRunning, time.Time{}
			t.Results[0].StartedAt, t.Results[0].FinishedAt = time.Time{}, time.Time{}
			return t
		}, true},
		{"truncated with output id, replayed", func() turn.Turn {
			t := wireTurn()
			r := &t.Results[1]
			r.Truncated, r.OriginalBytes, r.OriginalLines, r.OutputID = true, math.MaxInt64, math.MinInt64, "out_01J<&>"
			t.Results[2].ReplayedFrom = "t_earlier"
			t.Results[2].Attempts = -3
			return t
		}, true},
		{"empty error", func() turn.Turn { t := wireTurn(); t.Results[0].Error = &turn.CallError{}; return t }, true},
		{"empty non-nil output", func() turn.Turn { t := wireTurn(); t.Results[0].Output = json.RawMessage{}; return t }, true},
		{"times in other zones, with monotonic readings", func() turn.Turn {
			t := wireTurn()
			now := time.Now()
			t.CreatedAt, t.SettledAt = now, now.In(berlin)
			t.Results[0].StartedAt = wireT0.In(berlin)
			t.Results[0].FinishedAt = time.Date(2025, 1, 1, 0, 0, 0, 100, berlin) // trailing zeros trimmed
			return t
		}, true},
		{"zero created_at", func() turn.Turn { t := wireTurn(); t.CreatedAt = time.Time{}; return t }, true},
		{"years 0 and 9999", func() turn.Turn {
			t := wireTurn()
			t.CreatedAt = time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)
			t.SettledAt = time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)
			return t
		}, true},
		{"year 10000", func() turn.Turn {
			t := wireTurn()
			t.SettledAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
			return t
		}, false},
		{"negative year", func() turn.Turn { t := wireTurn(); t.CreatedAt = time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC); return t }, false},
		{"year 10000 in a result", func() turn.Turn {
			t := wireTurn()
			t.Results[3].FinishedAt = time.Date(12345, 1, 1, 0, 0, 0, 0, time.UTC)
			return t
		}, false},
		{"year 9999 that is 10000 in UTC", func() turn.Turn {
			t := wireTurn()
			t.CreatedAt = time.Date(9999, 12, 31, 23, 30, 0, 0, time.FixedZone("west", -3600))
			return t
		}, false},
	}
	for _, s := range awkwards {
		cases = append(cases, tc{"string " + trimName(s), func() turn.Turn {
			t := wireTurn()
			t.ID, t.SessionID, t.Status, t.Mode, t.FailurePolicy = s, s, turn.Status(s), dispatch.Mode(s), dispatch.FailurePolicy(s)
			for i := range t.Results {
				r := &t.Results[i]
				r.CallID, r.Name, r.Status, r.OutputID, r.ReplayedFrom = s, s, turn.CallStatus(s), s, s
				r.Error = &turn.CallError{Code: s, Message: s}
			}
			return t
		}, true})
	}
	for _, out := range awkwardOutputs {
		valid := json.Valid([]byte(out)) && !strings.HasPrefix(out, "[[[")
		cases = append(cases, tc{"output " + trimName(out), func() turn.Turn {
			t := wireTurn()
			t.Results[2].Output = json.RawMessage(out)
			return t
		}, valid || out == ""})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if fast := checkTurnWire(t, c.turn()); fast != c.fast {
				t.Errorf("fast path taken: %v, want %v", fast, c.fast)
			}
		})
	}
}

func trimName(s string) string {
	if len(s) > 24 {
		return s[:24]
	}
	return s
}

// TestAppendCompactJSON holds rawjson.AppendCompact, which writes outputs, to json.Compact and
// json.Valid on the awkward outputs.
func TestAppendCompactJSON(t *testing.T) {
	t.Parallel()
	for _, out := range awkwardOutputs {
		checkCompact(t, []byte(out))
	}
}

func checkCompact(t testing.TB, src []byte) {
	t.Helper()
	var want bytes.Buffer
	wantErr := json.Compact(&want, src)
	got, ok := rawjson.AppendCompact([]byte("prefix"), src)
	switch {
	case ok && wantErr != nil:
		t.Fatalf("AppendCompact(%q) accepted what json.Compact refuses: %v", src, wantErr)
	case ok && string(got) != "prefix"+want.String():
		t.Fatalf("AppendCompact(%q) = %q, json.Compact gives %q", src, got[len("prefix"):], want.String())
	case !ok && wantErr == nil && len(src) < rawjson.MaxDepth:
		// Too shallow to be declined for depth: it should have been taken.
		t.Fatalf("AppendCompact(%q) declined valid JSON", src)
	}
}

// requestWith is a POST of body as a server hands it to postTurn: its
// length known, or unknown (-1) as for a chunked body.
func requestWith(body []byte, length int64) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/v1/sessions/s/turns", bytes.NewReader(body))
	r.ContentLength = length
	return r
}

type decoded struct {
	req                  turnRequest
	status               int
	code, detail, errMsg string
}

func decodeWith(decode func(*http.Request, *turnRequest) error, r *http.Request) decoded {
	var d decoded
	if err := decode(r, &d.req); err != nil {
		d.status, d.code, d.detail = problemFor(err)
		d.errMsg = err.Error()
		d.req = turnRequest{} // the handler reads no field after an error
	}
	return d
}

// checkDecode fails t unless decodeTurnRequest decodes body exactly as the
// reference does, for a body of known and of unknown length. It returns
// whether the fast scan took it.
func checkDecode(t testing.TB, body []byte) bool {
	t.Helper()
	want := decodeWith(referenceDecodeTurn, requestWith(body, int64(len(body))))
	for _, length := range []int64{int64(len(body)), -1} {
		got := decodeWith(decodeTurnRequest, requestWith(body, length))
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("decodeTurnRequest(%q) (length %d) differs from encoding/json\n got: %#v\nwant: %#v", body, length, got, want)
		}
	}
	var req turnRequest
	fast := scanTurnRequest(body, &req)
	if fast && want.status != 0 {
		t.Fatalf("scanTurnRequest accepted %q, which encoding/json refuses: %s", body, want.detail)
	}
	return fast
}

var awkwardBodies = []struct {
	body string
	fast bool
}{
	{`{"id":"t1","calls":[{"id":"a","name":"echo","arguments":{"text":"hi"}},{"id":"b","name":"search","arguments":{"q":"x","n":3}}],"mode":"concurrent","failure_policy":"isolate"}`, true},
	{" \t\r\n{ \"calls\" : [ { \"id\" : \"a\" , \"name\" : \"echo\" , \"arguments\" : { \"x\" : 1 ,\n \"y\" : [ ] } } ] } \n\t", true},
	{`{"calls":[]}`, true},
	{`{}`, true},
	{`{"calls":null}`, true},
	{`{"calls":[null]}`, true},
	{`{"calls":[{}]}`, true},
	{`{"id":null,"mode":null,"failure_policy":null,"calls":[{"id":null,"name":null,"arguments":null}]}`, true},
	{`{"calls":[{"id":"a","name":"n"}]}`, true},
	{`{"calls":[{"id":"a","name":"n","arguments":"text"}]}`, true},
	{`{"calls":[{"id":"a","name":"n","arguments":-1.5e+10}]}`, true},
	{`{"calls":[{"id":"a","name":"n","arguments":[true,false,null,"\u00e9\n",{"":{}}]}]}`, true},
	{`{"calls":[{"id":"a","name":"n","arguments":123456789012345678901234567890e999999}]}`, true},
	{"{\"calls\":[{\"id\":\"ünï ✓ 🚀\",\"name\":\"<>&\",\"arguments\":\"raw é in args \u2028\"}]}", true},
	// Not UTF-8: refused (400 malformed_json) by both paths.
	{"{\"calls\":[{\"id\":\"ünï ✓ 🚀\",\"name\":\"<>&\",\"arguments\":\"raw \xff in args \u2028\"}]}", false},
	{"{\"calls\":[{\"id\":\"a\xc3\",\"name\":\"n\"}]}", false},
	{`{"x":{"calls":[1],"id":5},"calls":[{"id":"a","name":"n","meta":{"id":5,"name":[]}}],"y":[{"z":null}],"":0}`, true},
	{`{"calls":[{"id":"a","name":"n","arguments":` + strings.Repeat("[", 600) + strings.Repeat("]", 600) + `}]}`, false},
	{`{"calls":[{"id":"a","name":"n","arguments":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}]}`, false},
	// Duplicates, case folding, escaped keys: encoding/json's.
	{`{"calls":[{"id":"a","name":"x"}],"calls":[{"name":"y"}]}`, false},
	{`{"calls":[{"id":"a","name":"x"},{"id":"b"}],"calls":[{"name":"y"}]}`, false},
	{`{"id":"a","id":"b","calls":[]}`, false},
	{`{"calls":[{"id":"a","id":"b","name":"n","arguments":1,"arguments":[2, 3]}]}`, false},
	{`{"Calls":[{"ID":"a","NAME":"n","Arguments":{}}],"MODE":"ordered","Failure_Policy":"isolate","Id":"t"}`, false},
	{`{"calls":[{"ID":"a","name":"n"}]}`, false},
	{`{"calls":[{"id":"a","Name":"n"}]}`, false},
	{`{"calls":[{"id":"a","name":"n","ARGUMENTS":{}}]}`, false},
	{`{"MODE":"ordered","calls":[]}`, false},
	{`{"failure_POLICY":"isolate","calls":[]}`, false},
	{"{\"call\u017f\":[{\"id\":\"a\"}]}", false},
	{`{"ca\u006cls":[{"\u0069d":"a"}]}`, false},
	{`{"id":"a\"b","calls":[{"id":"\u00e9","name":"\ud800"}]}`, false},
	{"{\"id\":\"invalid \xff utf-8\",\"calls\":[]}", false},
	{"{\"id\":\"surrogate \xed\xa0\x80\",\"calls\":[]}", false},
	{"{\"calls\":[],\"\xff\":1}", false},
	// Type errors.
	{`{"id":5}`, false},
	{`{"calls":{}}`, false},
	{`{"calls":"echo"}`, false},
	{`{"calls":[5]}`, false},
	{`{"calls":[[]]}`, false},
	{`{"calls":[{"id":true}]}`, false},
	{`{"calls":[{"name":{"a":1}}]}`, false},
	{`{"mode":["a"],"id":1}`, false},
	{`[1]`, false},
	{`"x"`, false},
	{`5`, false},
	{`null`, false},
	{`true`, false},
	// Syntax errors, empty and trailing data.
	{``, false},
	{" \n\t ", false},
	{`{`, false},
	{`{"calls": [`, false},
	{`{"calls":[]} {}`, false},
	{`{"calls":[]} x`, false},
	{`{"calls":[]}]`, false},
	{`{"calls":[]},`, false},
	{`{"calls":[],}`, false},
	{`{"calls":[{"arguments":}]}`, false},
	{`{"calls":[{"arguments":01}]}`, false},
	{`{"calls":[{"arguments":-}]}`, false},
	{`{"calls":[{"arguments":1e}]}`, false},
	{`{"calls":[{"arguments":nul}]}`, false},
	{`{"calls":[{"arguments":nullx}]}`, false},
	{`{"calls":nullx}`, false},
	{`{"calls":[{"arguments":"bad \q escape"}]}`, false},
	{"{\"calls\":[{\"id\":\"raw \x01 control\"}]}", false},
	{"\xef\xbb\xbf{\"calls\":[]}", false},
	{`{"calls" [] }`, false},
	{`{calls:[]}`, false},
	{`{"calls":[}`, false},
}

func TestDecodeTurnRequestMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, c := range awkwardBodies {
		t.Run(trimName(c.body), func(t *testing.T) {
			t.Parallel()
			if fast := checkDecode(t, []byte(c.body)); fast != c.fast {
				t.Errorf("fast path taken: %v, want %v", fast, c.fast)
			}
		})
	}
}

// TestDecodeTurnRequestKeepsArguments checks what the reference also
// gives: arguments verbatim, inner whitespace included; calls [] is not
// calls absent.
func TestDecodeTurnRequestKeepsArguments(t *testing.T) {
	t.Parallel()
	body := `{"calls":[{"id":"a","name":"n","arguments":{ "x" : [1, 2] }},{"id":"b","name":"m"},{"id":"c","name":"o","arguments":null}]}`
	var req turnRequest
	if err := decodeTurnRequest(requestWith([]byte(body), int64(len(body))), &req); err != nil {
		t.Fatal(err)
	}
	if got := string(req.Calls[0].Arguments); got != `{ "x" : [1, 2] }` {
		t.Errorf("arguments %q", got)
	}
	if req.Calls[1].Arguments != nil || string(req.Calls[2].Arguments) != "null" {
		t.Errorf("absent arguments %q, null arguments %q", req.Calls[1].Arguments, req.Calls[2].Arguments)
	}
	// Growing one call's arguments does not write over the next's.
	_ = append(req.Calls[0].Arguments, "xx"...)
	if req.Calls[2].Arguments == nil || string(req.Calls[2].Arguments) != "null" {
		t.Errorf("arguments share their capacity: %q", req.Calls[2].Arguments)
	}
	var empty, absent turnRequest
	if err := decodeTurnRequest(requestWith([]byte(`{"calls":[]}`), 12), &empty); err != nil || empty.Calls == nil {
		t.Errorf("calls [] decoded as %#v, %v", empty.Calls, err)
	}
	if err := decodeTurnRequest(requestWith([]byte(`{}`), 2), &absent); err != nil || absent.Calls != nil {
		t.Errorf("no calls decoded as %#v, %v", absent.Calls, err)
	}
}

// failingBody returns data, then err.
type failingBody struct {
	data []byte
	err  error
}

func (b *failingBody) Read(p []byte) (int, error) {
	if len(b.data) == 0 {
		return 0, b.err
	}
	n := copy(p, b.data)
	b.data = b.data[n:]
	return n, nil
}

func (b *failingBody) Close() error { return nil }

// TestDecodeTurnRequestReadErrors checks bodies that fail while read: the
// decoder meets the error where the streaming one would, or not at all.
func TestDecodeTurnRequestReadErrors(t *testing.T) {
	t.Parallel()
	valid := `{"calls":[{"id":"a","name":"n","arguments":{}}]}`
	for _, c := range []struct {
		name   string
		body   string
		err    error
		status int
	}{
		{"cut short", valid[:20], io.ErrUnexpectedEOF, 400},
		{"cut at the end", valid, io.ErrUnexpectedEOF, 400},
		{"cut after a syntax error", `{"calls":x`, io.ErrUnexpectedEOF, 400},
		{"cut after trailing data", valid + ` {`, io.ErrUnexpectedEOF, 400},
		{"cut in trailing spaces", valid + `   `, io.ErrUnexpectedEOF, 400},
		{"over the limit", valid[:30], &http.MaxBytesError{Limit: 30}, 413},
		{"over the limit after the value", valid, &http.MaxBytesError{Limit: int64(len(valid))}, 413},
		{"over the limit after trailing data", valid + `x`, &http.MaxBytesError{Limit: int64(len(valid) + 1)}, 400},
		{"timeout", valid[:10], errors.New("i/o timeout"), 400},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			req := func(length int64) *http.Request {
				r := requestWith(nil, length)
				r.Body = &failingBody{data: []byte(c.body), err: c.err}
				return r
			}
			want := decodeWith(referenceDecodeTurn, req(-1))
			if want.status != c.status {
				t.Fatalf("reference status %d, want %d (%s)", want.status, c.status, want.detail)
			}
			for _, length := range []int64{int64(len(c.body)), int64(len(c.body)) + 5, -1} {
				if got := decodeWith(decodeTurnRequest, req(length)); !reflect.DeepEqual(got, want) {
					t.Fatalf("length %d: got %#v\nwant %#v", length, got, want)
				}
			}
		})
	}
}

// TestDecodeTurnRequestThroughMaxBytesReader decodes behind the limit
// limitBody sets, as the server does.
func TestDecodeTurnRequestThroughMaxBytesReader(t *testing.T) {
	t.Parallel()
	body := []byte(`{"calls":[{"id":"a","name":"n","arguments":{"x":"` + strings.Repeat("y", 100) + `"}}]}`)
	for _, limit := range []int64{10, int64(len(body)) - 1, int64(len(body)), int64(len(body)) + 1} {
		req := func() *http.Request {
			r := requestWith(body, int64(len(body)))
			r.Body = http.MaxBytesReader(httptest.NewRecorder(), r.Body, limit)
			return r
		}
		want := decodeWith(referenceDecodeTurn, req())
		if got := decodeWith(decodeTurnRequest, req()); !reflect.DeepEqual(got, want) {
			t.Fatalf("limit %d: got %#v\nwant %#v", limit, got, want)
		}
	}
}

func FuzzDecodeTurnRequest(f *testing.F) {
	for _, c := range awkwardBodies {
		if len(c.body) < 1000 {
			f.Add([]byte(c.body))
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkDecode(t, body)
	})
}

func FuzzWriteTurnJSON(f *testing.F) {
	for i, s := range awkwards {
		if len(s) < 100 {
			f.Add(s, []byte(awkwardOutputs[i%len(awkwardOutputs)]), int64(i)*1e15)
		}
	}
	for _, out := range awkwardOutputs {
		if len(out) < 100 {
			f.Add("id", []byte(out), int64(0))
		}
	}
	f.Fuzz(func(t *testing.T, s string, output []byte, nanos int64) {
		checkCompact(t, output)
		tt := wireTurn()
		tt.ID, tt.Mode = s, dispatch.Mode(s)
		tt.SettledAt = time.Unix(0, nanos).In(berlin)
		r := &tt.Results[1]
		r.Output, r.Name, r.OutputID = output, s, s
		r.Error = &turn.CallError{Code: s, Message: s + s}
		r.StartedAt = time.Unix(nanos/7, nanos%1e9)
		checkTurnWire(t, tt)
	})
}

// wireRequest is a turn request of four small calls, as a frontend posts.
var wireRequest = []byte(`{"id":"t_01JGHIJKLMNOP","calls":[` +
	`{"id":"call_a","name":"echo","arguments":{"text":"hello"}},` +
	`{"id":"call_b","name":"search","arguments":{"query":"turnd design","limit":5}},` +
	`{"id":"call_c","name":"read_file","arguments":{"path":"README.md"}},` +
	`{"id":"call_d","name":"echo","arguments":{"text":"bye"}}` +
	`],"mode":"concurrent","failure_policy":"isolate"}`)

// discardWriter is a ResponseWriter that keeps nothing.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(int)             {}

func BenchmarkTurnResponse(b *testing.B) {
	tt := wireTurn()
	for i := range tt.Results {
		if tt.Results[i].Output == nil {
			tt.Results[i].Output = json.RawMessage(`{"ok":true}`)
			tt.Results[i].Error = nil
		}
	}
	for _, bc := range []struct {
		name  string
		write func(http.ResponseWriter, int, turn.Turn)
	}{{"encoding_json", referenceWriteTurn}, {"appender", writeTurnJSON}} {
		b.Run(bc.name, func(b *testing.B) {
			w := &discardWriter{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				bc.write(w, http.StatusOK, tt)
			}
		})
	}
}

// rewindBody is a request body that a benchmark resets without allocating.
type rewindBody struct{ *bytes.Reader }

func (rewindBody) Close() error { return nil }

func BenchmarkTurnRequest(b *testing.B) {
	for _, bc := range []struct {
		name   string
		decode func(*http.Request, *turnRequest) error
	}{{"encoding_json", referenceDecodeTurn}, {"scanner", decodeTurnRequest}} {
		b.Run(bc.name, func(b *testing.B) {
			rd := bytes.NewReader(wireRequest)
			r := requestWith(nil, int64(len(wireRequest)))
			r.Body = rewindBody{rd}
			b.ReportAllocs()
			for b.Loop() {
				rd.Reset(wireRequest)
				var req turnRequest
				if err := bc.decode(r, &req); err != nil || len(req.Calls) != 4 {
					b.Fatal(err)
				}
			}
		})
	}
}
