package codec_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/turnd/turnd/store/internal/codec"
	"github.com/turnd/turnd/turn"
)

func TestLinesRoundTrip(t *testing.T) {
	t.Parallel()
	k := turn.TurnKey{SessionID: "s", TurnID: "t"}
	at := time.Date(2031, 3, 14, 15, 9, 26, 535897000, time.UTC)
	lines := []turn.Line{
		{Kind: turn.LineTurnReceived, At: at, Data: json.RawMessage(" {\"a\" : \"é\\u00e9 <b>\"}\n")},
		{TurnID: "other", CallID: "c\"1\u2028", Kind: turn.LineCallAnswered, At: at.Add(time.Microsecond), Data: json.RawMessage(`null`)},
		{CallID: "c2", Kind: turn.LineTurnSettled, At: at.Add(time.Second)},
	}
	b, err := codec.LinesJSON(k, lines)
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(b) {
		t.Fatalf("batch is not JSON: %s", b)
	}
	want := make([]turn.Line, len(lines))
	for i, l := range lines {
		l.Seq, l.SessionID = int64(10+i), "s"
		if l.TurnID == "" {
			l.TurnID = "t"
		}
		want[i] = l
	}
	for _, tc := range []struct {
		after int64
		limit int
		want  []turn.Line
	}{
		{0, 10, want},
		{9, 3, want},
		{10, 10, want[1:]},
		{10, 1, want[1:2]},
		{12, 10, nil},
	} {
		got, err := codec.DecodeLines(nil, "s", 10, b, tc.after, tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("after %d limit %d:\n got %+v\nwant %+v", tc.after, tc.limit, got, tc.want)
		}
	}
	// A full page takes nothing more.
	full := []turn.Line{{Seq: 1}}
	if got, _ := codec.DecodeLines(full, "s", 10, b, 0, 1); len(got) != 1 {
		t.Errorf("a full page grew to %d lines", len(got))
	}
}

func TestLinesRefused(t *testing.T) {
	t.Parallel()
	k := turn.TurnKey{SessionID: "s", TurnID: "t"}
	if _, err := codec.LinesJSON(k, []turn.Line{{Kind: "x", Data: json.RawMessage(`{"a":`)}}); err == nil {
		t.Error("LinesJSON accepted invalid data")
	}
	for _, bad := range []string{``, `{`, `{"t":"x"}`, `[{"a":"not a number"}]`} {
		if _, err := codec.DecodeLines(nil, "s", 1, []byte(bad), 0, 10); err == nil {
			t.Errorf("DecodeLines accepted %q", bad)
		}
	}
}

// Strings of every kind come back as they went in (invalid UTF-8 as
// encoding/json would give it).
func TestLineStrings(t *testing.T) {
	t.Parallel()
	k := turn.TurnKey{SessionID: "s", TurnID: "t"}
	for _, s := range []string{"", "plain", "q\"b\\s/", "ctl\x00\x01\n\r\t\x1f", "é😀\u2028<&>", "bad\xff\xfeutf8"} {
		_, got, want := roundTripString(t, k, s)
		if got.CallID != want || string(got.Kind) != want {
			t.Errorf("%q came back as %q", s, got.CallID)
		}
	}
}

// FuzzLineStrings: any string comes back from the ledger as encoding/json
// would give it back, and is written byte for byte as one escape per byte
// that needs one (the format rows already stored use).
func FuzzLineStrings(f *testing.F) {
	for _, s := range []string{"", "plain", "q\"b\\s/", "ctl\x00\x01\n\r\t\x1f", "é😀\u2028<&>", "bad\xff\xfeutf8", `a"b"c\\`} {
		f.Add(s)
	}
	k := turn.TurnKey{SessionID: "s", TurnID: "t"}
	f.Fuzz(func(t *testing.T, s string) {
		b, got, want := roundTripString(t, k, s)
		if got.CallID != want {
			t.Fatalf("%q came back as %q", s, got.CallID)
		}
		if utf8.ValidString(s) {
			enc := []byte(`,"c":` + escapeEachByte(s) + `,`)
			if !bytes.Contains(b, enc) {
				t.Fatalf("%q written as %s, want %s inside", s, b, enc)
			}
		}
		// As line data (JSON text, escaped from bytes): back byte for byte.
		data, _ := json.Marshal(s)
		data = append(append([]byte(" "), data...), '\n')
		b, err := codec.LinesJSON(k, []turn.Line{{Kind: "k", Data: data}})
		if err != nil {
			t.Fatal(err)
		}
		lines, err := codec.DecodeLines(nil, "s", 1, b, 0, 1)
		if err != nil || len(lines) != 1 || !bytes.Equal(lines[0].Data, data) {
			t.Fatalf("data %q came back as %v (%v)", data, lines, err)
		}
	})
}

// roundTripString writes s as a line's call id and kind and reads the line
// back; want is s as encoding/json gives it back (invalid UTF-8 replaced).
func roundTripString(t *testing.T, k turn.TurnKey, s string) (b []byte, got turn.Line, want string) {
	t.Helper()
	b, err := codec.LinesJSON(k, []turn.Line{{CallID: s, Kind: turn.LineKind(s)}})
	if err != nil {
		t.Fatal(err)
	}
	lines, err := codec.DecodeLines(nil, "s", 1, b, 0, 1)
	if err != nil {
		t.Fatalf("%q: %v (%s)", s, err, b)
	}
	q, _ := json.Marshal(s)
	_ = json.Unmarshal(q, &want)
	return b, lines[0], want
}

// escapeEachByte is the ledger's string escape, one byte at a time.
func escapeEachByte(s string) string {
	const hex = "0123456789abcdef"
	b := []byte{'"'}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '\n':
			b = append(b, '\\', 'n')
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return string(append(b, '"'))
}
