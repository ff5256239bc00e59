package api_test

import (
	"fmt"
	"strings"
	"testing"
)

// TestBadBytes holds both stores to one answer for request bytes a database
// cannot keep (invalid UTF-8, NUL): a 400 or a 422 naming the field, and no
// state change, never a 500.
func TestBadBytes(t *testing.T) {
	t.Parallel()
	eachStack(t, func(t *testing.T, s *stack) {
		const bad = "\xff\xfe"
		var sessions []string
		for i, tc := range []struct {
			name   string
			path   string
			body   string
			status int
			code   string
			field  string // in the detail, for 422
		}{
			{"invalid UTF-8 in arguments", "/v1/sessions/{S}/turns", `{"calls":[{"id":"a","name":"echo","arguments":{"x":"` + bad + `"}}]}`, 400, "malformed_json", ""},
			{"invalid UTF-8 in an arguments key", "/v1/sessions/{S}/turns", `{"calls":[{"id":"a","name":"echo","arguments":{"` + bad + `":1}}]}`, 400, "malformed_json", ""},
			{"invalid UTF-8 in a call id", "/v1/sessions/{S}/turns", `{"calls":[{"id":"a` + bad + `","name":"echo"}]}`, 400, "malformed_json", ""},
			{"invalid UTF-8 in a call name", "/v1/sessions/{S}/turns", `{"calls":[{"id":"a","name":"echo` + bad + `"}]}`, 400, "malformed_json", ""},
			{"invalid UTF-8 in a turn id", "/v1/sessions/{S}/turns", `{"id":"t` + bad + `","calls":[{"id":"a","name":"echo"}]}`, 400, "malformed_json", ""},
			{"NUL in a call name", "/v1/sessions/{S}/turns", `{"calls":[{"id":"a","name":"echo\u0000"}]}`, 422, "invalid_request", "calls[0].name"},
			{"NUL in a call id", "/v1/sessions/{S}/turns", `{"calls":[{"id":"a\u0000","name":"echo"}]}`, 422, "invalid_request", "calls[0].id"},
			{"NUL in a turn id", "/v1/sessions/{S}/turns", `{"id":"t\u0000","calls":[{"id":"a","name":"echo"}]}`, 422, "invalid_request", "id"},
			{"NUL in arguments", "/v1/sessions/{S}/turns", `{"calls":[{"id":"a","name":"echo","arguments":{"x":"\u0000"}}]}`, 422, "invalid_request", "calls[0].arguments"},
			{"NUL in an arguments key", "/v1/sessions/{S}/turns", `{"calls":[{"id":"a","name":"echo","arguments":{"\u0000":1}}]}`, 422, "invalid_request", "calls[0].arguments"},
			{"invalid UTF-8 in metadata", "/v1/sessions", `{"id":"{S}","metadata":{"k":"` + bad + `"}}`, 400, "malformed_json", ""},
			{"NUL in metadata", "/v1/sessions", `{"id":"{S}","metadata":{"k":"\u0000"}}`, 422, "invalid_request", "metadata"},
			{"NUL in a session id", "/v1/sessions", `{"id":"{S}\u0000"}`, 422, "invalid_request", "id"},
			{"invalid UTF-8 in a session id", "/v1/sessions", `{"id":"{S}` + bad + `"}`, 400, "malformed_json", ""},
			{"invalid UTF-8 in an unknown field", "/v1/sessions", `{"id":"{S}","note":"` + bad + `"}`, 400, "malformed_json", ""},
			{"NUL in a tool grant", "/v1/sessions", `{"id":"{S}","tools":["echo\u0000"]}`, 422, "invalid_request", "tools[0]"},
			{"NUL in a callback URL", "/v1/sessions", `{"id":"{S}","callback_url":"https://hooks.example.com/\u0000"}`, 422, "invalid_request", "callback_url"},
			{"NUL in the path's session id", "/v1/sessions/{S}%00/turns", `{"calls":[{"id":"a","name":"echo"}]}`, 422, "invalid_request", "session_id"},
			{"invalid UTF-8 in the path's session id", "/v1/sessions/{S}%FF/turns", `{"calls":[{"id":"a","name":"echo"}]}`, 422, "invalid_request", "session_id"},
			{"openai.chat: invalid UTF-8", "/v1/sessions/{S}/turns?format=openai.chat", `{"role":"assistant","tool_calls":[{"id":"a` + bad + `","type":"function","function":{"name":"echo","arguments":"{}"}}]}`, 400, "malformed_json", ""},
			{"openai.chat: NUL in a name", "/v1/sessions/{S}/turns?format=openai.chat", `{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"echo\u0000","arguments":"{}"}}]}`, 422, "invalid_request", "calls[0].name"},
			{"openai.chat: NUL in arguments", "/v1/sessions/{S}/turns?format=openai.chat", `{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"echo","arguments":"{\"x\":\"\\u0000\"}"}}]}`, 422, "invalid_request", "calls[0].arguments"},
			{"openai.responses: NUL in a call id", "/v1/sessions/{S}/turns?format=openai.responses", `{"output":[{"type":"function_call","call_id":"a\u0000","name":"echo","arguments":"{}"}]}`, 422, "invalid_request", "calls[0].id"},
			{"anthropic.messages: NUL in a tool name", "/v1/sessions/{S}/turns?format=anthropic.messages", `{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"echo\u0000","input":{}}]}`, 422, "invalid_request", "calls[0].name"},
			{"anthropic.messages: invalid UTF-8 in input", "/v1/sessions/{S}/turns?format=anthropic.messages", `{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"echo","input":{"x":"` + bad + `"}}]}`, 400, "malformed_json", ""},
			{"anthropic.messages: NUL in input", "/v1/sessions/{S}/turns?format=anthropic.messages", `{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"echo","input":{"x":"\u0000"}}]}`, 422, "invalid_request", "calls[0].arguments"},
			{"anthropic.messages: NUL in a turn id", "/v1/sessions/{S}/turns?format=anthropic.messages&turn_id=t%00", `{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"echo","input":{}}]}`, 422, "invalid_request", "id"},
		} {
			sid := fmt.Sprintf("s%d", i)
			sessions = append(sessions, sid)
			t.Run(tc.name, func(t *testing.T) {
				r := s.do("POST", strings.ReplaceAll(tc.path, "{S}", sid), []byte(strings.ReplaceAll(tc.body, "{S}", sid)))
				if r.status != tc.status {
					t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
				}
				if got := r.code(t); got != tc.code {
					t.Fatalf("code %q, want %q: %s", got, tc.code, r.body)
				}
				if tc.field != "" && !strings.Contains(string(r.body), tc.field+":") {
					t.Fatalf("the detail does not name %s: %s", tc.field, r.body)
				}
			})
		}
		for _, path := range []string{"/v1/sessions/s%00", "/v1/sessions/s%FF/turns/t", "/v1/sessions/s/turns/t%00", "/v1/sessions/s%FF/ledger", "/v1/outputs/o%00", "/v1/tools?session_id=%FF", "/v1/complete/ck_%00"} {
			if r := s.do("GET", path, nil); r.status != 404 || r.code(t) != "not_found" {
				t.Errorf("GET %s: %d %s, want 404 not_found", path, r.status, r.body)
			}
		}
		for _, sid := range sessions {
			if r := s.do("GET", "/v1/sessions/"+sid, nil); r.status != 404 {
				t.Errorf("a refused request created session %s: %d %s", sid, r.status, r.body)
			}
		}
	})
}

