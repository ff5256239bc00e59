package turn

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// normalise is what a JSON value decoded by encoding/json (which reads
// invalid UTF-8 and unpaired surrogates as U+FFFD) becomes once repaired:
// NULs are U+FFFD too.
func normalise(v any) any {
	switch x := v.(type) {
	case string:
		return strings.ReplaceAll(x, "\x00", "\uFFFD")
	case []any:
		for i := range x {
			x[i] = normalise(x[i])
		}
		return x
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[strings.ReplaceAll(k, "\x00", "\uFFFD")] = normalise(e)
		}
		return m
	}
	return v
}

// FuzzRepairJSON holds repairJSON to encoding/json: the repaired text is
// valid JSON and valid UTF-8 without NUL, \u0000 or unpaired surrogate
// escapes, decodes to the value encoding/json reads from the original (with
// NUL as U+FFFD), and is the original itself when nothing needed repair.
func FuzzRepairJSON(f *testing.F) {
	for _, s := range []string{
		`{"s":"a\u0000b"}`, "{\"s\":\"\xff\"}", `["\ud800","\udc00x","\ud83d\ude00"]`,
		`{"k\\u0000":"\\\\u0000"}`, `"\u00e9\ufffd"`, `[1,2.5e3,true,null,{}]`, "\"\xe2\x82\"", `"\uD800\uD800\uDC00"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !json.Valid(b) {
			return
		}
		out, n := repairJSON(b)
		if !json.Valid(out) || !utf8.Valid(out) || bytes.IndexByte(out, 0) >= 0 {
			t.Fatalf("repairJSON(%q) = %q: not valid JSON in UTF-8 without NUL", b, out)
		}
		if again, m := repairJSON(out); m != 0 || !bytes.Equal(again, out) {
			t.Fatalf("repairJSON(%q) = %q, which needs %d more repairs", b, out, m)
		}
		if n == 0 && !bytes.Equal(out, b) {
			t.Fatalf("repairJSON(%q) changed it to %q without counting a repair", b, out)
		}
		var want, got any
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatal(err)
		}
		if want = normalise(want); !reflect.DeepEqual(got, want) {
			t.Fatalf("repairJSON(%q) = %q decodes to %#v, want %#v", b, out, got, want)
		}
	})
}

// FuzzRepairText: the repaired text is valid UTF-8 without NUL, equal to
// strings.ToValidUTF8's reading byte for byte (one U+FFFD per bad byte, as
// encoding/json writes them), and the original when nothing needed repair.
func FuzzRepairText(f *testing.F) {
	for _, s := range []string{"plain", "a\xff\x00b\xe2\x82", "\u00e9\x00", ""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		out, n := repairText(b)
		if !utf8.Valid(out) || bytes.IndexByte(out, 0) >= 0 {
			t.Fatalf("repairText(%q) = %q: not UTF-8 without NUL", b, out)
		}
		if n == 0 && !bytes.Equal(out, b) {
			t.Fatalf("repairText(%q) changed it to %q without counting a repair", b, out)
		}
		// encoding/json replaces each bad byte by U+FFFD; NULs it escapes.
		enc, _ := json.Marshal(string(b))
		var dec string
		_ = json.Unmarshal(enc, &dec)
		if want := strings.ReplaceAll(dec, "\x00", "\uFFFD"); string(out) != want {
			t.Fatalf("repairText(%q) = %q, want %q", b, out, want)
		}
		if got := strings.Count(string(out), "\uFFFD") - strings.Count(string(b), "\uFFFD"); got != n {
			t.Fatalf("repairText(%q) counted %d repairs, made %d", b, n, got)
		}
	})
}
