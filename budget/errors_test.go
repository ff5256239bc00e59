package budget

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// lines joins n lines made by f, then the extra lines at position at.
func shaped(n, at int, f func(i int) string, extra ...string) []byte {
	var b strings.Builder
	for i := range n {
		if i == at {
			for _, e := range extra {
				b.WriteString(e + "\n")
			}
		}
		b.WriteString(f(i) + "\n")
	}
	return []byte(b.String())
}

func TestErrorsRealOutputs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   []byte
		want []string // lines of the dropped middle that must survive
	}{
		{"go build", shaped(4000, 2100, func(i int) string {
			return fmt.Sprintf("github.com/acme/shop/internal/pkg%04d", i)
		}, "# github.com/acme/shop/internal/cart", "internal/cart/cart.go:42:17: undefined: priceOf"),
			[]string{"internal/cart/cart.go:42:17: undefined: priceOf"}},
		{"python traceback", shaped(3000, 1500, func(i int) string {
			return fmt.Sprintf("2024-05-01 12:00:%02d INFO worker[3] processed batch %d in 12ms", i%60, i)
		}, "Traceback (most recent call last):",
			`  File "/srv/app/jobs.py", line 88, in run`,
			"    total = sum(row.amount for row in rows)",
			"TypeError: unsupported operand type(s) for +: 'int' and 'NoneType'"),
			[]string{"Traceback (most recent call last):", "TypeError: unsupported operand type(s) for +: 'int' and 'NoneType'"}},
		{"go test, one FAIL in 10000 lines", shaped(10000, 6173, func(i int) string {
			if i%2 == 0 {
				return fmt.Sprintf("=== RUN   TestCase%05d", i)
			}
			return fmt.Sprintf("--- PASS: TestCase%05d (0.00s)", i-1)
		}, "    ledger_test.go:211: balance = 90, want 100", "--- FAIL: TestLedgerBalance (0.02s)"),
			[]string{"--- FAIL: TestLedgerBalance (0.02s)"}},
		{"webpack", shaped(5000, 3300, func(i int) string {
			return fmt.Sprintf("orphan modules 12.%d KiB [orphan] %d modules", i%10, i)
		}, "ERROR in ./src/components/Cart.tsx 14:0-38",
			"Module not found: Error: Can't resolve './PriceTag' in '/app/src/components'"),
			[]string{"ERROR in ./src/components/Cart.tsx 14:0-38", "Module not found: Error: Can't resolve './PriceTag' in '/app/src/components'"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, c := range []Config{{Window: WindowErrors}, {Window: WindowErrors, Mode: ModeTokens, Limit: 2000}, {Window: WindowErrors, Limit: 1 << 20}} {
				p := mustNew(t, c)
				r := p.Project(tt.in)
				checkErrors(t, p, tt.in, r)
				for _, w := range tt.want {
					if !bytes.Contains(r.Text, []byte("\n"+w+"\n")) {
						t.Errorf("%+v: %q lost:\n%s", c, w, r.Text)
					}
				}
				if hp := mustNew(t, Config{Limit: c.Limit, Mode: c.Mode}); bytes.Contains(hp.Project(tt.in).Text, []byte(tt.want[0])) {
					t.Errorf("%+v: head_tail keeps %q too: not a test of errors", c, tt.want[0])
				}
			}
		})
	}
}

