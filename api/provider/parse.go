package provider

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/turnd/turnd/turn"
)

// Parsed is what a provider body carries for turnd.
type Parsed struct {
	// ID is the provider's id of the message or response (chatcmpl-…,
	// resp_…, msg_…); empty when the body has none (a bare message).
	ID string
	// Calls are the tool calls, in the model's order. Arguments are JSON:
	// the parsed arguments string (OpenAI) or the input object (Anthropic);
	// an OpenAI arguments string that is not JSON is kept as a JSON string,
	// which the turn service refuses as invalid_arguments.
	Calls []turn.Call
}

// Parse reads a body in format f. A body of another shape is a
// *BodyError; a well-formed message without tool calls is ErrNoToolCalls.
func (f Format) Parse(body []byte) (Parsed, error) {
	var (
		p   Parsed
		err error
	)
	switch f {
	case OpenAIChat:
		p, err = parseChat(body)
	case OpenAIResponses:
		p, err = parseResponses(body)
	case AnthropicMessages:
		p, err = parseMessages(body)
	default:
		return Parsed{}, &UnknownFormatError{Name: string(f)}
	}
	if err != nil {
		var be *BodyError
		if errors.As(err, &be) {
			be.Format = f
		}
		return Parsed{}, err
	}
	if len(p.Calls) == 0 {
		return Parsed{}, ErrNoToolCalls
	}
	return p, nil
}

// bodyErr is a BodyError whose Format Parse fills in.
func bodyErr(format string, a ...any) error {
	return &BodyError{Reason: fmt.Sprintf(format, a...)}
}

// decode unmarshals one JSON value into v, turning decoding errors into
// BodyErrors that name the offending field.
func decode(data []byte, v any, where string) error {
	err := json.Unmarshal(data, v)
	if err == nil {
		return nil
	}
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if where != "" {
			field = strings.TrimPrefix(where+"."+field, ".")
		}
		if field == "" {
			return bodyErr("%s is a JSON %s", nonEmpty(where, "the body"), typeErr.Value)
		}
		return bodyErr("field %q is a JSON %s, not %s", field, typeErr.Value, goKind(typeErr.Type.Kind().String()))
	case errors.As(err, &syntaxErr):
		return bodyErr("not valid JSON: %v", err)
	default:
		return bodyErr("%v", err)
	}
}

// goKind names a Go kind in JSON terms for error messages.
func goKind(k string) string {
	switch k {
	case "struct", "map":
		return "an object"
	case "slice", "array":
		return "an array"
	case "string":
		return "a string"
	case "ptr":
		return "an object"
	}
	return "a " + k
}

func nonEmpty(s, fallback string) string {
	if s == "" {
		return fallback
	}
	return s
}

// kind returns the JSON kind of a raw value from its first byte.
func kind(raw []byte) byte {
	t := bytes.TrimLeft(raw, " \t\r\n")
	if len(t) == 0 {
		return 0
	}
	return t[0]
}

// arguments turns an arguments string the model wrote into the call's
// arguments: its JSON text when it parses, no arguments when it is empty,
// and otherwise the string itself as a JSON string, which the turn service
// refuses as invalid_arguments (that call only).
func arguments(s *string) json.RawMessage {
	if s == nil {
		return nil
	}
	t := strings.TrimSpace(*s)
	if t == "" {
		return nil
	}
	if json.Valid([]byte(t)) {
		return json.RawMessage(t)
	}
	b, _ := json.Marshal(*s) // a Go string always marshals
	return b
}

