package api

import (
	"bytes"
	"encoding/json"
	"testing"
)

// scanCallLine must decode what encoding/json decodes wherever it takes a
// line.
func FuzzScanCallLine(f *testing.F) {
	for _, s := range []string{
		`{"id":"c1","name":"echo","arguments":{"text":"hi"}}`,
		`{"id":"c1","name":"echo"}`,
		`{"id":"c1","name":"echo","arguments":null}`,
		` { "name" : "x" , "id":"é", "arguments": [1, 2] , "extra": {"a":1}} `,
		`{"ID":"c1","name":"echo"}`,
		`{"id":"c\u0031","name":"echo"}`,
		`{"id":"c1","name":"echo","arguments":{"text":"hi"}} x`,
		`{"id":"c1","id":"c2"}`,
		`[]`, `null`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		got, ok := scanCallLine(line)
		if !ok {
			return
		}
		var want struct {
			ID        string          `json:"id"`
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		}
		if err := json.Unmarshal(line, &want); err != nil {
			t.Fatalf("scanCallLine took %q, which encoding/json refuses: %v", line, err)
		}
		if got.ID != want.ID || got.Name != want.Name || !bytes.Equal(got.Arguments, want.Arguments) {
			t.Fatalf("%q: scanned %+v, encoding/json %+v", line, got, want)
		}
	})
}
