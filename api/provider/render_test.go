package provider

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/turnd/turnd/turn"
)

// sample is a settled turn with one result of every kind, a duplicate id
// and a call with no result recorded.
func sample() turn.Turn {
	calls := []turn.Call{
		{ID: "ok", Name: "echo"}, {ID: "json", Name: "search"}, {ID: "err", Name: "flaky"},
		{ID: "ref", Name: "nope"}, {ID: "ok", Name: "echo"}, {ID: "late", Name: "approval"},
		{ID: "gone", Name: "sleep"}, {ID: "lost", Name: "now"}, {ID: "empty", Name: "now"},
	}
	results := []turn.Result{
		{Index: 0, CallID: "ok", Status: turn.CallOK, Output: json.RawMessage(`"hello\nworld"`)},
		{Index: 1, CallID: "json", Status: turn.CallOK, Output: json.RawMessage(`{"hits":["a"]}`)},
		{Index: 2, CallID: "err", Status: turn.CallFailed, Error: &turn.CallError{Code: "tool_unavailable", Message: "upstream answered 503 (after 3 attempts)"}},
		{Index: 3, CallID: "ref", Status: turn.CallRefused, Error: &turn.CallError{Code: "unknown_tool", Message: `no tool named "nope" is registered`}},
		{Index: 4, CallID: "ok", Status: turn.CallRefused, Error: &turn.CallError{Code: "duplicate_call_id", Message: "appears earlier"}},
		{Index: 5, CallID: "late", Status: turn.CallTimedOut, Error: &turn.CallError{Code: "completion_timeout", Message: "the completion deadline passed"}},
		{Index: 6, CallID: "gone", Status: turn.CallCancelled, Error: &turn.CallError{Code: "cancelled", Message: "the turn was cancelled"}},
		{Index: 8, CallID: "empty", Status: turn.CallOK, Output: json.RawMessage(`null`)},
	}
	return turn.Turn{SessionID: "s", ID: "t", Status: turn.StatusCompleted, Calls: calls, Results: results}
}

func TestAnswers(t *testing.T) {
	t.Parallel()
	got := answers(sample(), nil)
	want := []struct {
		id, text string
		isError  bool
	}{
		{"ok", "hello\nworld", false},
		{"json", `{"hits":["a"]}`, false},
		{"err", "Error (tool_unavailable): upstream answered 503 (after 3 attempts)", true},
		{"ref", `Refused (unknown_tool): no tool named "nope" is registered`, true},
		{"late", "Timed out (completion_timeout): the completion deadline passed", true},
		{"gone", "Cancelled (cancelled): the turn was cancelled", true},
		{"lost", "Error (no_result): turnd has no result recorded for this call.", true},
		{"empty", "(no output)", false},
	}
	if len(got) != len(want) {
		t.Fatalf("%d answers, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		if got[i].callID != w.id || got[i].text != w.text || got[i].isError != w.isError {
			t.Errorf("answer %d = %+v, want %+v", i, got[i], w)
		}
	}
}

func TestPlaceholdersAndFollowUp(t *testing.T) {
	t.Parallel()
	tn := sample()
	parked := []int{5, 8}
	as := answers(tn, map[int]bool{5: true, 8: true})
	for _, a := range as {
		placeholder := strings.Contains(a.text, "not available yet")
		if placeholder != (a.callID == "late" || a.callID == "empty") {
			t.Errorf("%s: placeholder %v: %q", a.callID, placeholder, a.text)
		}
		if placeholder && (!strings.Contains(a.text, a.callID) || a.isError) {
			t.Errorf("%s: a placeholder names its call and is no error: %+v", a.callID, a)
		}
	}
	// A result still pending renders as a placeholder even unasked.
	pending := sample()
	pending.Results[0].Status = turn.CallPending
	if a := answers(pending, nil)[0]; !strings.Contains(a.text, "not available yet") {
		t.Errorf("pending result rendered as %q", a.text)
	}

	for _, f := range Formats() {
		b, err := json.Marshal(f.FollowUp(tn, parked))
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		for _, wantText := range []string{"earlier call late (tool approval)", "Timed out (completion_timeout)", "earlier call empty (tool now)", "(no output)"} {
			if !strings.Contains(s, wantText) {
				t.Errorf("%s follow-up %s lacks %q", f, s, wantText)
			}
		}
		if strings.Contains(s, "hello") {
			t.Errorf("%s follow-up %s carries a call that was not parked", f, s)
		}
		if !strings.Contains(s, `"role":"user"`) {
			t.Errorf("%s follow-up %s is not a user message", f, s)
		}
	}
}

func TestResultsShapes(t *testing.T) {
	t.Parallel()
	tn := sample()
	tests := []struct {
		format Format
		want   string // prefix of the JSON
	}{
		{OpenAIChat, `[{"role":"tool","tool_call_id":"ok","content":"hello\nworld"},{"role":"tool","tool_call_id":"json","content":"{\"hits\":[\"a\"]}"}`},
		{OpenAIResponses, `[{"type":"function_call_output","call_id":"ok","output":"hello\nworld"},{"type":"function_call_output","call_id":"json"`},
		{AnthropicMessages, `{"role":"user","content":[{"type":"tool_result","tool_use_id":"ok","content":[{"type":"text","text":"hello\nworld"}],"is_error":false},`},
	}
	for _, tt := range tests {
		b, err := json.Marshal(tt.format.Results(tn, nil))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(b), tt.want) {
			t.Errorf("%s:\n%s\nwant prefix\n%s", tt.format, b, tt.want)
		}
		if n := strings.Count(string(b), `"ok"`); n != 1 {
			t.Errorf("%s: the duplicated id ok is answered %d times", tt.format, n)
		}
	}
}

func TestTools(t *testing.T) {
	t.Parallel()
	tools := []Tool{
		{Name: "search", Description: "Search the docs", InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)},
		{Name: "now"},
	}
	tests := map[Format]string{
		OpenAIChat: `[{"type":"function","function":{"name":"search","description":"Search the docs","parameters":{"type":"object","properties":{"q":{"type":"string"}}}}},` +
			`{"type":"function","function":{"name":"now","parameters":{"type":"object"}}}]`,
		OpenAIResponses: `[{"type":"function","name":"search","description":"Search the docs","parameters":{"type":"object","properties":{"q":{"type":"string"}}},"strict":false},` +
			`{"type":"function","name":"now","parameters":{"type":"object"},"strict":false}]`,
		AnthropicMessages: `[{"name":"search","description":"Search the docs","input_schema":{"type":"object","properties":{"q":{"type":"string"}}}},` +
			`{"name":"now","input_schema":{"type":"object"}}]`,
	}
	for f, want := range tests {
		b, err := json.Marshal(f.Tools(tools))
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != want {
			t.Errorf("%s:\n%s\nwant\n%s", f, b, want)
		}
	}
}

// TestRejectedAnswer: the model reads a rejected call's output as its
// result, not as a tool error.
func TestRejectedAnswer(t *testing.T) {
	t.Parallel()
	tn := turn.Turn{Calls: []turn.Call{{ID: "rm", Name: "rm"}}, Results: []turn.Result{
		{Index: 0, CallID: "rm", Status: turn.CallRejected, Output: json.RawMessage(`{"message":"not /etc","rejected":true}`)},
	}}
	got := answers(tn, nil)
	if len(got) != 1 || got[0].text != `{"message":"not /etc","rejected":true}` || got[0].isError {
		t.Fatalf("rejected answer %+v", got)
	}
}
