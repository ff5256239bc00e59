package turn

import (
	"encoding/json"
	"strings"
	"testing"
)

// holdsNUL reports whether a decoded JSON value has a NUL in a string or
// a key: what escapesNUL must tell from the text.
func holdsNUL(v any) bool {
	switch v := v.(type) {
	case string:
		return strings.IndexByte(v, 0) >= 0
	case []any:
		for _, e := range v {
			if holdsNUL(e) {
				return true
			}
		}
	case map[string]any:
		for k, e := range v {
			if strings.IndexByte(k, 0) >= 0 || holdsNUL(e) {
				return true
			}
		}
	}
	return false
}

var nulCases = []struct {
	json string
	nul  bool
}{
	{`{}`, false},
	{`"\u0000"`, true},
	{`{"a":"x\u0000y"}`, true},
	{`{"\u0000":1}`, true},
	{`["\\u0000"]`, false},   // a backslash, then u0000
	{`["\\\u0000"]`, true},   // a backslash, then NUL
	{`["\\\\u0000"]`, false}, // two backslashes, then u0000
	{`["\u00000"]`, true},    // NUL, then 0
	{`["\u0001","\u000a"]`, false},
	{`["\u0000"`, true}, // not JSON: still escapes NUL
	{`["\u000"]`, false},
	{`"\`, false},
}

func TestEscapesNUL(t *testing.T) {
	t.Parallel()
	for _, c := range nulCases {
		if got := escapesNUL([]byte(c.json)); got != c.nul {
			t.Errorf("escapesNUL(%s) = %v, want %v", c.json, got, c.nul)
		}
	}
}

func FuzzEscapesNUL(f *testing.F) {
	for _, c := range nulCases {
		f.Add([]byte(c.json))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var v any
		if json.Unmarshal(b, &v) != nil {
			return
		}
		if got, want := escapesNUL(b), holdsNUL(v); got != want {
			t.Fatalf("escapesNUL(%q) = %v, encoding/json decodes a NUL: %v", b, got, want)
		}
	})
}
