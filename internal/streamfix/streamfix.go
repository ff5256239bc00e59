// Package streamfix writes provider streams (Chat Completions, Responses,
// Messages) and native NDJSON as a frontend tees them to turnd, in parts:
// Parts[k] is what the model has produced after its k-th piece, CallEnds[i]
// the part after which call i is complete, End the part with the finish
// event. Tests check them against the official SDKs. Standard library only.
package streamfix

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Call is one tool call of a streamed message.
type Call struct {
	ID, Name  string
	Arguments string // JSON text
}

// Stream is a stream in parts (see the package comment).
type Stream struct {
	Parts    []string
	CallEnds []int
	End      int
}

// String is the whole stream.
func (s Stream) String() string { return strings.Join(s.Parts, "") }

func js(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// split cuts s into up to n pieces of about equal length (one when short).
func split(s string, n int) []string {
	if len(s) < 8 || n <= 1 {
		return []string{s}
	}
	size := (len(s) + n - 1) / n
	var out []string
	for len(s) > size {
		out = append(out, s[:size])
		s = s[size:]
	}
	return append(out, s)
}

// Chat is a Chat Completions stream (stream: true, include_usage) of the
// message id whose choices[0] carries a line of text and then calls; stop
// is the finish_reason ("tool_calls" for a clean end).
func Chat(id string, calls []Call, stop string) Stream {
	var s Stream
	chunk := func(choices []any, extra map[string]any) string {
		c := map[string]any{"id": id, "object": "chat.completion.chunk", "created": 1733000000, "model": "gpt-4.1-2025-04-14",
			"service_tier": "default", "system_fingerprint": "fp_1", "choices": choices}
		for k, v := range extra {
			c[k] = v
		}
		return "data: " + js(c) + "\n\n"
	}
	choice := func(delta map[string]any, finish any) []any {
		return []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}}
	}
	s.Parts = append(s.Parts, chunk(choice(map[string]any{"role": "assistant", "content": "", "refusal": nil}, nil), nil))
	s.Parts = append(s.Parts, chunk(choice(map[string]any{"content": "Let me look that up."}, nil), nil))
	for i, c := range calls {
		first := map[string]any{"index": i, "id": c.ID, "type": "function", "function": map[string]any{"name": c.Name, "arguments": ""}}
		part := chunk(choice(map[string]any{"tool_calls": []any{first}}, nil), nil)
		if i > 0 {
			// Call i-1 is complete once this fragment arrives.
			s.Parts = append(s.Parts, part)
			s.CallEnds = append(s.CallEnds, len(s.Parts)-1)
			part = ""
		}
		for _, frag := range split(c.Arguments, 3) {
			part += chunk(choice(map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": frag}}}}, nil), nil)
		}
		s.Parts = append(s.Parts, part)
	}
	s.Parts = append(s.Parts, chunk(choice(map[string]any{}, stop), nil))
	s.End = len(s.Parts) - 1
	if len(calls) > 0 {
		s.CallEnds = append(s.CallEnds, s.End)
	}
	s.Parts = append(s.Parts, chunk([]any{}, map[string]any{"usage": map[string]any{"prompt_tokens": 100, "completion_tokens": 40, "total_tokens": 140}})+"data: [DONE]\n\n")
	return s
}

// Responses is a Responses API stream of response id with a reasoning
// item, a message and then function_call items; status is the final
// event's kind ("completed" for a clean end, or "incomplete").
func Responses(id string, calls []Call, status string) Stream {
	var s Stream
	seq := 0
	ev := func(typ string, fields map[string]any) string {
		fields["type"] = typ
		fields["sequence_number"] = seq
		seq++
		return "event: " + typ + "\ndata: " + js(fields) + "\n\n"
	}
	resp := func(st string, output []any) map[string]any {
		r := map[string]any{"id": id, "object": "response", "created_at": 1733000000, "status": st, "model": "gpt-4.1-2025-04-14",
			"output": output, "parallel_tool_calls": true, "tool_choice": "auto", "tools": []any{}, "error": nil, "incomplete_details": nil}
		if st == "incomplete" {
			r["incomplete_details"] = map[string]any{"reason": "max_output_tokens"}
		}
		return r
	}
	s.Parts = append(s.Parts, ev("response.created", map[string]any{"response": resp("in_progress", []any{})})+
		ev("response.in_progress", map[string]any{"response": resp("in_progress", []any{})}))
	msg := map[string]any{"id": "msg_1", "type": "message", "status": "completed", "role": "assistant",
		"content": []any{map[string]any{"type": "output_text", "text": "Let me look that up.", "annotations": []any{}}}}
	s.Parts = append(s.Parts,
		ev("response.output_item.added", map[string]any{"output_index": 0, "item": map[string]any{"id": "msg_1", "type": "message", "status": "in_progress", "role": "assistant", "content": []any{}}})+
			ev("response.output_text.delta", map[string]any{"item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": "Let me look that up."})+
			ev("response.output_item.done", map[string]any{"output_index": 0, "item": msg}))
	output := []any{msg}
	for i, c := range calls {
		oi := i + 1
		itemID := fmt.Sprintf("fc_%d", oi)
		item := map[string]any{"id": itemID, "type": "function_call", "status": "in_progress", "call_id": c.ID, "name": c.Name, "arguments": ""}
		part := ev("response.output_item.added", map[string]any{"output_index": oi, "item": item})
		for _, frag := range split(c.Arguments, 3) {
			part += ev("response.function_call_arguments.delta", map[string]any{"item_id": itemID, "output_index": oi, "delta": frag})
		}
		s.Parts = append(s.Parts, part)
		done := map[string]any{"id": itemID, "type": "function_call", "status": "completed", "call_id": c.ID, "name": c.Name, "arguments": c.Arguments}
		output = append(output, done)
		s.Parts = append(s.Parts, ev("response.function_call_arguments.done", map[string]any{"item_id": itemID, "output_index": oi, "arguments": c.Arguments})+
			ev("response.output_item.done", map[string]any{"output_index": oi, "item": done}))
		s.CallEnds = append(s.CallEnds, len(s.Parts)-1)
	}
	s.Parts = append(s.Parts, ev("response."+status, map[string]any{"response": resp(status, output)}))
	s.End = len(s.Parts) - 1
	return s
}

// Messages is an Anthropic Messages stream of message id with a text
// block and then tool_use blocks; stop is the stop_reason ("tool_use" for
// a clean end).
func Messages(id string, calls []Call, stop string) Stream {
	var s Stream
	ev := func(typ string, fields map[string]any) string {
		fields["type"] = typ
		return "event: " + typ + "\ndata: " + js(fields) + "\n\n"
	}
	s.Parts = append(s.Parts, ev("message_start", map[string]any{"message": map[string]any{
		"id": id, "type": "message", "role": "assistant", "content": []any{}, "model": "claude-sonnet-4-5",
		"stop_reason": nil, "stop_sequence": nil, "usage": map[string]any{"input_tokens": 100, "output_tokens": 1},
	}}))
	s.Parts = append(s.Parts, ev("content_block_start", map[string]any{"index": 0, "content_block": map[string]any{"type": "text", "text": ""}})+
		ev("ping", map[string]any{})+
		ev("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{"type": "text_delta", "text": "Let me look that up."}})+
		ev("content_block_stop", map[string]any{"index": 0}))
	for i, c := range calls {
		bi := i + 1
		part := ev("content_block_start", map[string]any{"index": bi, "content_block": map[string]any{"type": "tool_use", "id": c.ID, "name": c.Name, "input": map[string]any{}}})
		part += ev("content_block_delta", map[string]any{"index": bi, "delta": map[string]any{"type": "input_json_delta", "partial_json": ""}})
		for _, frag := range split(c.Arguments, 3) {
			part += ev("content_block_delta", map[string]any{"index": bi, "delta": map[string]any{"type": "input_json_delta", "partial_json": frag}})
		}
		s.Parts = append(s.Parts, part)
		s.Parts = append(s.Parts, ev("content_block_stop", map[string]any{"index": bi}))
		s.CallEnds = append(s.CallEnds, len(s.Parts)-1)
	}
	s.Parts = append(s.Parts, ev("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": 60}})+ev("message_stop", map[string]any{}))
	s.End = len(s.Parts) - 1
	return s
}

// NDJSON is turnd's native streamed turn of id with calls.
func NDJSON(id string, calls []Call) Stream {
	var s Stream
	s.Parts = append(s.Parts, js(map[string]any{"id": id})+"\n")
	for _, c := range calls {
		s.Parts = append(s.Parts, js(map[string]any{"id": c.ID, "name": c.Name, "arguments": json.RawMessage(c.Arguments)})+"\n")
		s.CallEnds = append(s.CallEnds, len(s.Parts)-1)
	}
	s.End = len(s.Parts) - 1
	return s
}
