package budget

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"unicode/utf8"
)

// mustNew builds a projector or fails the test.
func mustNew(t testing.TB, c Config, opts ...Option) *Projector {
	t.Helper()
	p, err := New(c, opts...)
	if err != nil {
		t.Fatalf("New(%+v): %v", c, err)
	}
	return p
}

// exact builds a projector whose zero fields are literal.
func exact(t testing.TB, limit, maxLines int, mode Mode, window Window, share float64) *Projector {
	t.Helper()
	return mustNew(t, Config{Limit: limit, MaxLines: maxLines, Mode: mode, Window: window, HeadShare: share}, NoDefaults())
}

func countLines(b []byte) int64 { return joinedLines(b, nil) }

// summary formats a result for failure messages, text shortened.
func summary(r Result) string {
	return fmt.Sprintf("{Text:%.300q Truncated:%v JSON:%v OriginalBytes:%d OriginalLines:%d DroppedBytes:%d DroppedLines:%d Bound:%q Unit:%q DroppedItems:%d}",
		r.Text, r.Truncated, r.JSON, r.OriginalBytes, r.OriginalLines, r.DroppedBytes, r.DroppedLines, r.Bound, r.Unit, r.DroppedItems)
}

// splitPreview takes a truncated text result apart into the kept head and
// tail of in, checking that Text is exactly head, the marker line and tail.
func splitPreview(in []byte, r Result, marker string) (head, tail []byte, err error) {
	kept := len(in) - int(r.DroppedBytes)
	sepLen := len(r.Text) - kept - len(marker) - 1
	if sepLen != 0 && sepLen != 1 {
		return nil, nil, fmt.Errorf("text length %d does not match %d kept bytes and marker %q", len(r.Text), kept, marker)
	}
	line := []byte(marker + "\n")
	for h := 0; h <= kept; h++ {
		needSep := h > 0 && in[h-1] != '\n'
		if needSep != (sepLen == 1) {
			continue
		}
		if !bytes.Equal(r.Text[:h], in[:h]) {
			break // a longer head cannot match either
		}
		if sepLen == 1 && r.Text[h] != '\n' {
			continue
		}
		at := h + sepLen
		if !bytes.Equal(r.Text[at:at+len(line)], line) {
			continue
		}
		t := kept - h
		if bytes.Equal(r.Text[at+len(line):], in[len(in)-t:]) {
			return in[:h], in[len(in)-t:], nil
		}
	}
	return nil, nil, fmt.Errorf("text %q is not head + marker line %q + tail of the input", r.Text, marker)
}

// checkText asserts every rule of text projection on one result.
func checkText(t testing.TB, p *Projector, in []byte, r Result) {
	t.Helper()
	c := p.Config()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("config %+v, input %.300q:\n%s\nresult: %s", c, in, fmt.Sprintf(format, args...), summary(r))
	}
	if r.OriginalBytes != int64(len(in)) || r.OriginalLines != countLines(in) {
		fail("original counts %d bytes %d lines, want %d, %d", r.OriginalBytes, r.OriginalLines, len(in), countLines(in))
	}
	if r.JSON || r.DroppedItems != 0 {
		fail("text projection claims JSON")
	}
	fits := len(in) <= p.sizeCap && countLines(in) <= int64(c.MaxLines)
	if !r.Truncated {
		if !fits || !bytes.Equal(r.Text, in) || r.DroppedBytes != 0 || r.DroppedLines != 0 || r.Bound != BoundNone || r.Unit != "" {
			fail("untruncated result must be the input byte for byte, and only when it fits")
		}
		return
	}
	if fits {
		fail("truncated an input within both caps")
	}
	wantBound, wantUnit, count := BoundLines, unitLines, r.DroppedLines
	if len(in) > p.sizeCap {
		wantBound, wantUnit, count = BoundSize, p.unit(), p.inUnit(r.DroppedBytes)
	}
	if r.Bound != wantBound || r.Unit != wantUnit {
		fail("bound %q unit %q, want %q %q", r.Bound, r.Unit, wantBound, wantUnit)
	}
	marker := fmt.Sprintf("...%d %s truncated...", count, wantUnit)
	head, tail, err := splitPreview(in, r, marker)
	if err != nil {
		fail("%v", err)
	}
	if len(head)+len(tail) > p.sizeCap {
		fail("preview of %d bytes exceeds the size cap %d", len(head)+len(tail), p.sizeCap)
	}
	if lines := joinedLines(head, tail); lines > int64(c.MaxLines) {
		fail("preview of %d lines exceeds the line cap %d", lines, c.MaxLines)
	}
	if r.DroppedBytes <= 0 && wantBound == BoundSize || r.DroppedLines <= 0 && wantBound == BoundLines {
		fail("nothing dropped")
	}
	if want := r.OriginalLines - joinedLines(head, tail); r.DroppedLines != want {
		fail("dropped lines %d, want %d", r.DroppedLines, want)
	}
	if c.Window == WindowHead && len(tail) > 0 || c.Window == WindowTail && len(head) > 0 {
		fail("window %s kept head %q and tail %q", c.Window, head, tail)
	}
	if utf8.Valid(in) && !utf8.Valid(r.Text) {
		fail("valid UTF-8 in, invalid out")
	}
	if wantBound == BoundLines {
		// Only whole lines are dropped when the size cap is not exceeded.
		if len(head) > 0 && head[len(head)-1] != '\n' || len(tail) > 0 && in[len(in)-len(tail)-1] != '\n' {
			fail("line-bound cut inside a line: head %q tail %q", head, tail)
		}
	}
}