func TestErrorsWindows(t *testing.T) {
	t.Parallel()
	filler := func(i int) string { return fmt.Sprintf("line %03d ok", i) } // 12 bytes a line
	tests := []struct {
		name string
		p    *Projector
		in   []byte
		want string
	}{
		{"no error lines: head_tail", exact(t, 60, 100, ModeBytes, WindowErrors, 0.5), shaped(20, -1, filler),
			string(exact(t, 60, 100, ModeBytes, WindowHeadTail, 0.5).Project(shaped(20, -1, filler)).Text)},
		{"one error line", exact(t, 100, 100, ModeBytes, WindowErrors, 0.5), shaped(20, 10, filler, "E: error here"),
			"line 000 ok\nline 001 ok\n...96 bytes truncated...\nE: error here\n...96 bytes truncated...\nline 018 ok\nline 019 ok\n"},
		{"adjacent error lines share a marker", exact(t, 120, 100, ModeBytes, WindowErrors, 0.5), shaped(20, 10, filler, "FAIL a", "FAIL b"),
			"line 000 ok\nline 001 ok\nline 002 ok\n...84 bytes truncated...\nFAIL a\nFAIL b\n...84 bytes truncated...\nline 017 ok\nline 018 ok\nline 019 ok\n"},
		{"line cap counts lines", exact(t, 10000, 8, ModeBytes, WindowErrors, 0.5), shaped(20, 10, filler, "panic: boom"),
			"line 000 ok\nline 001 ok\nline 002 ok\n...7 lines truncated...\npanic: boom\n...7 lines truncated...\nline 017 ok\nline 018 ok\nline 019 ok\n"},
		{"custom pattern", mustNew(t, Config{Limit: 100, Window: WindowErrors, Patterns: []string{"WARN"}}), shaped(20, 10, filler, "WARN disk", "error ignored"),
			"line 000 ok\nline 001 ok\n...96 bytes truncated...\nWARN disk\n...98 bytes truncated...\nline 017 ok\nline 018 ok\nline 019 ok\n"},
		{"diagnostic", exact(t, 100, 100, ModeBytes, WindowErrors, 0.5), shaped(20, 10, filler, "a/b.go:3:14: bad"),
			"line 000 ok\nline 001 ok\n...96 bytes truncated...\na/b.go:3:14: bad\n...96 bytes truncated...\nline 018 ok\nline 019 ok\n"},
		{"a timestamp is no diagnostic", exact(t, 60, 100, ModeBytes, WindowErrors, 0.5), shaped(20, 10, filler, "at 12:00:01: ok"),
			string(exact(t, 60, 100, ModeBytes, WindowHeadTail, 0.5).Project(shaped(20, 10, filler, "at 12:00:01: ok")).Text)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := tt.p.Project(tt.in)
			checkErrors(t, tt.p, tt.in, r)
			if string(r.Text) != tt.want {
				t.Fatalf("Project =\n%s\nwant\n%s", r.Text, tt.want)
			}
		})
	}
}

// TestErrorsStream: a stream fed in random pieces, and ResultWithin a
// lower limit, agree with Project.
func TestErrorsStream(t *testing.T) {
	t.Parallel()
	eachSeed(t, 300, 29, func(t *testing.T, rng *rand.Rand) {
		in := errorText(rng)
		c := Config{Limit: 1 + rng.IntN(400), MaxLines: 1 + rng.IntN(40), Window: WindowErrors, HeadShare: rng.Float64()}
		p := mustNew(t, c, NoDefaults())
		s := p.NewStream()
		writeChunked(t, rng, s, in)
		want := p.Project(in)
		checkErrors(t, p, in, want)
		if got := s.Result(); !reflect.DeepEqual(got, want) {
			t.Fatalf("stream %s\nProject %s", summary(got), summary(want))
		}
		lower := rng.IntN(c.Limit + 1)
		if got, want := s.ResultWithin(lower), p.Within(lower).Project(in); !reflect.DeepEqual(got, want) {
			t.Fatalf("ResultWithin(%d) %s\nWithin.Project %s", lower, summary(got), summary(want))
		}
	})
}

// errorText is random text with some error lines and a long line or two.
func errorText(rng *rand.Rand) []byte {
	var b bytes.Buffer
	for range rng.IntN(60) {
		switch rng.IntN(9) {
		case 8:
			b.WriteString(strings.Repeat("q", 2040+rng.IntN(20)) + "error\n")
		case 0:
			b.WriteString("error: thing failed\n")
		case 1:
			b.WriteString("x.go:1:2: bad")
			b.WriteString(strings.Repeat("y", rng.IntN(300)))
			b.WriteByte('\n')
		case 2:
			b.WriteString(strings.Repeat("z", rng.IntN(500)) + "FAIL\n")
		default:
			fmt.Fprintf(&b, "info %d\n", rng.IntN(1000))
		}
	}
	if rng.IntN(2) == 0 {
		b.WriteString("panic: last line without newline")
	}
	return b.Bytes()
}

