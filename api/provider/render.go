package provider

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/turnd/turnd/turn"
)

// answer is one call's rendered result, before it takes a format's shape.
type answer struct {
	index   int // the call's position in the turn
	callID  string
	name    string
	text    string
	isError bool
}

// answers renders every call of t once, in call order. A call whose index
// is in placeholders, or whose result is still pending, gets its
// placeholder; a call with no recorded result gets an error saying so. A
// call whose id repeats an earlier call's (refused duplicate_call_id) is
// left out: the providers take one result per id, and the first call's
// result is that one.
func answers(t turn.Turn, placeholders map[int]bool) []answer {
	byIndex := make(map[int]turn.Result, len(t.Results))
	for _, r := range t.Results {
		byIndex[r.Index] = r
	}
	seen := make(map[string]bool, len(t.Calls))
	out := make([]answer, 0, len(t.Calls))
	for i, c := range t.Calls {
		if seen[c.ID] {
			continue
		}
		seen[c.ID] = true
		a := answer{index: i, callID: c.ID, name: c.Name}
		r, ok := byIndex[i]
		switch {
		case placeholders[i] || (ok && r.Status == turn.CallPending):
			a.text = placeholderText(c)
		case !ok:
			a.text, a.isError = "Error (no_result): turnd has no result recorded for this call.", true
		default:
			a.text, a.isError = resultText(r)
		}
		out = append(out, a)
	}
	return out
}

// placeholderText is what the model reads for a call whose result will
// arrive later (see FollowUp).
func placeholderText(c turn.Call) string {
	return fmt.Sprintf("The result of this call (id %s, tool %s) is not available yet: it is waiting for an external system. "+
		"It will be sent later in a user message that names this call id. Do not call the tool again for it.", c.ID, c.Name)
}

// resultText is what the model reads for a result: the projected output of
// a call that succeeded, and otherwise a line naming what happened with its
// error code and message (then the output, when the failed call left one).
func resultText(r turn.Result) (text string, isError bool) {
	out := outputText(r.Output)
	var what string
	switch r.Status {
	case turn.CallOK:
		if out == "" {
			return "(no output)", false
		}
		return out, false
	case turn.CallPending:
		return "The result of this call is not available yet.", true
	case turn.CallRejected:
		// A person declined to run the call: its output says so and why,
		// and is what the model reads (not a tool error).
		return out, false
	case turn.CallRefused:
		what = "Refused"
	case turn.CallCancelled:
		what = "Cancelled"
	case turn.CallTimedOut:
		what = "Timed out"
	default:
		what = "Error"
	}
	var b strings.Builder
	b.WriteString(what)
	if r.Error != nil {
		if r.Error.Code != "" {
			fmt.Fprintf(&b, " (%s)", r.Error.Code)
		}
		if r.Error.Message != "" {
			b.WriteString(": ")
			b.WriteString(r.Error.Message)
		}
	}
	if out != "" {
		b.WriteString("\n")
		b.WriteString(out)
	}
	return b.String(), true
}

// outputText is a projected output as text: a JSON string's value, any
// other JSON value's text, nothing for null.
func outputText(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err == nil {
			return s
		}
	}
	return string(raw)
}

// Wire shapes of the renderings.

type chatToolMessage struct {
	Role       string `json:"role"`
	ToolCallID string `json:"tool_call_id"`
	Content    string `json:"content"`
}

type functionCallOutput struct {
	Type   string `json:"type"`
	CallID string `json:"call_id"`
	Output string `json:"output"`
}

type textBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type toolResultBlock struct {
	Type      string      `json:"type"`
	ToolUseID string      `json:"tool_use_id"`
	Content   []textBlock `json:"content"`
	IsError   bool        `json:"is_error"`
}

type anthropicMessage struct {
	Role    string `json:"role"`
	Content any    `json:"content"`
}

type chatUserMessage struct {
	Role    string      `json:"role"`
	Content []textBlock `json:"content"`
}

type responsesMessage struct {
	Type    string      `json:"type"`
	Role    string      `json:"role"`
	Content []textBlock `json:"content"`
}

// Results renders the results of t as the frontend appends them to its
// next request, one per call in call order (see answers):
//
//   - openai.chat: an array of {"role":"tool","tool_call_id","content"};
//   - openai.responses: an array of {"type":"function_call_output","call_id","output"};
//   - anthropic.messages: one {"role":"user","content":[tool_result…]}
//     message whose blocks carry is_error.
//
// placeholders holds the call indexes to render as placeholders.
func (f Format) Results(t turn.Turn, placeholders map[int]bool) any {
	as := answers(t, placeholders)
	switch f {
	case OpenAIChat:
		out := make([]chatToolMessage, len(as))
		for i, a := range as {
			out[i] = chatToolMessage{Role: "tool", ToolCallID: a.callID, Content: a.text}
		}
		return out
	case OpenAIResponses:
		out := make([]functionCallOutput, len(as))
		for i, a := range as {
			out[i] = functionCallOutput{Type: "function_call_output", CallID: a.callID, Output: a.text}
		}
		return out
	default:
		blocks := make([]toolResultBlock, len(as))
		for i, a := range as {
			blocks[i] = toolResultBlock{Type: "tool_result", ToolUseID: a.callID, Content: []textBlock{{Type: "text", Text: a.text}}, IsError: a.isError}
		}
		return anthropicMessage{Role: "user", Content: blocks}
	}
}

// FollowUp renders the real results of the calls at the indexes parked,
// which an earlier rendering answered with placeholders: the providers
// take a tool result only right after its call, so this is a user message
// with one text part per call, naming the call's id and tool:
//
//   - openai.chat: an array of one {"role":"user","content":[{"type":"text","text"}…]};
//   - openai.responses: an array of one {"type":"message","role":"user","content":[{"type":"input_text","text"}…]};
//   - anthropic.messages: one {"role":"user","content":[{"type":"text","text"}…]}.
func (f Format) FollowUp(t turn.Turn, parked []int) any {
	want := make(map[int]bool, len(parked))
	for _, i := range parked {
		want[i] = true
	}
	var texts []string
	for _, a := range answers(t, nil) {
		if want[a.index] {
			texts = append(texts, fmt.Sprintf("Result of the earlier call %s (tool %s), which was pending:\n%s", a.callID, a.name, a.text))
		}
	}
	partType := "text"
	if f == OpenAIResponses {
		partType = "input_text"
	}
	parts := make([]textBlock, len(texts))
	for i, s := range texts {
		parts[i] = textBlock{Type: partType, Text: s}
	}
	switch f {
	case OpenAIChat:
		return []chatUserMessage{{Role: "user", Content: parts}}
	case OpenAIResponses:
		return []responsesMessage{{Type: "message", Role: "user", Content: parts}}
	default:
		return anthropicMessage{Role: "user", Content: parts}
	}
}
