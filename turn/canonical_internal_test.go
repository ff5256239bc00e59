package turn

import (
	"bytes"
	"testing"
)

// slowCanonical is canonicalJSON without its fast paths: the re-encoding
// that defines it.
func slowCanonical(raw []byte) []byte { return reencodeJSON(raw) }

var canonicalCases = []struct {
	raw       string
	canonical bool
}{
	{`{"text":"hello"}`, true},
	{`{"a":1,"b":[true,false,null],"c":{"d":-0.5e+10}}`, true},
	{`[]`, true},
	{`{}`, true},
	{`"x"`, true},
	{`0`, true},
	{`-12.50E-3`, true},
	{`{"b":1,"a":2}`, false},        // keys out of order
	{`{"a":1,"a":2}`, false},        // a repeated key
	{`{"a": 1}`, false},             // whitespace
	{` {"a":1}`, false},             // leading whitespace
	{`{"a":1} `, false},             // trailing whitespace
	{`{"a":1}{"b":2}`, false},       // two values
	{`{"a":"<b>"}`, false},          // escaped by encoding/json
	{`{"a":"\u0041"}`, false},       // an escape
	{`{"a":"é"}`, false},            // non-ASCII (canonical, but not claimed)
	{`{"a":01}`, false},             // not a JSON number
	{`{"a":1.}`, false},             // not a JSON number
	{`{"a":.5}`, false},             // not a JSON number
	{`{"a":1e}`, false},             // not a JSON number
	{`{"a":-}`, false},              // not a JSON number
	{`{"a":tru}`, false},            // not a literal
	{`{"a":1,}`, false},             // trailing comma
	{`[1,]`, false},                 // trailing comma
	{`{"a"}`, false},                // no value
	{`{"a":1`, false},               // unterminated
	{`"abc`, false},                 // unterminated
	{`{1:2}`, false},                // a key that is not a string
	{``, false},                     // nothing
	{`{"ab":1,"b":2,"ba":3}`, true}, // bytewise order
}

func TestIsCanonical(t *testing.T) {
	t.Parallel()
	for _, tc := range canonicalCases {
		if got := isCanonical([]byte(tc.raw)); got != tc.canonical {
			t.Errorf("isCanonical(%s) = %v, want %v", tc.raw, got, tc.canonical)
		}
		if tc.canonical && !bytes.Equal(slowCanonical([]byte(tc.raw)), []byte(tc.raw)) {
			t.Errorf("%s is claimed canonical but re-encodes as %s", tc.raw, slowCanonical([]byte(tc.raw)))
		}
		if got, want := canonicalJSON([]byte(tc.raw)), slowCanonical([]byte(tc.raw)); len(tc.raw) > 0 && !bytes.Equal(got, want) {
			t.Errorf("canonicalJSON(%s) = %s, want %s", tc.raw, got, want)
		}
	}
}

// FuzzCanonicalJSON: the fast path never changes a hash (what it accepts
// re-encodes to itself).
func FuzzCanonicalJSON(f *testing.F) {
	for _, tc := range canonicalCases {
		f.Add([]byte(tc.raw))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if isCanonical(raw) {
			if slow := slowCanonical(raw); !bytes.Equal(slow, raw) {
				t.Fatalf("%q is claimed canonical but re-encodes as %q", raw, slow)
			}
		}
	})
}