// checkJSON asserts every rule of JSON projection on one result.
func checkJSON(t testing.TB, p *Projector, raw []byte, r Result, err error) {
	t.Helper()
	c := p.Config()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("config %+v, input %.300q:\n%s\nresult: %s", c, raw, fmt.Sprintf(format, args...), summary(r))
	}
	// encoding/json rejects nesting beyond 10000, which short inputs lack.
	if len(raw) < 2*maxDepth {
		if valid := json.Valid(raw); valid != (err == nil) {
			fail("json.Valid = %v but ProjectJSON error = %v", valid, err)
		}
	}
	if err != nil {
		if !errors.Is(err, ErrInvalidJSON) {
			fail("error %v does not wrap ErrInvalidJSON", err)
		}
		return
	}
	if !r.JSON {
		if want := p.Project(raw); !reflect.DeepEqual(r, want) {
			fail("fallback differs from Project: %s", summary(want))
		}
		return
	}
	if !json.Valid(r.Text) {
		fail("result claims JSON but is not valid")
	}
	if r.OriginalBytes != int64(len(raw)) || r.OriginalLines != countLines(raw) {
		fail("wrong original counts")
	}
	if len(r.Text) > p.sizeCap || countLines(r.Text) > int64(c.MaxLines) {
		fail("result of %d bytes, %d lines exceeds the caps", len(r.Text), countLines(r.Text))
	}
	if r.DroppedBytes != r.OriginalBytes-int64(len(r.Text)) || r.DroppedLines != r.OriginalLines-countLines(r.Text) {
		fail("dropped counts inconsistent")
	}
	if utf8.Valid(raw) && !utf8.Valid(r.Text) {
		fail("valid UTF-8 in, invalid out")
	}
	if !r.Truncated {
		var compact bytes.Buffer
		if err := json.Compact(&compact, raw); err != nil {
			fail("json.Compact: %v", err)
		}
		if !bytes.Equal(r.Text, raw) && !bytes.Equal(r.Text, compact.Bytes()) {
			fail("untruncated JSON must be the input or its compact form")
		}
		if r.Bound != BoundNone || r.DroppedItems != 0 {
			fail("untruncated result with a bound")
		}
		return
	}
	if r.Bound != BoundSize || r.Unit != p.unit() {
		fail("bound %q unit %q", r.Bound, r.Unit)
	}
	if len(raw) > crossCheckLimit {
		return
	}
	if want, got := numbers(t, raw), numbers(t, r.Text); !subset(got, want) {
		fail("numbers changed: %v not within %v", got, want)
	}
}

// crossCheckLimit is the largest input whose projection tests decode with
// encoding/json's slow token API.
const crossCheckLimit = 1 << 20

// numbers lists the number literals of a JSON text.
func numbers(t testing.TB, text []byte) map[string]bool {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(text))
	d.UseNumber()
	out := map[string]bool{}
	for {
		tok, err := d.Token()
		if err != nil {
			return out
		}
		if n, ok := tok.(json.Number); ok {
			out[string(n)] = true
		}
	}
}

func subset(a, b map[string]bool) bool {
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}
