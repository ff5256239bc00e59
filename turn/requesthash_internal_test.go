package turn

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/turnd/turnd/dispatch"
)

// referenceRequestBytes is what requestHash hashed before it wrote its
// bytes itself (json.Marshal of the calls with canonicalJSON arguments,
// canonicalJSON being isCanonical or else decode and re-encode). Hashes
// stored with turns were made from these bytes: requestHash must keep
// producing them. nil when json.Marshal fails.
func referenceRequestBytes(calls []Call, mode dispatch.Mode, policy dispatch.FailurePolicy) []byte {
	return requestJSON(calls, mode, policy, referenceCanonicalJSON)
}

func referenceRequestHash(calls []Call, mode dispatch.Mode, policy dispatch.FailurePolicy) string {
	sum := sha256.Sum256(referenceRequestBytes(calls, mode, policy))
	return hex.EncodeToString(sum[:])
}

// referenceCanonicalJSON is canonicalJSON before canonWriter.
func referenceCanonicalJSON(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	if isCanonical(raw) {
		return raw
	}
	return slowCanonical(raw)
}

// hashArguments are argument documents in every shape the writer must
// reproduce or decline.
var hashArguments = []struct {
	raw      string
	declined bool // the writer leaves it to encoding/json
}{
	// Scalars and empty containers.
	{raw: `{"n":1,"k":0}`},
	{raw: `{"n":123,"k":0}`},
	{raw: `{}`},
	{raw: `[]`},
	{raw: `{ }`},
	{raw: "[ \n ]"},
	{raw: `null`},
	{raw: ` null `},
	{raw: `true`},
	{raw: `false`},
	{raw: `"text"`},
	{raw: `0`},
	{raw: `-0`},
	{raw: `1e10`},
	{raw: `-1.5E-7`},
	{raw: `-0.0e+00`},
	{raw: `1.0`},
	{raw: `123456789012345678901234567890.123456789012345678901234567890e-300`},
	{raw: `[1,-2,3.5,4e400,-5E+6]`},
	// Nested objects and arrays, keys out of order.
	{raw: `{"b":{"d":1,"c":[{"z":1,"y":2},{}]},"a":[1,2,{"x":null}]}`},
	{raw: `[{"b":1,"a":2},[{"d":[],"c":{}}],"s"]`},
	{raw: `{"ab":1,"b":2,"a":3,"B":4,"":5,"ba":6}`},
	{raw: `{"z":{"z":{"z":{"b":1,"a":2}}},"a":0}`},
	// Repeated keys: the last one wins, nested too.
	{raw: `{"a":1,"a":2}`},
	{raw: `{"a":1,"b":2,"a":3}`},
	{raw: `{"b":{"y":1,"x":2,"y":3},"a":0,"b":{"q":1,"q":{"r":1,"r":2}}}`},
	{raw: `[{"k":1,"k":2},{"k":3}]`},
	{raw: `{"a":1,"\u0061":2}`},
	{raw: `{"\u0061":1,"a":2,"b":0}`},
	{raw: `{"x":1,"y":2,"x":3,"y":4,"x":5}`},
	// Unicode and escapes.
	{raw: `{"é":"ü","a":"日本語","z":1}`},
	{raw: `{"k":"\u00e9"}`},
	{raw: `"\ud83d\ude00"`},
	{raw: `"\ud800"`},
	{raw: `"\ud800\u0041"`},
	{raw: `"\udc00x"`},
	{raw: `"\u0000"`},
	{raw: `"\u001f\u007f\u0080"`},
	{raw: `"\b\f\n\r\t"`},
	{raw: `"\"\\\/"`},
	{raw: `"a\/b\/"`},
	{raw: `"\u2028\u2029"`},
	{raw: "\"line\u2028para\u2029end\""},
	{raw: `"a\u003cb\u003e\u0026"`},
	{raw: "\"\x7f\""},
	{raw: "\"\xef\xbf\xbd\""},
	{raw: `{"\n":1,"\t":2," ":3}`},
	{raw: `{"é\n":1,"é":2}`},
	{raw: `{"\u00e9":1,"é":2}`},
	{raw: `{"a\"b":1,"a":2,"a\\":3}`},
	// Invalid UTF-8 inside strings (decoded as U+FFFD).
	{raw: "\"\xff\""},
	{raw: "\"a\xc3\""},
	{raw: "\"\xed\xa0\x80\""},
	{raw: "{\"\xff\":1,\"\xfe\":2}"},
	{raw: "{\"\xef\xbf\xbd\":1,\"\xff\":2,\"a\":3}"},
	// Characters encoding/json escapes for HTML.
	{raw: `{"html":"<a href=\"x\">&amp;</a>"}`},
	{raw: `{"<":1,">":2,"&":3}`},
	{raw: `{"a<":1,"a":2}`},
	// Whitespace everywhere.
	{raw: " \t\n\r{ \"b\" : [ 1 , 2 ] ,\n\"a\" : { } } \n"},
	{raw: "[ \"x\" ,\t\"y\"\r\n]"},
	// What the writer declines: invalid JSON, text after the value,
	// nesting it does not follow.
	{raw: `{"a":1,}`, declined: true},
	{raw: `[1,]`, declined: true},
	{raw: `{"a"}`, declined: true},
	{raw: `{"a" 1}`, declined: true},
	{raw: `{`, declined: true},
	{raw: `[`, declined: true},
	{raw: `"abc`, declined: true},
	{raw: `"abc\`, declined: true},
	{raw: `01`, declined: true},
	{raw: `1.`, declined: true},
	{raw: `.5`, declined: true},
	{raw: `-`, declined: true},
	{raw: `+1`, declined: true},
	{raw: `tru`, declined: true},
	{raw: `nul`, declined: true},
	{raw: `{1:2}`, declined: true},
	{raw: `[1 2]`, declined: true},
	{raw: ` `, declined: true},
	{raw: `"\x"`, declined: true},
	{raw: `"\u12"`, declined: true},
	{raw: `"\u12g4"`, declined: true},
	{raw: "\"\x01\"", declined: true},
	{raw: "\"a\nb\"", declined: true},
	{raw: "{\"\x01\":1}", declined: true},
	{raw: `{"a":1}{"b":2}`, declined: true},
	{raw: `{"b":1,"a":2} x`, declined: true},
	{raw: `123abc`, declined: true},
	{raw: `truex`, declined: true},
	{raw: strings.Repeat("[", maxCanonDepth+1) + strings.Repeat("]", maxCanonDepth+1), declined: true},
	{raw: strings.Repeat(`{"a":`, maxCanonDepth+1) + "1" + strings.Repeat("}", maxCanonDepth+1), declined: true},
	{raw: strings.Repeat("[", 10001) + strings.Repeat("]", 10001), declined: true},
	{raw: strings.Repeat("[", maxCanonDepth) + `{"b":1,"a":2}` + strings.Repeat("]", maxCanonDepth), declined: true},
	{raw: strings.Repeat("[", maxCanonDepth-1) + `{"b":1,"a":2}` + strings.Repeat("]", maxCanonDepth-1)},
}

// hashStrings are ids, names, modes and policies: json.Marshal writes
// them, so they may hold anything.
var hashStrings = []string{
	"", "call_1", "toolu_01A09q90qw90lq917835lq9", "read_file", "a<b>&c", `quote"`, `back\slash`,
	"é", "日本", "line\u2028sep\u2029", "\xff", "a\xc3", "\x01\x7f", "\t\n", "\ufffd",
}

func TestCanonWriterDocument(t *testing.T) {
	t.Parallel()
	for _, tc := range hashArguments {
		raw := []byte(tc.raw)
		var w canonWriter
		w.out = append(w.out, "prefix"...)
		ok := w.document(raw)
		if ok == tc.declined {
			t.Errorf("document(%q) accepted = %v, want %v", tc.raw, ok, !tc.declined)
		}
		if ok {
			if got, want := w.out[len("prefix"):], slowCanonical(raw); !bytes.Equal(got, want) {
				t.Errorf("document(%q) = %q, want %q", tc.raw, got, want)
			}
		}
		if got, want := canonicalJSON(raw), referenceCanonicalJSON(raw); !bytes.Equal(got, want) {
			t.Errorf("canonicalJSON(%q) = %q, want %q", tc.raw, got, want)
		}
	}
}

func TestRequestHashMatchesReference(t *testing.T) {
	t.Parallel()
	check := func(t *testing.T, calls []Call, mode dispatch.Mode, policy dispatch.FailurePolicy) {
		t.Helper()
		want := referenceRequestBytes(calls, mode, policy)
		var w canonWriter
		if w.request(calls, mode, policy) && !bytes.Equal(w.out, want) {
			t.Errorf("request(%q, %q, %q) wrote\n%q, want\n%q", calls, mode, policy, w.out, want)
		}
		if got, want := requestHash(calls, mode, policy), referenceRequestHash(calls, mode, policy); got != want {
			t.Errorf("requestHash(%q, %q, %q) = %s, want %s", calls, mode, policy, got, want)
		}
	}
	check(t, nil, "", "")
	check(t, []Call{}, dispatch.Mode("ordered"), dispatch.FailurePolicy("continue"))
	check(t, []Call{{ID: "c1", Name: "n"}}, "", "")                                     // absent arguments
	check(t, []Call{{ID: "c1", Name: "n", Arguments: json.RawMessage{}}}, "", "")       // empty arguments
	check(t, []Call{{ID: "c1", Name: "n", Arguments: json.RawMessage("null")}}, "", "") // null arguments
	for _, tc := range hashArguments {
		calls := []Call{
			{ID: "call_1", Name: "first", Arguments: json.RawMessage(`{"n":1,"k":0}`)},
			{ID: "call_2", Name: "second", Arguments: json.RawMessage(tc.raw)},
		}
		check(t, calls, "ordered", "stop")
	}
	for _, s := range hashStrings {
		args := json.RawMessage(`{"b":1,"a":2}`)
		check(t, []Call{{ID: s, Name: "n", Arguments: args}}, "m", "p")
		check(t, []Call{{ID: "id", Name: s, Arguments: args}}, "m", "p")
		check(t, []Call{{ID: "id", Name: "n", Arguments: args}}, dispatch.Mode(s), dispatch.FailurePolicy(s))
	}
}

// TestRequestHashPinned: a hash as the server stored it before requestHash
// wrote its own bytes. It holds the bytes still if encoding/json changes
// (the reference comparisons would follow it).
func TestRequestHashPinned(t *testing.T) {
	t.Parallel()
	calls := []Call{
		{ID: "call_1", Name: "counter", Arguments: json.RawMessage(`{"n":123,"k":0}`)},
		{ID: "toolu_é<2>", Name: "search", Arguments: json.RawMessage(" {\"q\":\"a<b> & \\u00e9\\n\",\"opts\":{\"z\":[1,2.5e3,null],\"a\":true,\"a\":false}} ")},
		{ID: "call_3", Name: "noop"},
	}
	const want = "09ac5f997cfc9cc86fa0537cfb315cc3d74ba98cf05691488eff5b51fb72c038"
	if got := requestHash(calls, "ordered", "stop"); got != want {
		t.Errorf("requestHash = %s, want %s", got, want)
	}
}

// TestCanonWriterAllocs: a warmed writer writes plain requests, unsorted
// keys included, without allocating. Not parallel: AllocsPerRun counts
// the whole process's allocations.
func TestCanonWriterAllocs(t *testing.T) {
	for name, calls := range map[string][]Call{"small": benchCallsSmall, "large": benchCallsLarge} {
		var w canonWriter
		if !w.request(calls, "ordered", "stop") {
			t.Fatalf("%s: request declined", name)
		}
		if n := testing.AllocsPerRun(50, func() { w.request(calls, "ordered", "stop") }); n != 0 {
			t.Errorf("%s: %v allocations per request, want 0", name, n)
		}
	}
}

// FuzzRequestHash: requestHash hashes exactly the bytes it hashed when it
// marshalled the request, and canonicalJSON returns what it returned.
func FuzzRequestHash(f *testing.F) {
	for i, tc := range hashArguments {
		if len(tc.raw) > 4096 {
			continue // the deepest nestings only slow the fuzzer down
		}
		s := hashStrings[i%len(hashStrings)]
		f.Add(s, "name", []byte(tc.raw), []byte(`{"n":1,"k":0}`), "ordered")
	}
	f.Add("id", "name", []byte(nil), []byte(`[]`), "")
	f.Fuzz(func(t *testing.T, id, name string, args1, args2 []byte, mode string) {
		calls := []Call{
			{ID: id, Name: name, Arguments: args1},
			{ID: name, Name: id, Arguments: args2},
		}
		want := referenceRequestBytes(calls, dispatch.Mode(mode), "stop")
		var w canonWriter
		if w.request(calls, dispatch.Mode(mode), "stop") && !bytes.Equal(w.out, want) {
			t.Fatalf("request wrote\n%q, want\n%q", w.out, want)
		}
		if got, want := requestHash(calls, dispatch.Mode(mode), "stop"), referenceRequestHash(calls, dispatch.Mode(mode), "stop"); got != want {
			t.Fatalf("requestHash = %s, want %s", got, want)
		}
		if got, want := canonicalJSON(args1), referenceCanonicalJSON(args1); !bytes.Equal(got, want) {
			t.Fatalf("canonicalJSON(%q) = %q, want %q", args1, got, want)
		}
	})
}

var (
	benchCallsSmall = []Call{
		{ID: "call_1", Name: "counter", Arguments: json.RawMessage(`{"n":123,"k":0}`)},
		{ID: "call_2", Name: "counter", Arguments: json.RawMessage(`{"n":124,"k":1}`)},
		{ID: "call_3", Name: "counter", Arguments: json.RawMessage(`{"n":125,"k":2}`)},
		{ID: "call_4", Name: "counter", Arguments: json.RawMessage(`{"n":126,"k":3}`)},
	}
	benchLargeArguments = json.RawMessage(`{
  "path": "src/server/handler.go",
  "options": {"recursive": true, "max_depth": 3, "include": ["*.go", "*.md"],
    "exclude": {"vendor": true, "testdata": false}, "follow_links": false},
  "query": "func (s *Server) ServeHTTP",
  "limit": 50,
  "context": {"lines_before": 2, "lines_after": 2},
  "content": "package server\n\nfunc main() {\n\tprintln(\"hello, world\")\n}\n",
  "metadata": {"request_id": "req-8f14e45f", "user": {"name": "ana", "id": 42, "roles": ["dev", "ops"]}},
  "edits": [{"line": 10, "text": "return nil", "kind": "replace"}, {"line": 12, "text": "}", "kind": "insert"}]
}`)
	benchCallsLarge = []Call{
		{ID: "toolu_01", Name: "search_code", Arguments: benchLargeArguments},
		{ID: "toolu_02", Name: "search_code", Arguments: benchLargeArguments},
		{ID: "toolu_03", Name: "search_code", Arguments: benchLargeArguments},
		{ID: "toolu_04", Name: "search_code", Arguments: benchLargeArguments},
	}
)

// BenchmarkRequestHash compares requestHash with the marshalling it
// replaced (json), on four small calls and on four larger, nested ones.
func BenchmarkRequestHash(b *testing.B) {
	for _, calls := range []struct {
		name  string
		calls []Call
	}{{"small", benchCallsSmall}, {"large", benchCallsLarge}} {
		b.Run(calls.name+"/json", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				referenceRequestHash(calls.calls, "ordered", "stop")
			}
		})
		b.Run(calls.name+"/direct", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				requestHash(calls.calls, "ordered", "stop")
			}
		})
	}
}
