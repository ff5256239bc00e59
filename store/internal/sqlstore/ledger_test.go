package sqlstore_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/turnd/turnd/store/internal/sqlstore"
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
	b, err := sqlstore.LinesJSON(k, lines)
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
		got, err := sqlstore.DecodeLines(nil, "s", 10, b, tc.after, tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("after %d limit %d:\n got %+v\nwant %+v", tc.after, tc.limit, got, tc.want)
		}
	}
	// A full page takes nothing more.
	full := []turn.Line{{Seq: 1}}
	if got, _ := sqlstore.DecodeLines(full, "s", 10, b, 0, 1); len(got) != 1 {
		t.Errorf("a full page grew to %d lines", len(got))
	}
}

func TestLinesRefused(t *testing.T) {
	t.Parallel()
	k := turn.TurnKey{SessionID: "s", TurnID: "t"}
	if _, err := sqlstore.LinesJSON(k, []turn.Line{{Kind: "x", Data: json.RawMessage(`{"a":`)}}); err == nil {
		t.Error("LinesJSON accepted invalid data")
	}
	for _, bad := range []string{``, `{`, `{"t":"x"}`, `[{"a":"not a number"}]`} {
		if _, err := sqlstore.DecodeLines(nil, "s", 1, []byte(bad), 0, 10); err == nil {
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
		b, err := sqlstore.LinesJSON(k, []turn.Line{{Kind: "k", Data: data}})
		if err != nil {
			t.Fatal(err)
		}
		lines, err := sqlstore.DecodeLines(nil, "s", 1, b, 0, 1)
		if err != nil || len(lines) != 1 || !bytes.Equal(lines[0].Data, data) {
			t.Fatalf("data %q came back as %v (%v)", data, lines, err)
		}
	})
}

// roundTripString writes s as a line's call id and kind and reads the line
// back; want is s as encoding/json gives it back (invalid UTF-8 replaced).
func roundTripString(t *testing.T, k turn.TurnKey, s string) (b []byte, got turn.Line, want string) {
	t.Helper()
	b, err := sqlstore.LinesJSON(k, []turn.Line{{CallID: s, Kind: turn.LineKind(s)}})
	if err != nil {
		t.Fatal(err)
	}
	lines, err := sqlstore.DecodeLines(nil, "s", 1, b, 0, 1)
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

// A page takes lines while their LineBytes fit its bound, the first one
// whatever its size, and takes nothing once full.
func TestPageBytes(t *testing.T) {
	t.Parallel()
	k := turn.TurnKey{SessionID: "s", TurnID: "t"}
	lines := make([]turn.Line, 4)
	for i := range lines {
		lines[i] = turn.Line{TurnID: "t", Kind: turn.LineCallAdmitted, Data: json.RawMessage(`"` + strings.Repeat("x", 98) + `"`)}
	}
	size := turn.LineBytes(lines[0])
	b, err := sqlstore.LinesJSON(k, lines)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		after           int64
		limit, maxBytes int
		want            int
		full            bool
	}{
		{0, 10, 1, 1, true},
		{0, 10, size, 1, true},
		{0, 10, 2*size - 1, 1, true},
		{0, 10, 2 * size, 2, true},
		{0, 10, 4 * size, 4, false},
		{0, 3, 4 * size, 3, true},
		{2, 10, 1, 1, true}, // the first line after 2 (seq 3)
	}
	for _, tt := range tests {
		p := sqlstore.NewPage(tt.after, tt.limit, tt.maxBytes)
		full, err := p.Add("s", 1, b)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Lines) != tt.want || full != tt.full || p.Lines[0].Seq != tt.after+1 {
			t.Errorf("after %d limit %d maxBytes %d: %d lines (full %v), want %d (full %v)", tt.after, tt.limit, tt.maxBytes, len(p.Lines), full, tt.want, tt.full)
		}
		if full {
			if again, _ := p.Add("s", 5, b); !again || len(p.Lines) != tt.want {
				t.Errorf("a full page took more lines")
			}
		}
	}
}

func TestLateDecision(t *testing.T) {
	t.Parallel()
	h := func(b byte) [32]byte { return [32]byte{b} }
	hashes := func(bs ...byte) []byte {
		var out []byte
		for _, b := range bs {
			x := h(b)
			out = append(out, x[:]...)
		}
		return out
	}
	tests := []struct {
		kept []byte
		hash byte
		max  int
		want turn.LateOutcome
	}{
		{nil, 1, 2, turn.LateRecorded},
		{hashes(1), 1, 2, turn.LateRepeated},
		{hashes(1), 2, 2, turn.LateRecorded},
		{hashes(1, 2), 2, 2, turn.LateRepeated},
		{hashes(1, 2), 3, 2, turn.LateDropped},
		{hashes(1, 2, 3), 3, 8, turn.LateRepeated},
	}
	for _, tt := range tests {
		if got := sqlstore.LateDecision(tt.kept, turn.Late{PayloadHash: h(tt.hash), Max: tt.max}); got != tt.want {
			t.Errorf("%d kept, hash %d, max %d: %s, want %s", len(tt.kept)/32, tt.hash, tt.max, got, tt.want)
		}
	}
}
