package provider

import (
	"errors"
	"fmt"
	"strings"
)

// Format names a provider wire format.
type Format string

// The formats turnd speaks.
const (
	OpenAIChat        Format = "openai.chat"
	OpenAIResponses   Format = "openai.responses"
	AnthropicMessages Format = "anthropic.messages"
)

// Formats lists every format, in the order error messages name them.
func Formats() []Format { return []Format{OpenAIChat, OpenAIResponses, AnthropicMessages} }

// ParseFormat returns the format named s, or an *UnknownFormatError.
func ParseFormat(s string) (Format, error) {
	for _, f := range Formats() {
		if string(f) == s {
			return f, nil
		}
	}
	return "", &UnknownFormatError{Name: s}
}

// UnknownFormatError reports a format name turnd does not speak.
type UnknownFormatError struct{ Name string }

func (e *UnknownFormatError) Error() string {
	names := make([]string, 0, 3)
	for _, f := range Formats() {
		names = append(names, string(f))
	}
	return fmt.Sprintf("unknown format %q; the formats are %s", e.Name, strings.Join(names, ", "))
}

// ErrNoToolCalls: a well-formed provider message without any tool call;
// there is nothing for turnd to run.
var ErrNoToolCalls = errors.New("the message carries no tool calls")

// UnsupportedCallError reports calls of a kind turnd does not run (OpenAI's
// custom, free-form tool calls): a frontend must answer them itself, and
// the provider takes a result for every call, so turnd refuses the message
// rather than leave them out of its answer.
type UnsupportedCallError struct {
	Kind string   // the provider's name for the kind of call
	IDs  []string // the calls' ids, in order
}

func (e *UnsupportedCallError) Error() string {
	return fmt.Sprintf("the message carries %s calls (%s), which turnd does not run: only function tool calls are turnd's; answer these yourself, or post the function calls in a message of their own",
		e.Kind, strings.Join(e.IDs, ", "))
}

// BodyError reports a body that is not in the named format: Reason says
// what is wrong, Expected what the format takes.
type BodyError struct {
	Format Format
	Reason string
}

func (e *BodyError) Error() string {
	return fmt.Sprintf("the body is not in the %s format: %s; expected %s", e.Format, e.Reason, e.Format.expected())
}

func (f Format) expected() string {
	switch f {
	case OpenAIChat:
		return `a Chat Completions response (its choices[0].message is used) or an assistant message {"role":"assistant","tool_calls":[{"id","type":"function","function":{"name","arguments"}}]}`
	case OpenAIResponses:
		return `a Responses API response {"id","output":[...]} or its output array, whose {"type":"function_call","call_id","name","arguments"} items are the calls`
	case AnthropicMessages:
		return `a Messages API response or an assistant message {"role":"assistant","content":[...]}, whose {"type":"tool_use","id","name","input"} blocks are the calls`
	}
	return "a known format"
}
