package provider

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/turnd/turnd/turn"
)

// BenchmarkParse parses a 16-call assistant message in each format.
func BenchmarkParse(b *testing.B) {
	var chat, resp, claude []string
	for i := range 16 {
		args := fmt.Sprintf(`{\"path\":\"src/file%d.go\",\"limit\":200}`, i)
		chat = append(chat, fmt.Sprintf(`{"id":"call_%d","type":"function","function":{"name":"read_file","arguments":"%s"}}`, i, args))
		resp = append(resp, fmt.Sprintf(`{"type":"function_call","id":"fc_%d","call_id":"call_%d","name":"read_file","arguments":"%s"}`, i, i, args))
		claude = append(claude, fmt.Sprintf(`{"type":"tool_use","id":"toolu_%d","name":"read_file","input":{"path":"src/file%d.go","limit":200}}`, i, i))
	}
	bodies := map[Format]string{
		OpenAIChat:        `{"id":"chatcmpl-1","choices":[{"index":0,"message":{"role":"assistant","tool_calls":[` + strings.Join(chat, ",") + `]}}]}`,
		OpenAIResponses:   `{"id":"resp_1","output":[` + strings.Join(resp, ",") + `]}`,
		AnthropicMessages: `{"id":"msg_1","type":"message","role":"assistant","content":[` + strings.Join(claude, ",") + `]}`,
	}
	for _, f := range Formats() {
		body := []byte(bodies[f])
		b.Run(string(f), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if p, err := f.Parse(body); err != nil || len(p.Calls) != 16 {
					b.Fatalf("%d calls, %v", len(p.Calls), err)
				}
			}
		})
	}
}

// BenchmarkResults renders and marshals the results of a 16-call turn
// with 1 KiB outputs in each format.
func BenchmarkResults(b *testing.B) {
	var tn turn.Turn
	out, _ := json.Marshal(strings.Repeat("line of output\n", 68))
	for i := range 16 {
		id := fmt.Sprintf("call_%d", i)
		tn.Calls = append(tn.Calls, turn.Call{ID: id, Name: "read_file"})
		tn.Results = append(tn.Results, turn.Result{Index: i, CallID: id, Status: turn.CallOK, Output: out})
	}
	for _, f := range Formats() {
		b.Run(string(f), func(b *testing.B) {
			for b.Loop() {
				if _, err := json.Marshal(f.Results(tn, nil)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
