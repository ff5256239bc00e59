package provider

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/turnd/turnd/turn"
)

// StreamHandler receives what a provider stream carries, as it arrives.
// Begin is called once, before the first Call, with the stream's message
// or response id (empty when the stream named none before its first
// call). Call is called for each function call, in the model's order, as
// soon as its arguments are complete. An error from either ends the read
// with that error.
type StreamHandler interface {
	Begin(id string) error
	Call(c turn.Call) error
}

// IncompleteError reports a stream that did not end cleanly: it broke off,
// carried a malformed event, ended without the provider's finish event, or
// finished for a reason that leaves the message cut short. Missing says
// what was missing (or wrong).
type IncompleteError struct {
	Format  Format
	Missing string
}

func (e *IncompleteError) Error() string {
	if e.Format == "" {
		return "the stream is incomplete: " + e.Missing
	}
	return fmt.Sprintf("the %s stream is incomplete: %s", e.Format, e.Missing)
}

func incomplete(format string, a ...any) error {
	return &IncompleteError{Missing: fmt.Sprintf(format, a...)}
}

// maxEventBytes bounds one server-sent event's line; a request body is
// bounded more tightly by the HTTP layer.
const maxEventBytes = 16 << 20

// ReadStream reads a streamed body in format f (server-sent events as the
// provider's API streams them) from r, handing its calls to h as each is
// complete, and returns nil only at a clean end: the provider's finish
// event (with a stop reason that ends a tool-using message) followed by
// the end of r. Events the format does not need (text, thinking, pings,
// usage) are skipped. A stream that breaks or finishes short is an
// *IncompleteError; one that finished cleanly without function calls is
// ErrNoToolCalls; custom tool calls are an *UnsupportedCallError. An error
// reading r is returned as it is (wrapped).
func (f Format) ReadStream(r io.Reader, h StreamHandler) error {
	var p streamParser
	switch f {
	case OpenAIChat:
		p = &chatStream{h: h, cur: -1}
	case OpenAIResponses:
		p = &responsesStream{h: h, open: map[int]string{}}
	case AnthropicMessages:
		p = &messagesStream{h: h, blocks: map[int]*toolBlock{}}
	default:
		return &UnknownFormatError{Name: string(f)}
	}
	err := readEvents(r, p)
	if err == nil {
		err = p.end()
	}
	var ie *IncompleteError
	if errors.As(err, &ie) && ie.Format == "" {
		ie.Format = f
	}
	return err
}

// streamParser is one format's reading of a stream's events.
type streamParser interface {
	// event takes one event's data (its data lines joined).
	event(data []byte) error
	// end checks, at the end of the body, that the stream finished cleanly.
	end() error
}

// readEvents splits r into server-sent events and hands each one's data
// to p (see the HTML standard's event stream interpretation: data lines
// are joined with line feeds, a blank line dispatches, comments and other
// fields are ignored; an event the body ends in before its blank line is
// dropped).
func readEvents(r io.Reader, p streamParser) error {
	body := &FailedReader{R: r}
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 4<<10), maxEventBytes)
	var data []byte
	have := false
	for sc.Scan() {
		if body.Failed() {
			break // the line is what arrived before the body broke
		}
		line := sc.Bytes()
		if len(line) == 0 {
			if have {
				if err := p.event(data); err != nil {
					return err
				}
			}
			data, have = data[:0], false
			continue
		}
		field, value, found := bytes.Cut(line, []byte(":"))
		if !found {
			value = nil
		} else if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
		if string(field) != "data" {
			continue // event:, id:, retry:, comments
		}
		if have {
			data = append(data, '\n')
		}
		data = append(data, value...)
		have = true
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return incomplete("an event line longer than %d bytes", maxEventBytes)
		}
		return fmt.Errorf("reading the stream: %w", err)
	}
	if body.Failed() {
		return fmt.Errorf("reading the stream: %w", body.Err)
	}
	return nil
}