// checkErrors checks the rules of an error-window projection: output
// within the caps but for one marker line, and exactly the kept spans of
// in joined by markers.
func checkErrors(t testing.TB, p *Projector, in []byte, r Result) {
	t.Helper()
	if !r.Truncated {
		if !bytes.Equal(r.Text, in) {
			t.Fatalf("untruncated text differs")
		}
		return
	}
	var want []byte
	var keptBytes int64
	prevEnd := int64(0)
	for i, s := range r.Kept {
		if s.Offset < prevEnd || s.Length <= 0 || s.Offset+s.Length > int64(len(in)) || (i > 0 && s.Offset == prevEnd) {
			t.Fatalf("bad spans %v", r.Kept)
		}
		if s.Offset > prevEnd || i == 0 && s.Offset > 0 {
			if len(want) > 0 && want[len(want)-1] != '\n' {
				want = append(want, '\n')
			}
			want = append(want, "...\x00...\n"...)
		}
		want = append(want, in[s.Offset:s.Offset+s.Length]...)
		keptBytes += s.Length
		prevEnd = s.Offset + s.Length
	}
	if prevEnd < int64(len(in)) {
		if len(want) > 0 && want[len(want)-1] != '\n' {
			want = append(want, '\n')
		}
		want = append(want, "...\x00...\n"...)
	}
	got := markerRE.ReplaceAll(r.Text, []byte("...\x00..."))
	if !bytes.Equal(got, want) {
		t.Fatalf("text is not its spans joined by markers:\n%q\nwant\n%q", r.Text, want)
	}
	if keptBytes != r.OriginalBytes-r.DroppedBytes {
		t.Fatalf("spans keep %d bytes, DroppedBytes %d of %d", keptBytes, r.DroppedBytes, r.OriginalBytes)
	}
	markers := markerRE.FindAll(r.Text, -1)
	longest := 0
	for _, m := range markers {
		longest = max(longest, len(m)+2)
	}
	if n := len(r.Text) - longest; n > p.sizeCap {
		t.Fatalf("%d bytes but for one marker line, cap %d:\n%s", n, p.sizeCap, r.Text)
	}
	if n := countLines(r.Text) - 1; n > int64(p.lineCap) {
		t.Fatalf("%d lines but for one marker line, cap %d:\n%s", n, p.lineCap, r.Text)
	}
}

var markerRE = regexp.MustCompile(`\.\.\.[0-9]+ (bytes|tokens|lines) truncated\.\.\.`)

// FuzzErrors checks the rules of the error window on any input: within the
// caps but for one marker line, the kept spans joined by markers, and a
// stream in pieces (and ResultWithin a lower limit) agreeing with Project.
func FuzzErrors(f *testing.F) {
	seeds := []string{
		"", "error\n", "a\nerror: x\nb\nc\nd\n", "x.go:1:2: bad\n" + strings.Repeat("ok\n", 40) + "FAIL\n" + strings.Repeat("ok\n", 40),
		strings.Repeat("info\n", 30) + "panic: boom\ngoroutine 1 [running]:\n" + strings.Repeat("info\n", 30),
		strings.Repeat("q", 2100) + "error\n" + strings.Repeat("ok\n", 50) + "Traceback\n" + strings.Repeat("ok\n", 50),
		"héllo wörld\nFatal: ✗ 𝄞\n\xff\xfe error \n" + strings.Repeat("ß", 90),
	}
	for i, s := range seeds {
		f.Add([]byte(s), uint16(20+i*31), uint8(3+i*5), uint8(i*37), uint16(i*11))
	}
	f.Fuzz(func(t *testing.T, in []byte, limit uint16, maxLines uint8, shape uint8, lower uint16) {
		modes := []Mode{ModeBytes, ModeTokens}
		p := exact(t, int(limit%1024), int(maxLines%64), modes[shape&1], WindowErrors, float64(shape>>1)/127)
		r := p.Project(in)
		checkErrors(t, p, in, r)
		if again := p.Project(in); !reflect.DeepEqual(again, r) {
			t.Fatalf("not deterministic")
		}
		s := p.NewStream()
		for rest, chunk := in, 1+int(shape%17); len(rest) > 0; {
			n := min(chunk, len(rest))
			s.Write(rest[:n])
			rest = rest[n:]
		}
		if got := s.Result(); !reflect.DeepEqual(got, r) {
			t.Fatalf("stream %s, Project %s", summary(got), summary(r))
		}
		l := int(lower) % (int(limit%1024) + 1)
		if got, want := s.ResultWithin(l), p.Within(l).Project(in); !reflect.DeepEqual(got, want) {
			t.Fatalf("ResultWithin(%d) %s, Within.Project %s", l, summary(got), summary(want))
		}
	})
}

// TestErrorsStreamMemoryBounded: however many error lines and long lines
// stream by, the collector holds what the caps allow.
func TestErrorsStreamMemoryBounded(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		chunk []byte
	}{
		{"every line an error", bytes.Repeat([]byte("error: again\n"), 500)},
		{"long error lines", []byte(strings.Repeat("FAIL ", 1000) + "\n")},
		{"one endless line", bytes.Repeat([]byte("panic: "), 1000)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := mustNew(t, Config{Limit: 1000, MaxLines: 50, Window: WindowErrors})
			s := p.NewStream()
			for written := 0; written < 8<<20; written += len(tt.chunk) {
				s.Write(tt.chunk)
			}
			held := cap(s.errors.carry)
			for _, l := range s.errors.found {
				held += cap(l.text)
			}
			if limit := p.edgeBytes() + maxErrorLine + 1000 + 512; held > limit {
				t.Errorf("the collector holds %d bytes; the caps allow about %d", held, limit)
			}
			if r := s.Result(); r.Truncated && len(r.Text) > 1000+40 {
				t.Errorf("projection of %d bytes", len(r.Text))
			}
		})
	}
}