func parseChat(body []byte) (Parsed, error) {
	if kind(body) != '{' {
		return Parsed{}, bodyErr("it is not a JSON object")
	}
	var top struct {
		ID      string `json:"id"`
		Choices *[]struct {
			Message json.RawMessage `json:"message"`
		} `json:"choices"`
	}
	if err := decode(body, &top, ""); err != nil {
		return Parsed{}, err
	}
	msg, where := json.RawMessage(body), ""
	if top.Choices != nil {
		if len(*top.Choices) == 0 {
			return Parsed{}, bodyErr("choices is empty")
		}
		msg, where = (*top.Choices)[0].Message, "choices[0].message"
		if kind(msg) != '{' {
			return Parsed{}, bodyErr("choices[0].message is missing or not an object")
		}
	} else {
		top.ID = "" // a bare message has no id of its own
	}
	var m struct {
		Role      *string `json:"role"`
		ToolCalls []struct {
			ID       *string `json:"id"`
			Type     string  `json:"type"`
			Function *struct {
				Name      *string `json:"name"`
				Arguments *string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	}
	if err := decode(msg, &m, where); err != nil {
		return Parsed{}, err
	}
	switch {
	case m.Role == nil:
		return Parsed{}, bodyErr("%s has no role", nonEmpty(where, "the message"))
	case *m.Role != "assistant":
		return Parsed{}, bodyErr("%s has role %q, not \"assistant\"", nonEmpty(where, "the message"), *m.Role)
	}
	if err := notChat(msg, where); err != nil {
		return Parsed{}, err
	}
	p := Parsed{ID: top.ID}
	var custom []string
	for i, tc := range m.ToolCalls {
		at := fmt.Sprintf("%s.tool_calls[%d]", nonEmpty(where, "message"), i)
		if tc.Type != "function" && tc.Type != "" {
			// Custom (free-form) tool calls are not turnd tools; they are
			// refused below, never left unanswered.
			id := "?"
			if tc.ID != nil {
				id = *tc.ID
			}
			custom = append(custom, id)
			continue
		}
		switch {
		case tc.ID == nil || *tc.ID == "":
			return Parsed{}, bodyErr("%s has no id", at)
		case tc.Function == nil:
			return Parsed{}, bodyErr("%s has no function", at)
		case tc.Function.Name == nil || *tc.Function.Name == "":
			return Parsed{}, bodyErr("%s.function has no name", at)
		}
		p.Calls = append(p.Calls, turn.Call{ID: *tc.ID, Name: *tc.Function.Name, Arguments: arguments(tc.Function.Arguments)})
	}
	if len(custom) > 0 {
		return Parsed{}, &UnsupportedCallError{Kind: "custom tool", IDs: custom}
	}
	return p, nil
}

// notChat recognises the other formats' messages posted as openai.chat,
// which would otherwise read as an assistant message without tool calls
// and have their calls silently ignored.
func notChat(msg json.RawMessage, where string) error {
	var m struct {
		Type    string          `json:"type"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(msg, &m); err != nil {
		return nil // decoded already; the shape is checked there
	}
	if m.Type == "message" {
		return bodyErr("%s has \"type\": \"message\", as an Anthropic message or a Responses output item has; a Chat Completions message has none", nonEmpty(where, "the message"))
	}
	if kind(m.Content) == '[' {
		var blocks []struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(m.Content, &blocks) == nil {
			for i, b := range blocks {
				if b.Type == "tool_use" {
					return bodyErr("%s.content[%d] is a tool_use block, which is the anthropic.messages format", nonEmpty(where, "message"), i)
				}
			}
		}
	}
	return nil
}

func parseResponses(body []byte) (Parsed, error) {
	var p Parsed
	items, where := json.RawMessage(body), "output"
	switch kind(body) {
	case '[':
	case '{':
		var top struct {
			ID     string          `json:"id"`
			Output json.RawMessage `json:"output"`
		}
		if err := decode(body, &top, ""); err != nil {
			return Parsed{}, err
		}
		if kind(top.Output) != '[' {
			return Parsed{}, bodyErr("the object has no output array")
		}
		p.ID, items = top.ID, top.Output
	default:
		return Parsed{}, bodyErr("it is neither a JSON object nor an array")
	}
	var out []json.RawMessage
	if err := decode(items, &out, ""); err != nil {
		return Parsed{}, err
	}
	var custom []string
	for i, raw := range out {
		at := fmt.Sprintf("%s[%d]", where, i)
		if kind(raw) != '{' {
			return Parsed{}, bodyErr("%s is not an object", at)
		}
		var it struct {
			Type      *string `json:"type"`
			CallID    *string `json:"call_id"`
			Name      *string `json:"name"`
			Arguments *string `json:"arguments"`
		}
		if err := decode(raw, &it, at); err != nil {
			return Parsed{}, err
		}
		switch {
		case it.Type == nil:
			return Parsed{}, bodyErr("%s has no type", at)
		case *it.Type == "custom_tool_call":
			// The frontend must answer it with a custom_tool_call_output:
			// refused below, never left unanswered.
			id := "?"
			if it.CallID != nil {
				id = *it.CallID
			}
			custom = append(custom, id)
			continue
		case *it.Type != "function_call":
			continue // messages, reasoning, built-in tools: not turnd's
		case it.CallID == nil || *it.CallID == "":
			return Parsed{}, bodyErr("%s has no call_id", at)
		case it.Name == nil || *it.Name == "":
			return Parsed{}, bodyErr("%s has no name", at)
		}
		p.Calls = append(p.Calls, turn.Call{ID: *it.CallID, Name: *it.Name, Arguments: arguments(it.Arguments)})
	}
	if len(custom) > 0 {
		return Parsed{}, &UnsupportedCallError{Kind: "custom_tool_call", IDs: custom}
	}
	return p, nil
}

func parseMessages(body []byte) (Parsed, error) {
	if kind(body) != '{' {
		return Parsed{}, bodyErr("it is not a JSON object")
	}
	var m struct {
		ID        string          `json:"id"`
		Type      string          `json:"type"`
		Role      *string         `json:"role"`
		Content   json.RawMessage `json:"content"`
		ToolCalls json.RawMessage `json:"tool_calls"`
		Choices   json.RawMessage `json:"choices"`
		Output    json.RawMessage `json:"output"`
	}
	if err := decode(body, &m, ""); err != nil {
		return Parsed{}, err
	}
	// The other formats' bodies, which would otherwise read as a message
	// without tool_use blocks (their calls silently ignored).
	switch {
	case len(m.Choices) > 0:
		return Parsed{}, bodyErr("it has choices, as a Chat Completions response has")
	case len(m.ToolCalls) > 0 && kind(m.ToolCalls) != 'n':
		return Parsed{}, bodyErr("it has tool_calls, as a Chat Completions message has")
	case len(m.Output) > 0:
		return Parsed{}, bodyErr("it has output, as a Responses API response has")
	}
	switch {
	case m.Role == nil:
		return Parsed{}, bodyErr("the message has no role")
	case *m.Role != "assistant":
		return Parsed{}, bodyErr("the message has role %q, not \"assistant\"", *m.Role)
	}
	p := Parsed{ID: m.ID}
	switch kind(m.Content) {
	case '"':
		return p, nil // text only: no tool calls
	case '[':
	default:
		return Parsed{}, bodyErr("content is missing or neither a string nor an array of blocks")
	}
	var blocks []json.RawMessage
	if err := decode(m.Content, &blocks, "content"); err != nil {
		return Parsed{}, err
	}
	for i, raw := range blocks {
		at := fmt.Sprintf("content[%d]", i)
		if kind(raw) != '{' {
			return Parsed{}, bodyErr("%s is not an object", at)
		}
		var b struct {
			Type  *string         `json:"type"`
			ID    *string         `json:"id"`
			Name  *string         `json:"name"`
			Input json.RawMessage `json:"input"`
		}
		if err := decode(raw, &b, at); err != nil {
			return Parsed{}, err
		}
		switch {
		case b.Type == nil:
			return Parsed{}, bodyErr("%s has no type", at)
		case *b.Type != "tool_use":
			continue // text, thinking, server tools: not turnd's
		case b.ID == nil || *b.ID == "":
			return Parsed{}, bodyErr("%s has no id", at)
		case b.Name == nil || *b.Name == "":
			return Parsed{}, bodyErr("%s has no name", at)
		}
		p.Calls = append(p.Calls, turn.Call{ID: *b.ID, Name: *b.Name, Arguments: b.Input})
	}
	return p, nil
}
