package budget

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestProjectWithinCaps(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		p     *Projector
		in    string
		lines int64
	}{
		{"empty", exact(t, 0, 0, ModeBytes, WindowHeadTail, 0.5), "", 0},
		{"default caps", mustNew(t, Config{}), "hello\nworld\n", 2},
		{"no trailing newline", exact(t, 10, 2, ModeBytes, WindowHead, 0.5), "a\nb", 2},
		{"exactly at both caps", exact(t, 6, 3, ModeBytes, WindowHeadTail, 0.5), "a\nb\nc\n", 3},
		{"crlf", exact(t, 20, 2, ModeBytes, WindowTail, 0.5), "one\r\ntwo\r\n", 2},
		{"only newlines", exact(t, 3, 3, ModeBytes, WindowHeadTail, 0.5), "\n\n\n", 3},
		{"tokens round up", exact(t, 2, 5, ModeTokens, WindowHeadTail, 0.5), "12345678", 1},
		{"invalid utf-8", exact(t, 4, 1, ModeBytes, WindowHeadTail, 0.5), "\xff\xfe\x80", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := []byte(tt.in)
			r := tt.p.Project(in)
			if r.Truncated || !bytes.Equal(r.Text, in) || r.OriginalLines != tt.lines || r.OriginalBytes != int64(len(in)) {
				t.Fatalf("Project(%q) = %+v, want it unchanged with %d lines", tt.in, r, tt.lines)
			}
			checkText(t, tt.p, in, r)
		})
	}
}

func TestProjectTruncates(t *testing.T) {
	t.Parallel()
	alphabet := "abcdefghijklmnopqrstuvwxyz"
	tests := []struct {
		name         string
		p            *Projector
		in           string
		want         string
		bound        Bound
		droppedBytes int64
		droppedLines int64
	}{
		{"single huge line, head", exact(t, 10, 5, ModeBytes, WindowHead, 0.5), alphabet,
			"abcdefghij\n...16 bytes truncated...\n", BoundSize, 16, 0},
		{"single huge line, tail", exact(t, 10, 5, ModeBytes, WindowTail, 0.5), alphabet,
			"...16 bytes truncated...\nqrstuvwxyz", BoundSize, 16, 0},
		{"single huge line, head_tail", exact(t, 10, 5, ModeBytes, WindowHeadTail, 0.5), alphabet,
			"abcde\n...16 bytes truncated...\nvwxyz", BoundSize, 16, 0},
		{"head share", exact(t, 10, 5, ModeBytes, WindowHeadTail, 0.2), alphabet,
			"ab\n...16 bytes truncated...\nstuvwxyz", BoundSize, 16, 0},
		{"huge line with trailing newline", exact(t, 10, 5, ModeBytes, WindowHeadTail, 0.5), strings.Repeat("a", 20) + "\n",
			"aaaaa\n...11 bytes truncated...\naaaa\n", BoundSize, 11, 0},
		{"whole lines preferred", exact(t, 10, 50, ModeBytes, WindowHeadTail, 0.5), "aaa\nbbb\nccc\nddd\n",
			"aaa\n...8 bytes truncated...\nddd\n", BoundSize, 8, 2},
		{"head leftover goes to the tail", exact(t, 10, 50, ModeBytes, WindowHeadTail, 0.5), "ab\n" + strings.Repeat("x", 20),
			"ab\n...13 bytes truncated...\nxxxxxxx", BoundSize, 13, 0},
		{"crlf stays with its line", exact(t, 8, 50, ModeBytes, WindowHeadTail, 0.5), "aa\r\nbb\r\ncc\r\ndd\r\n",
			"aa\r\n...8 bytes truncated...\ndd\r\n", BoundSize, 8, 2},
		{"line cap, head_tail", exact(t, 1000, 2, ModeBytes, WindowHeadTail, 0.5), "1\n2\n3\n4\n5\n",
			"1\n...3 lines truncated...\n5\n", BoundLines, 6, 3},
		{"line cap, head", exact(t, 1000, 2, ModeBytes, WindowHead, 0.5), "1\n2\n3\n4\n5\n",
			"1\n2\n...3 lines truncated...\n", BoundLines, 6, 3},
		{"line cap, tail", exact(t, 1000, 2, ModeBytes, WindowTail, 0.5), "1\n2\n3\n4\n5\n",
			"...3 lines truncated...\n4\n5\n", BoundLines, 6, 3},
		{"line cap, no trailing newline", exact(t, 1000, 2, ModeBytes, WindowHeadTail, 0.5), "1\n2\n3\n4\n5",
			"1\n...3 lines truncated...\n5", BoundLines, 6, 3},
		{"line cap, crlf", exact(t, 1000, 1, ModeBytes, WindowTail, 0.5), "a\r\nb\r\nc\r\n",
			"...2 lines truncated...\nc\r\n", BoundLines, 6, 2},
		{"line cap zero", exact(t, 1000, 0, ModeBytes, WindowHeadTail, 0.5), "a\nb\n",
			"...2 lines truncated...\n", BoundLines, 4, 2},
		{"both caps: size wins", exact(t, 6, 2, ModeBytes, WindowHeadTail, 0.5), "1\n2\n3\n4\n5\n6\n7\n8\n",
			"1\n...12 bytes truncated...\n8\n", BoundSize, 12, 6},
		{"many short lines: line cap limits the size-bound preview", exact(t, 100, 2, ModeBytes, WindowHeadTail, 0.5), strings.Repeat("x\n", 60),
			"x\n...116 bytes truncated...\nx\n", BoundSize, 116, 58},
		{"tokens", exact(t, 2, 5, ModeTokens, WindowHeadTail, 0.5), alphabet,
			"abcd\n...5 tokens truncated...\nwxyz", BoundSize, 18, 0},
		{"tokens, one byte over", exact(t, 2, 5, ModeTokens, WindowHead, 0.5), "123456789",
			"12345678\n...1 tokens truncated...\n", BoundSize, 1, 0},
		{"multi-byte runes are not split", exact(t, 5, 5, ModeBytes, WindowHeadTail, 0.5), "ééééé",
			"é\n...6 bytes truncated...\né", BoundSize, 6, 0},
		{"four-byte runes", exact(t, 7, 5, ModeBytes, WindowHeadTail, 0.5), "𝄞𝄞𝄞",
			"\n...8 bytes truncated...\n𝄞"[1:], BoundSize, 8, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := []byte(tt.in)
			r := tt.p.Project(in)
			if string(r.Text) != tt.want {
				t.Errorf("text = %q, want %q", r.Text, tt.want)
			}
			if !r.Truncated || r.Bound != tt.bound || r.DroppedBytes != tt.droppedBytes || r.DroppedLines != tt.droppedLines {
				t.Errorf("result = %+v, want bound %q, dropped %d bytes, %d lines", r, tt.bound, tt.droppedBytes, tt.droppedLines)
			}
			checkText(t, tt.p, in, r)
		})
	}
}

