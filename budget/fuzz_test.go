package budget

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// fuzzProjector derives a projector with literal caps from fuzz arguments.
func fuzzProjector(t *testing.T, limit uint16, maxLines uint8, shape uint8) *Projector {
	t.Helper()
	modes := []Mode{ModeBytes, ModeTokens}
	windows := []Window{WindowHeadTail, WindowHead, WindowTail}
	return exact(t, int(limit), int(maxLines), modes[shape&1], windows[int(shape>>1)%3], float64(shape>>3)/31)
}

// FuzzProject checks the rules of text projection, and that a stream fed
// in chunks agrees with it, on any input.
func FuzzProject(f *testing.F) {
	seeds := []string{
		"", "a", "a\nb\n", "a\r\nb\r\nc", "héllo\r\nwörld\n", "\xff\xfe\x80abc\n", strings.Repeat("x", 100),
		"𝄞𝄞𝄞\n\n\n", strings.Repeat("line\n", 30), "no newline at all but long enough to cut",
	}
	for i, s := range seeds {
		f.Add([]byte(s), uint16(i*3), uint8(i%5), uint8(i*37))
	}
	f.Fuzz(func(t *testing.T, in []byte, limit uint16, maxLines uint8, shape uint8) {
		p := fuzzProjector(t, limit%512, maxLines%16, shape)
		r := p.Project(in)
		checkText(t, p, in, r)

		s := p.NewStream()
		for rest, chunk := in, 1+int(shape%13); len(rest) > 0; {
			n := min(chunk, len(rest))
			s.Write(rest[:n])
			rest = rest[n:]
		}
		if got := s.Result(); !reflect.DeepEqual(got, r) {
			t.Fatalf("stream %s, Project %s", summary(got), summary(r))
		}
	})
}

// FuzzProjectJSON checks the rules of JSON projection on any input: valid
// JSON stays valid and within the caps, invalid input is rejected like
// encoding/json rejects it, and a fallback equals Project.
func FuzzProjectJSON(f *testing.F) {
	long := strings.Repeat(`abc\n\u00e9\ud83d\ude00é𝄞`, 20)
	seeds := []string{
		`{"a":"` + long + `","b":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15],"c":{"d":null,"e":true}}`,
		"[" + seq(200) + "]",
		`["` + long + `","` + long + `"]`,
		`{"z":1e400,"a":-0.0,"m":12345678901234567890123}`,
		"  [\n 1,\n 2\n ]\n",
		`[[1,2,3],[4,5,6],[7,8,9],[10,11,12]]`,
		strings.Repeat("[", 50) + strings.Repeat("]", 50),
		`{"a":[{"b":"` + long + `"},{"c":[` + seq(50) + `]}]}`,
		`{`, `[1,]`, `"\x"`, "\"\xff\xfe\"", `nul`, ``,
	}
	for i, s := range seeds {
		f.Add([]byte(s), uint16(40+i*23), uint8(i*37))
	}
	f.Fuzz(func(t *testing.T, raw []byte, limit uint16, shape uint8) {
		p := fuzzProjector(t, limit%1024, shape>>6, shape)
		r, err := p.ProjectJSON(raw)
		checkJSON(t, p, raw, r, err)
		// ProjectJSON's short cut for small outputs answers what the
		// tree would.
		tr, terr := p.projectTree(raw)
		if fmt.Sprint(err) != fmt.Sprint(terr) || !reflect.DeepEqual(r, tr) {
			t.Fatalf("ProjectJSON = %s, %v; through the tree %s, %v", summary(r), err, summary(tr), terr)
		}
		if err == nil && r.JSON && r.Truncated && utf8.Valid(raw) && len(raw) <= crossCheckLimit {
			if dropped := checkShape(t, p, decodeOrdered(t, raw), decodeOrdered(t, r.Text)); dropped != r.DroppedItems {
				t.Fatalf("DroppedItems = %d, markers count %d", r.DroppedItems, dropped)
			}
		}
	})
}
