package rawjson_test

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/turnd/turnd/internal/rawjson"
)

// seeds are JSON texts, valid and not, of every shape the package handles.
var seeds = []string{
	``, ` `, `null`, `true`, `false`, `tru`, `nul`, `truex`, `0`, `-0`, `01`, `1.`, `.5`, `-`, `+1`,
	`1e10`, `-1.5E-7`, `1e+`, `123abc`, `"x"`, `"abc`, `"abc\`, `"\x"`, `"\u12"`, `"\u12g4"`,
	`"\ud83d\ude00"`, `"\ud800"`, `"\u0000"`, `"\b\f\n\r\t"`, `"\"\\\/"`, `"a<b>&c"`, "\"\u2028\u2029\"",
	"\"\xff\"", "\"a\xc3\"", "\"\x01\"", "\"a\nb\"", "\"\x7f\"", `{}`, `[]`, `{ }`, "[ \n ]",
	`{"a":1}`, `{"a":1,}`, `[1,]`, `{"a"}`, `{"a" 1}`, `{`, `[`, `{1:2}`, `[1 2]`, `{"a":1}{"b":2}`,
	`{"b":{"d":1,"c":[{"z":1,"y":2},{}]},"a":[1,2,{"x":null}]}`, `{"a":1,"a":2}`, `{"a":1,"\u0061":2}`,
	`{"é":"ü","a":"日本語","z":1}`, `{"html":"<a href=\"x\">&amp;</a>"}`, " \t\n\r{ \"b\" : [ 1 , 2 ] ,\n\"a\" : { } } \n",
	"{\"\xff\":1,\"\xfe\":2}", `{"ab":1,"b":2,"ba":3}`, `"line\u2028sep"`,
	strings.Repeat("[", 600) + strings.Repeat("]", 600),
}

func FuzzAgainstEncodingJSON(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		valid := json.Valid(raw)
		depth := nesting(raw)

		// Validity: the recursive scanner (within its depth) and the
		// tokenizer agree with json.Valid.
		s := rawjson.Scanner{B: raw}
		end := s.Value(s.Space(0), 0)
		if got := end >= 0 && s.Space(end) == len(raw); got != valid && depth < rawjson.MaxDepth {
			t.Fatalf("Scanner says valid = %v of %q, json.Valid %v", got, raw, valid)
		}
		if got := tokenize(raw) == nil; got != valid && depth < 10000 {
			t.Fatalf("Tokenizer says valid = %v of %q, json.Valid %v", got, raw, valid)
		}
		if got := rawjson.Valid(raw); got != valid && depth < 10000 {
			t.Fatalf("Valid(%q) = %v, json.Valid %v", raw, got, valid)
		}

		// Compaction equals json.Compact.
		var want bytes.Buffer
		compactErr := json.Compact(&want, raw)
		got, ok := rawjson.AppendCompact([]byte("prefix"), raw)
		switch {
		case ok && compactErr != nil:
			t.Fatalf("AppendCompact accepted %q, which json.Compact refuses: %v", raw, compactErr)
		case ok && string(got) != "prefix"+want.String():
			t.Fatalf("AppendCompact(%q) = %q, json.Compact %q", raw, got[6:], want.String())
		case !ok && compactErr == nil && depth < rawjson.MaxDepth:
			t.Fatalf("AppendCompact declined %q", raw)
		}

		// Quoting: each rule as encoding/json writes or decodes it.
		checkQuote(t, string(raw))

		// Canonical form: the one-pass writer is the re-encoding, a value
		// claimed canonical re-encodes to itself, and the form is stable.
		re := rawjson.Reencode(raw)
		var c rawjson.Canonicalizer
		if out, ok := c.Append([]byte("prefix"), raw); ok && !bytes.Equal(out[6:], re) {
			t.Fatalf("Canonicalizer wrote %q for %q, Reencode %q", out[6:], raw, re)
		} else if !ok && valid && depth < rawjson.MaxCanonicalDepth {
			t.Fatalf("Canonicalizer declined %q", raw)
		}
		if rawjson.IsCanonical(raw) && !bytes.Equal(re, raw) {
			t.Fatalf("%q claimed canonical, re-encodes as %q", raw, re)
		}
		if canon := rawjson.Canonical(raw); !bytes.Equal(canon, re) {
			t.Fatalf("Canonical(%q) = %q, Reencode %q", raw, canon, re)
		} else if valid && !bytes.Equal(rawjson.Canonical(canon), canon) {
			t.Fatalf("Canonical(%q) is not stable", canon)
		}
	})
}

func checkQuote(t *testing.T, s string) {
	t.Helper()
	marshalled, _ := json.Marshal(s)
	if got := rawjson.AppendString(nil, s, rawjson.EscapeHTML); !bytes.Equal(got, marshalled) {
		t.Fatalf("AppendString(%q, EscapeHTML) = %s, json.Marshal %s", s, got, marshalled)
	}
	var enc bytes.Buffer
	e := json.NewEncoder(&enc)
	e.SetEscapeHTML(false)
	_ = e.Encode(s)
	if got := rawjson.AppendString(nil, []byte(s), rawjson.EscapeNoHTML); string(got)+"\n" != enc.String() {
		t.Fatalf("AppendString(%q, EscapeNoHTML) = %s, json.Encoder %s", s, got, enc.Bytes())
	}
	var want, back string
	_ = json.Unmarshal(marshalled, &want)
	minimal := rawjson.AppendString(nil, s, rawjson.EscapeMinimal)
	if err := json.Unmarshal(minimal, &back); err != nil || back != want {
		t.Fatalf("AppendString(%q, EscapeMinimal) = %s decodes to %q (%v), want %q", s, minimal, back, err, want)
	}
	if utf8.ValidString(s) && back != s {
		t.Fatalf("AppendString(%q, EscapeMinimal) decodes to %q", s, back)
	}
}

func tokenize(raw []byte) error {
	tz := rawjson.Tokenizer{Data: raw}
	for {
		tok, err := tz.Next()
		if err != nil || tok.Kind == rawjson.TokenEOF {
			return err
		}
	}
}

// nesting is an upper bound of raw's nesting depth.
func nesting(raw []byte) int {
	return bytes.Count(raw, []byte("[")) + bytes.Count(raw, []byte("{"))
}

func TestSeeds(t *testing.T) {
	t.Parallel()
	for _, s := range seeds {
		checkQuote(t, s)
		if got, want := tokenize([]byte(s)) == nil, json.Valid([]byte(s)); got != want {
			t.Errorf("Tokenizer: valid(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestQuoteRules(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		e    rawjson.Escaping
		want string
	}{
		{"a<b>&c", rawjson.EscapeHTML, `"a\u003cb\u003e\u0026c"`},
		{"a<b>&c", rawjson.EscapeNoHTML, `"a<b>&c"`},
		{"a<b>&c", rawjson.EscapeMinimal, `"a<b>&c"`},
		{"\t\n\r\b\f\x01", rawjson.EscapeNoHTML, `"\t\n\r\b\f\u0001"`},
		{"\t\n\r\b\f\x01", rawjson.EscapeMinimal, `"\u0009\n\u000d\u0008\u000c\u0001"`},
		{"\u2028\xff", rawjson.EscapeNoHTML, `"\u2028\ufffd"`},
		{"\u2028\xff", rawjson.EscapeMinimal, "\"\u2028\xff\""},
		{`q"b\`, rawjson.EscapeMinimal, `"q\"b\\"`},
		{"é😀", rawjson.EscapeHTML, `"é😀"`},
	} {
		if got := rawjson.AppendString([]byte("x"), tc.in, tc.e); string(got) != "x"+tc.want {
			t.Errorf("AppendString(%q, %d) = %s, want %s", tc.in, tc.e, got[1:], tc.want)
		}
	}
}

func TestTokenizerCompactAndErrors(t *testing.T) {
	t.Parallel()
	raw := []byte(" { \"a\" : [ 1 , \"x y\" ] } ")
	tz := rawjson.Tokenizer{Data: raw}
	var kinds []rawjson.TokenKind
	for {
		tok, err := tz.Next()
		if err != nil {
			t.Fatal(err)
		}
		if tok.Kind == rawjson.TokenEOF {
			break
		}
		kinds = append(kinds, tok.Kind)
	}
	want := []rawjson.TokenKind{rawjson.TokenBeginObject, rawjson.TokenKey, rawjson.TokenBeginArray,
		rawjson.TokenNumber, rawjson.TokenString, rawjson.TokenEndArray, rawjson.TokenEndObject}
	if !slices.Equal(kinds, want) {
		t.Errorf("kinds %v, want %v", kinds, want)
	}
	if tz.Compact != len(`{"a":[1,"x y"]}`) {
		t.Errorf("Compact = %d", tz.Compact)
	}
	err := tokenize([]byte(`[1,`))
	if se, ok := err.(*rawjson.SyntaxError); !ok || se.Offset != 3 {
		t.Errorf("error %v, want a SyntaxError at byte 3", err)
	}
	if tokenize(bytes.Repeat([]byte("["), 20000)) == nil {
		t.Error("an unterminated deep array accepted")
	}
	deep := append(bytes.Repeat([]byte("["), 20000), bytes.Repeat([]byte("]"), 20000)...)
	if err := tokenize(deep); err != nil {
		t.Errorf("deep array refused: %v", err)
	}
	if !rawjson.Valid(deep) || rawjson.Valid(deep[1:]) {
		t.Error("Valid misjudges deep arrays")
	}
}

func TestCanonicalizerReuse(t *testing.T) {
	t.Parallel()
	var c rawjson.Canonicalizer
	for range 3 {
		for _, s := range seeds {
			out, ok := c.Append(nil, []byte(s))
			if ok && !bytes.Equal(out, rawjson.Reencode([]byte(s))) {
				t.Fatalf("Append(%q) = %q after reuse", s, out)
			}
		}
		c.Reset()
	}
}