// FailedReader passes R on and keeps the error that ended it other than
// io.EOF. A bufio.Scanner hands out the bytes after the last line break
// as a last line when its reader fails, as at a clean end; a stream
// reader asks Failed before taking a line as whole.
type FailedReader struct {
	R   io.Reader
	Err error
}

func (f *FailedReader) Read(p []byte) (int, error) {
	n, err := f.R.Read(p)
	if err != nil && err != io.EOF && f.Err == nil {
		f.Err = err
	}
	return n, err
}

// Failed reports whether the reader ended in an error other than io.EOF.
func (f *FailedReader) Failed() bool { return f.Err != nil }

// chatStream reads a Chat Completions stream: chunks whose
// choices[0].delta.tool_calls carry fragments of the calls by index. Call i
// is complete when a fragment of a later index arrives, or at the chunk
// with a finish_reason.
type chatStream struct {
	h      StreamHandler
	begun  bool
	id     string
	cur    int // index of the call being built; -1 before the first
	call   partialCall
	calls  int
	custom []string
	finish string // the finish_reason, once seen
	done   bool   // data: [DONE]
	chunks int
}

type partialCall struct {
	id, name string
	args     strings.Builder
	custom   bool
}

func (s *chatStream) begin() error {
	if s.begun {
		return nil
	}
	s.begun = true
	return s.h.Begin(s.id)
}

