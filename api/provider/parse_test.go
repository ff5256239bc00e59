package provider

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/turnd/turnd/turn"
)

func TestParseFormat(t *testing.T) {
	t.Parallel()
	for _, f := range Formats() {
		got, err := ParseFormat(string(f))
		if err != nil || got != f {
			t.Errorf("ParseFormat(%q) = %q, %v", f, got, err)
		}
	}
	for _, bad := range []string{"", "openai", "OPENAI.CHAT", "anthropic", "turnd"} {
		_, err := ParseFormat(bad)
		var ue *UnknownFormatError
		if !errors.As(err, &ue) {
			t.Fatalf("ParseFormat(%q): %v, want an UnknownFormatError", bad, err)
		}
		for _, f := range Formats() {
			if !strings.Contains(err.Error(), string(f)) {
				t.Errorf("ParseFormat(%q) error %q does not list %s", bad, err, f)
			}
		}
	}
}

func TestParse(t *testing.T) {
	t.Parallel()
	call := func(id, name, args string) turn.Call {
		c := turn.Call{ID: id, Name: name}
		if args != "" {
			c.Arguments = json.RawMessage(args)
		}
		return c
	}
	tests := []struct {
		name   string
		format Format
		body   string
		want   Parsed
	}{
		{"chat completion", OpenAIChat,
			`{"id":"chatcmpl-9","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":null,
			"tool_calls":[{"id":"c1","type":"function","function":{"name":"echo","arguments":"{\"text\":\"hi\"}"}},
			{"id":"c2","type":"function","function":{"name":"now","arguments":""}}]}},{"index":1,"message":{"role":"assistant","content":"ignored"}}]}`,
			Parsed{ID: "chatcmpl-9", Calls: []turn.Call{call("c1", "echo", `{"text":"hi"}`), call("c2", "now", "")}}},
		{"chat message", OpenAIChat,
			`{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"echo","arguments":" {\"a\": 1} "}}]}`,
			Parsed{Calls: []turn.Call{call("c1", "echo", `{"a": 1}`)}}},
		{"chat unparseable arguments kept as a string", OpenAIChat,
			`{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"echo","arguments":"{\"a\": "}}]}`,
			Parsed{Calls: []turn.Call{call("c1", "echo", `"{\"a\": "`)}}},
		{"responses response", OpenAIResponses,
			`{"id":"resp_1","object":"response","output":[{"type":"reasoning","id":"rs_1","summary":[]},
			{"type":"function_call","id":"fc_1","call_id":"call_1","name":"echo","arguments":"{\"text\":\"a\"}","status":"completed"},
			{"type":"message","role":"assistant","content":[]},
			{"type":"function_call","id":"fc_2","call_id":"call_2","name":"now","arguments":"{}"}]}`,
			Parsed{ID: "resp_1", Calls: []turn.Call{call("call_1", "echo", `{"text":"a"}`), call("call_2", "now", `{}`)}}},
		{"responses output array", OpenAIResponses,
			`[{"type":"function_call","call_id":"call_1","name":"echo","arguments":"[1,"}]`,
			Parsed{Calls: []turn.Call{call("call_1", "echo", `"[1,"`)}}},
		{"anthropic response", AnthropicMessages,
			`{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"Let me look."},
			{"type":"tool_use","id":"toolu_1","name":"echo","input":{"text":"hi"}},{"type":"tool_use","id":"toolu_2","name":"now","input":{}}],"stop_reason":"tool_use"}`,
			Parsed{ID: "msg_1", Calls: []turn.Call{call("toolu_1", "echo", `{"text":"hi"}`), call("toolu_2", "now", `{}`)}}},
		{"anthropic message param", AnthropicMessages,
			`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"now"}]}`,
			Parsed{Calls: []turn.Call{call("toolu_1", "now", "")}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := tt.format.Parse([]byte(tt.body))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Parse =\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

func TestParseRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		format Format
		body   string
		want   string // in the error; empty for ErrNoToolCalls
	}{
		{"chat not JSON", OpenAIChat, `{"role":`, "not valid JSON"},
		{"chat array", OpenAIChat, `[]`, "not a JSON object"},
		{"chat empty body", OpenAIChat, ``, "not a JSON object"},
		{"chat user message", OpenAIChat, `{"role":"user","content":"hi"}`, `role "user"`},
		{"chat no role", OpenAIChat, `{"tool_calls":[]}`, "no role"},
		{"chat empty choices", OpenAIChat, `{"id":"x","choices":[]}`, "choices is empty"},
		{"chat choice without message", OpenAIChat, `{"id":"x","choices":[{"index":0}]}`, "choices[0].message"},
		{"chat arguments object", OpenAIChat, `{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"n","arguments":{}}}]}`, "arguments"},
		{"chat call without id", OpenAIChat, `{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"n","arguments":"{}"}}]}`, "no id"},
		{"chat call without name", OpenAIChat, `{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"arguments":"{}"}}]}`, "no name"},
		{"chat call without function", OpenAIChat, `{"role":"assistant","tool_calls":[{"id":"c","type":"function"}]}`, "no function"},
		{"chat tool_calls object", OpenAIChat, `{"role":"assistant","tool_calls":{}}`, "tool_calls"},
		{"chat text only", OpenAIChat, `{"role":"assistant","content":"Hello"}`, ""},
		{"responses scalar", OpenAIResponses, `"x"`, "neither"},
		{"responses without output", OpenAIResponses, `{"id":"resp_1"}`, "no output array"},
		{"responses item not object", OpenAIResponses, `[1]`, "output[0] is not an object"},
		{"responses item without type", OpenAIResponses, `[{"call_id":"c"}]`, "no type"},
		{"responses call without call_id", OpenAIResponses, `[{"type":"function_call","name":"n","arguments":"{}"}]`, "no call_id"},
		{"responses call without name", OpenAIResponses, `[{"type":"function_call","call_id":"c","arguments":"{}"}]`, "no name"},
		{"responses arguments number", OpenAIResponses, `[{"type":"function_call","call_id":"c","name":"n","arguments":1}]`, "arguments"},
		{"responses only messages", OpenAIResponses, `{"id":"r","output":[{"type":"message","role":"assistant","content":[]}]}`, ""},
		{"anthropic array", AnthropicMessages, `[]`, "not a JSON object"},
		{"anthropic user message", AnthropicMessages, `{"role":"user","content":[]}`, `role "user"`},
		{"anthropic no content", AnthropicMessages, `{"role":"assistant"}`, "content is missing"},
		{"anthropic block without type", AnthropicMessages, `{"role":"assistant","content":[{"id":"t"}]}`, "no type"},
		{"anthropic tool_use without id", AnthropicMessages, `{"role":"assistant","content":[{"type":"tool_use","name":"n","input":{}}]}`, "no id"},
		{"anthropic tool_use without name", AnthropicMessages, `{"role":"assistant","content":[{"type":"tool_use","id":"t","input":{}}]}`, "no name"},
		{"anthropic text content", AnthropicMessages, `{"role":"assistant","content":"Hello"}`, ""},
		{"anthropic text blocks", AnthropicMessages, `{"id":"msg","type":"message","role":"assistant","content":[{"type":"text","text":"Hi"}]}`, ""},
		// Another provider's body under the wrong format is refused, not
		// read as a message without calls.
		{"anthropic response as chat", OpenAIChat, `{"id":"msg","type":"message","role":"assistant","content":[{"type":"tool_use","id":"t","name":"n","input":{}}]}`, `"type": "message"`},
		{"anthropic message as chat", OpenAIChat, `{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"n","input":{}}]}`, "content[0] is a tool_use block"},
		{"anthropic response in choices", OpenAIChat, `{"id":"x","choices":[{"message":{"type":"message","role":"assistant","content":[]}}]}`, "choices[0].message has"},
		{"chat message as anthropic", AnthropicMessages, `{"role":"assistant","content":"x","tool_calls":[{"id":"c","type":"function","function":{"name":"n","arguments":"{}"}}]}`, "tool_calls"},
		{"chat response as anthropic", AnthropicMessages, `{"id":"c","role":"assistant","content":"x","choices":[{}]}`, "choices"},
		{"responses as anthropic", AnthropicMessages, `{"id":"r","role":"assistant","content":[],"output":[]}`, "output"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := tt.format.Parse([]byte(tt.body))
			if tt.want == "" {
				if !errors.Is(err, ErrNoToolCalls) {
					t.Fatalf("Parse = %+v, %v; want ErrNoToolCalls", p, err)
				}
				return
			}
			var be *BodyError
			if !errors.As(err, &be) {
				t.Fatalf("Parse = %+v, %v; want a BodyError", p, err)
			}
			msg := err.Error()
			if !strings.Contains(msg, tt.want) || !strings.Contains(msg, string(tt.format)) || !strings.Contains(msg, "expected") {
				t.Errorf("error %q should name the format, say %q and what was expected", msg, tt.want)
			}
		})
	}
}

func TestParseUnsupportedCalls(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		format Format
		body   string
		ids    []string
	}{
		{"chat custom calls", OpenAIChat, `{"role":"assistant","tool_calls":[{"id":"x","type":"custom","custom":{"name":"grammar","input":"x"}},{"id":"c1","type":"function","function":{"name":"now","arguments":"{}"}},{"type":"custom"}]}`, []string{"x", "?"}},
		{"responses custom calls", OpenAIResponses, `[{"type":"function_call","call_id":"f","name":"now","arguments":"{}"},{"type":"custom_tool_call","call_id":"y","name":"g","input":"a"}]`, []string{"y"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := tt.format.Parse([]byte(tt.body))
			var ue *UnsupportedCallError
			if !errors.As(err, &ue) || !reflect.DeepEqual(ue.IDs, tt.ids) {
				t.Fatalf("Parse = %+v, %v; want an UnsupportedCallError for %v", p, err, tt.ids)
			}
			if !strings.Contains(err.Error(), "answer these yourself") {
				t.Errorf("error %q should tell the frontend what to do", err)
			}
		})
	}
}