func TestProjectTinyLimits(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		limit int
		in    string
		want  string
	}{
		{"limit 0", 0, "hello", "...5 bytes truncated...\n"},
		{"limit 0, lines", 0, "a\nb\nc\n", "...6 bytes truncated...\n"},
		{"limit 1", 1, "hello", "...4 bytes truncated...\no"},
		{"limit 1, newline last", 1, "hello\n", "...5 bytes truncated...\n\n"},
		{"limit 1, rune last", 1, "helloé", "...7 bytes truncated...\n"},
		{"limit 3", 3, "hello", "h\n...2 bytes truncated...\nlo"},
		{"limit 3, lines", 3, "a\nb\nc\n", "a\n...3 bytes truncated...\nc\n"},
		{"limit 3, runes", 3, "ééé", "\n...4 bytes truncated...\né"[1:]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := exact(t, tt.limit, 400, ModeBytes, WindowHeadTail, 0.5)
			r := p.Project([]byte(tt.in))
			if string(r.Text) != tt.want {
				t.Errorf("text = %q, want %q", r.Text, tt.want)
			}
			checkText(t, p, []byte(tt.in), r)
		})
	}
}

func TestProjectCountsLines(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in    string
		lines int64
	}{
		{"", 0}, {"a", 1}, {"a\n", 1}, {"a\nb", 2}, {"\n", 1}, {"\n\n", 2}, {"a\r\nb\r\n", 2}, {"\r", 1},
	}
	p := mustNew(t, Config{})
	for _, tt := range tests {
		if r := p.Project([]byte(tt.in)); r.OriginalLines != tt.lines {
			t.Errorf("lines of %q = %d, want %d", tt.in, r.OriginalLines, tt.lines)
		}
	}
}

// TestProjectRuneCuts cuts texts of 1- to 4-byte runes at every limit, with
// and without line boundaries, and checks that cuts lose at most a partial
// rune on each side.
func TestProjectRuneCuts(t *testing.T) {
	t.Parallel()
	texts := []string{
		strings.Repeat("aé€𝄞", 6),
		strings.Repeat("𝄞€éa", 6),
		strings.Repeat("é", 20),
		"x\n" + strings.Repeat("€𝄞", 8) + "\ny",
		strings.Repeat("€\r\n", 7),
	}
	windows := []Window{WindowHead, WindowTail, WindowHeadTail}
	shares := []float64{0, 0.3, 0.5, 1}
	for _, text := range texts {
		in := []byte(text)
		for limit := 0; limit <= len(in)+1; limit++ {
			for _, w := range windows {
				for _, share := range shares {
					p := exact(t, limit, 100, ModeBytes, w, share)
					r := p.Project(in)
					checkText(t, p, in, r)
					if !r.Truncated || bytes.IndexByte(in, '\n') >= 0 {
						continue
					}
					kept := int64(len(in)) - r.DroppedBytes
					if slack := int64(limit) - kept; slack > 2*(utf8.UTFMax-1) {
						t.Errorf("limit %d %s %.1f on %q kept %d bytes; cuts lost more than partial runes", limit, w, share, text, kept)
					}
				}
			}
		}
	}
}

func TestProjectInvalidUTF8(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		in := make([]byte, rng.IntN(64))
		for i := range in {
			in[i] = byte(rng.UintN(256))
			if rng.IntN(8) == 0 {
				in[i] = '\n'
			}
		}
		p := exact(t, rng.IntN(40), rng.IntN(6), ModeBytes, []Window{WindowHead, WindowTail, WindowHeadTail}[rng.IntN(3)], rng.Float64())
		checkText(t, p, in, p.Project(in))
	}
}

func TestProjectDoesNotAlias(t *testing.T) {
	t.Parallel()
	p := mustNew(t, Config{Limit: 4})
	for _, text := range []string{"abc", "abcdefgh"} {
		in := []byte(text)
		r := p.Project(in)
		before := string(r.Text)
		for i := range in {
			in[i] = 'X'
		}
		if string(r.Text) != before {
			t.Errorf("Project(%q) result changed with its input", text)
		}
	}
}

func TestProjectLargeInput(t *testing.T) {
	t.Parallel()
	in := bytes.Repeat([]byte("a log line with some text in it\n"), 100_000)
	p := mustNew(t, Config{})
	r := p.Project(in)
	checkText(t, p, in, r)
	if r.Bound != BoundSize || r.DroppedLines != 100_000-400 {
		t.Errorf("got bound %s, %d lines dropped; want size, %d", r.Bound, r.DroppedLines, 100_000-400)
	}
}