// TestBadBytesInCompletions: a delivery a store cannot keep is refused and
// leaves the call pending, on both stores.
func TestBadBytesInCompletions(t *testing.T) {
	t.Parallel()
	eachStack(t, func(t *testing.T, s *stack) {
		r := s.do("POST", "/v1/sessions/s/turns", `{"id":"t","calls":[{"id":"d","name":"deferred","arguments":{"deadline":"1h"}}]}`)
		if r.status != 202 {
			t.Fatalf("post: %d %s", r.status, r.body)
		}
		key := (<-s.tools.keys)[0]
		for _, tc := range []struct {
			name   string
			body   string
			status int
			code   string
			field  string
		}{
			{"invalid UTF-8 in output", `{"output":{"x":"` + "\xff" + `"}}`, 400, "malformed_json", ""},
			{"NUL in output", `{"output":{"x":"\u0000"}}`, 422, "invalid_request", "output"},
			{"NUL in error code", `{"error":{"code":"x\u0000","message":"m"}}`, 422, "invalid_request", "error.code"},
			{"NUL in error message", `{"error":{"code":"x","message":"m\u0000"}}`, 422, "invalid_request", "error.message"},
			{"invalid UTF-8 in error message", `{"error":{"code":"x","message":"` + "\xc3" + `"}}`, 400, "malformed_json", ""},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := s.do("POST", "/v1/complete/"+key, []byte(tc.body))
				if r.status != tc.status || r.code(t) != tc.code {
					t.Fatalf("%d %s, want %d %s", r.status, r.body, tc.status, tc.code)
				}
				if tc.field != "" && !strings.Contains(string(r.body), tc.field+":") {
					t.Fatalf("the detail does not name %s: %s", tc.field, r.body)
				}
			})
		}
		st := s.do("GET", "/v1/complete/"+key, nil)
		if st.status != 200 || !strings.Contains(string(st.body), `"pending"`) {
			t.Fatalf("after refused deliveries: %d %s", st.status, st.body)
		}
	})
}