// FuzzParse: no body makes a parser panic, and whatever a parser accepts
// is a turn the service can record: calls with ids and names and arguments
// that are valid JSON.
func FuzzParse(f *testing.F) {
	seeds := []string{
		`{"id":"chatcmpl-9","choices":[{"message":{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"echo","arguments":"{\"a\":1}"}}]}}]}`,
		`{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"echo","arguments":"{bad"}}]}`,
		`{"id":"resp_1","output":[{"type":"function_call","call_id":"c","name":"n","arguments":"{}"}]}`,
		`[{"type":"function_call","call_id":"c","name":"n","arguments":""}]`,
		`{"id":"msg_1","role":"assistant","content":[{"type":"tool_use","id":"t","name":"n","input":{"x":[1,2]}}]}`,
		`{"role":"assistant","content":"hi"}`,
		`null`, `[]`, `{}`, ``,
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		for _, format := range Formats() {
			p, err := format.Parse([]byte(body))
			if err != nil {
				var be *BodyError
				if !errors.As(err, &be) && !errors.Is(err, ErrNoToolCalls) {
					t.Fatalf("%s: unexpected error type %T: %v", format, err, err)
				}
				continue
			}
			if len(p.Calls) == 0 {
				t.Fatalf("%s: accepted a body without calls", format)
			}
			for _, c := range p.Calls {
				if c.ID == "" || c.Name == "" {
					t.Fatalf("%s: accepted a call without id or name: %+v", format, c)
				}
				if len(c.Arguments) > 0 && !json.Valid(c.Arguments) {
					t.Fatalf("%s: arguments %q are not valid JSON", format, c.Arguments)
				}
			}
		}
	})
}