func (s *chatStream) event(data []byte) error {
	if string(bytes.TrimSpace(data)) == "[DONE]" {
		s.done = true
		return nil
	}
	s.chunks++
	var c struct {
		ID      string `json:"id"`
		Choices []struct {
			Index int `json:"index"`
			Delta struct {
				ToolCalls []struct {
					Index    *int   `json:"index"`
					ID       string `json:"id"`
					Type     string `json:"type"`
					Function *struct {
						Name      string `json:"name"`
						Arguments string `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"delta"`
			FinishReason *string `json:"finish_reason"`
		} `json:"choices"`
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(data, &c); err != nil {
		return incomplete("chunk %d is not a chat.completion.chunk object: %v", s.chunks, err)
	}
	if c.Error != nil {
		return incomplete("the stream carried an error: %s", c.Error.Message)
	}
	if s.id == "" {
		s.id = c.ID
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue // n > 1: turnd runs the first choice's calls
		}
		if s.finish != "" && len(ch.Delta.ToolCalls) > 0 {
			return incomplete("chunk %d carries tool calls after the finish_reason", s.chunks)
		}
		for _, tc := range ch.Delta.ToolCalls {
			i := s.cur
			if tc.Index != nil {
				i = *tc.Index
			}
			switch {
			case i < 0 || i < s.cur:
				return incomplete("chunk %d has a tool call fragment of index %d after index %d", s.chunks, i, s.cur)
			case i > s.cur:
				if err := s.complete(); err != nil {
					return err
				}
				s.cur = i
				s.call = partialCall{}
			}
			if tc.ID != "" {
				s.call.id = tc.ID
			}
			if tc.Type != "" && tc.Type != "function" {
				s.call.custom = true
			}
			if tc.Function != nil {
				s.call.name += tc.Function.Name
				s.call.args.WriteString(tc.Function.Arguments)
			}
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" && s.finish == "" {
			s.finish = *ch.FinishReason
			if err := s.complete(); err != nil {
				return err
			}
		}
	}
	return nil
}

// complete hands the call being built to the handler.
func (s *chatStream) complete() error {
	if s.cur < 0 || (s.call.id == "" && s.call.name == "" && s.call.args.Len() == 0) {
		return nil
	}
	c := s.call
	s.call = partialCall{}
	if c.custom {
		s.custom = append(s.custom, nonEmpty(c.id, "?"))
		return nil
	}
	switch {
	case c.id == "":
		return incomplete("tool call %d has no id", s.cur)
	case c.name == "":
		return incomplete("tool call %d has no function name", s.cur)
	}
	if err := s.begin(); err != nil {
		return err
	}
	s.calls++
	args := c.args.String()
	return s.h.Call(turn.Call{ID: c.id, Name: c.name, Arguments: arguments(&args)})
}

func (s *chatStream) end() error {
	switch s.finish {
	case "":
		return incomplete("the stream ended without a chunk carrying a finish_reason")
	case "length", "content_filter":
		return incomplete("the model stopped with finish_reason %q, so its message was cut short", s.finish)
	}
	if len(s.custom) > 0 {
		return &UnsupportedCallError{Kind: "custom tool", IDs: s.custom}
	}
	if s.calls == 0 {
		return ErrNoToolCalls
	}
	return nil
}

// responsesStream reads a Responses API stream: a function_call output
// item is complete at its response.output_item.done, and the stream at
// response.completed.
type responsesStream struct {
	h         StreamHandler
	begun     bool
	id        string
	open      map[int]string // output_index → call_id of function calls begun
	calls     int
	custom    []string
	completed bool
	events    int
}

type responsesItem struct {
	Type      string  `json:"type"`
	CallID    string  `json:"call_id"`
	Name      string  `json:"name"`
	Arguments *string `json:"arguments"`
}

func (s *responsesStream) begin() error {
	if s.begun {
		return nil
	}
	s.begun = true
	return s.h.Begin(s.id)
}

func (s *responsesStream) event(data []byte) error {
	s.events++
	var ev struct {
		Type     string `json:"type"`
		Response *struct {
			ID                string `json:"id"`
			IncompleteDetails *struct {
				Reason string `json:"reason"`
			} `json:"incomplete_details"`
			Error *struct {
				Message string `json:"message"`
			} `json:"error"`
		} `json:"response"`
		OutputIndex int            `json:"output_index"`
		Item        *responsesItem `json:"item"`
		Message     string         `json:"message"`
	}
	if err := json.Unmarshal(data, &ev); err != nil {
		return incomplete("event %d is not a Responses stream event: %v", s.events, err)
	}
	if s.completed {
		return nil // nothing after the finish event changes the turn
	}
	switch ev.Type {
	case "response.created", "response.in_progress", "response.queued":
		if ev.Response != nil && s.id == "" {
			s.id = ev.Response.ID
		}
		return s.begin()
	case "response.output_item.added":
		if ev.Item != nil && ev.Item.Type == "function_call" {
			s.open[ev.OutputIndex] = ev.Item.CallID
		}
	case "response.output_item.done":
		if ev.Item == nil {
			return incomplete("event %d (response.output_item.done) has no item", s.events)
		}
		delete(s.open, ev.OutputIndex)
		switch ev.Item.Type {
		case "custom_tool_call":
			s.custom = append(s.custom, nonEmpty(ev.Item.CallID, "?"))
		case "function_call":
			switch {
			case ev.Item.CallID == "":
				return incomplete("output item %d has no call_id", ev.OutputIndex)
			case ev.Item.Name == "":
				return incomplete("output item %d has no name", ev.OutputIndex)
			}
			if err := s.begin(); err != nil {
				return err
			}
			s.calls++
			return s.h.Call(turn.Call{ID: ev.Item.CallID, Name: ev.Item.Name, Arguments: arguments(ev.Item.Arguments)})
		}
	case "response.completed":
		s.completed = true
	case "response.incomplete":
		reason := "unknown"
		if ev.Response != nil && ev.Response.IncompleteDetails != nil {
			reason = ev.Response.IncompleteDetails.Reason
		}
		return incomplete("the response ended incomplete (%s), so its output was cut short", reason)
	case "response.failed":
		msg := "no message"
		if ev.Response != nil && ev.Response.Error != nil {
			msg = ev.Response.Error.Message
		}
		return incomplete("the response failed: %s", msg)
	case "error":
		return incomplete("the stream carried an error: %s", ev.Message)
	}
	return nil
}

func (s *responsesStream) end() error {
	if len(s.open) > 0 && !s.completed {
		for _, id := range s.open {
			return incomplete("the arguments of function call %q never completed (no response.output_item.done)", id)
		}
	}
	if !s.completed {
		return incomplete("the stream ended without response.completed")
	}
	if len(s.custom) > 0 {
		return &UnsupportedCallError{Kind: "custom_tool_call", IDs: s.custom}
	}
	if s.calls == 0 {
		return ErrNoToolCalls
	}
	return nil
}

// messagesStream reads an Anthropic Messages stream: a tool_use block is
// complete at its content_block_stop, the message at message_stop after a
// message_delta with its stop_reason.
type messagesStream struct {
	h       StreamHandler
	begun   bool
	id      string
	blocks  map[int]*toolBlock // open tool_use blocks by index
	calls   int
	stop    string // the stop_reason
	stopped bool   // message_stop
	events  int
}

type toolBlock struct {
	id, name string
	input    json.RawMessage // the block's start input
	partial  strings.Builder
}

func (s *messagesStream) begin() error {
	if s.begun {
		return nil
	}
	s.begun = true
	return s.h.Begin(s.id)
}

func (s *messagesStream) event(data []byte) error {
	s.events++
	var ev struct {
		Type    string `json:"type"`
		Message *struct {
			ID string `json:"id"`
		} `json:"message"`
		Index        int `json:"index"`
		ContentBlock *struct {
			Type  string          `json:"type"`
			ID    string          `json:"id"`
			Name  string          `json:"name"`
			Input json.RawMessage `json:"input"`
		} `json:"content_block"`
		Delta *struct {
			Type        string  `json:"type"`
			PartialJSON string  `json:"partial_json"`
			StopReason  *string `json:"stop_reason"`
		} `json:"delta"`
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(data, &ev); err != nil {
		return incomplete("event %d is not a Messages stream event: %v", s.events, err)
	}
	if s.stopped {
		return nil
	}
	switch ev.Type {
	case "message_start":
		if ev.Message != nil && s.id == "" {
			s.id = ev.Message.ID
		}
		return s.begin()
	case "content_block_start":
		if ev.ContentBlock != nil && ev.ContentBlock.Type == "tool_use" {
			s.blocks[ev.Index] = &toolBlock{id: ev.ContentBlock.ID, name: ev.ContentBlock.Name, input: ev.ContentBlock.Input}
		}
	case "content_block_delta":
		if b := s.blocks[ev.Index]; b != nil && ev.Delta != nil && ev.Delta.Type == "input_json_delta" {
			b.partial.WriteString(ev.Delta.PartialJSON)
		}
	case "content_block_stop":
		b := s.blocks[ev.Index]
		if b == nil {
			return nil
		}
		delete(s.blocks, ev.Index)
		switch {
		case b.id == "":
			return incomplete("tool_use block %d has no id", ev.Index)
		case b.name == "":
			return incomplete("tool_use block %d has no name", ev.Index)
		}
		args := b.input
		if p := strings.TrimSpace(b.partial.String()); p != "" {
			args = arguments(&p)
		}
		if err := s.begin(); err != nil {
			return err
		}
		s.calls++
		return s.h.Call(turn.Call{ID: b.id, Name: b.name, Arguments: args})
	case "message_delta":
		if ev.Delta != nil && ev.Delta.StopReason != nil {
			s.stop = *ev.Delta.StopReason
		}
	case "message_stop":
		s.stopped = true
	case "error":
		msg := "no message"
		if ev.Error != nil {
			msg = ev.Error.Message
		}
		return incomplete("the stream carried an error: %s", msg)
	}
	return nil
}

func (s *messagesStream) end() error {
	for _, b := range s.blocks {
		return incomplete("the input of tool_use block %q never completed (no content_block_stop)", b.id)
	}
	if !s.stopped {
		return incomplete("the stream ended without message_stop")
	}
	switch s.stop {
	case "":
		return incomplete("the message ended without a stop_reason (message_delta)")
	case "max_tokens", "refusal", "model_context_window_exceeded", "pause_turn":
		return incomplete("the model stopped with stop_reason %q, so its message was cut short", s.stop)
	}
	if s.calls == 0 {
		return ErrNoToolCalls
	}
	return nil
}
