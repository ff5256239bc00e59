package budget

import (
	"bytes"
	"encoding/binary"
)

// matcher finds error lines: lines holding one of a set of literal
// patterns, or a "file.ext:line:col:" diagnostic. It is immutable.
//
// Patterns of at least minSampled bytes go through one sampled bigram
// filter (see ARCHITECTURE.md, "budget: error windows"): every step-th
// position's two bytes are looked up in a 64 Ki-bit table of the bigrams
// the patterns have at offsets 0..step-1, so each occurrence is seen at
// exactly one sampled position, and only hits are compared. Shorter
// patterns are searched with bytes.Index each.
type matcher struct {
	step  int              // sampling distance; 0 when no pattern is sampled
	table *[1024]uint64    // bigram bitmap of the sampled patterns
	at    map[uint16][]hit // per bigram, the patterns and offsets it stands for
	short [][]byte         // patterns too short to sample
}

// hit is a sampled pattern and the offset of a bigram within it.
type hit struct {
	pattern []byte
	offset  int
}

// minSampled is the shortest pattern the bigram filter takes.
const minSampled = 4

func newMatcher(patterns []string) *matcher {
	if len(patterns) == 0 {
		patterns = DefaultPatterns
	}
	m := &matcher{at: make(map[uint16][]hit)}
	for _, p := range patterns {
		if len(p) >= minSampled && (m.step == 0 || len(p)-1 < m.step) {
			m.step = len(p) - 1
		}
	}
	for _, p := range patterns {
		if len(p) < minSampled {
			m.short = append(m.short, []byte(p))
			continue
		}
		if m.table == nil {
			m.table = new([1024]uint64)
		}
		for off := range m.step {
			g := bigram([]byte(p), off)
			m.table[g>>6] |= 1 << (g & 63)
			m.at[g] = append(m.at[g], hit{[]byte(p), off})
		}
	}
	return m
}

func bigram(b []byte, i int) uint16 { return binary.LittleEndian.Uint16(b[i:]) }

// next returns the start of the leftmost match in b at or after from that
// the sampled filter finds, or -1.
func (m *matcher) nextSampled(b []byte, from int) int {
	if m.table == nil {
		return -1
	}
	best := -1
	for p := from; p+1 < len(b); p += m.step {
		g := bigram(b, p)
		if m.table[g>>6]&(1<<(g&63)) == 0 {
			continue
		}
		for _, h := range m.at[g] {
			s := p - h.offset
			if s >= from && s+len(h.pattern) <= len(b) && (best < 0 || s < best) && bytes.Equal(b[s:s+len(h.pattern)], h.pattern) {
				best = s
			}
		}
		if best >= 0 {
			return best
		}
	}
	return -1
}

// nextShort returns the leftmost match of a short pattern in b at or after
// from, or -1.
func (m *matcher) nextShort(b []byte, from int) int {
	best := -1
	for _, p := range m.short {
		limit := len(b)
		if best >= 0 {
			limit = min(len(b), best+len(p)-1)
		}
		if i := bytes.Index(b[from:limit], p); i >= 0 {
			best = from + i
		}
	}
	return best
}

// nextDiagnostic returns the offset of the first ':' of the leftmost
// "name.ext:digits:digits:" in b at or after from, or -1.
func nextDiagnostic(b []byte, from int) int {
	for i := from; i < len(b); {
		k := bytes.IndexByte(b[i:], ':')
		if k < 0 {
			return -1
		}
		c := i + k
		if isDiagnostic(b, c) {
			return c
		}
		i = c + 1
	}
	return -1
}

// isDiagnostic reports that b[c] is the ':' after a file name with an
// extension, followed by line and column numbers and a ':'.
func isDiagnostic(b []byte, c int) bool {
	j := c + 1
	for range 2 {
		d := j
		for j < len(b) && b[j] >= '0' && b[j] <= '9' {
			j++
		}
		if j == d || j >= len(b) || b[j] != ':' {
			return false
		}
		j++
	}
	// The name: back to white space or a quote; it needs a letter after
	// its last '.'.
	ext := 0
	for i := c - 1; i >= 0; i-- {
		switch ch := b[i]; {
		case ch == '.':
			return ext > 0
		case ch == ' ' || ch == '\t' || ch == '\n' || ch == '"' || ch == '\'' || ch == '(' || ch == '/':
			return false
		case ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z':
			ext++
		}
	}
	return false
}

// lines calls yield with the start and end (after its '\n') of every error
// line of b, in order, until yield returns false. b holds whole lines; a
// last line without '\n' ends at len(b).
func (m *matcher) lines(b []byte, yield func(start, end int) bool) {
	// Each detector's next match, cached until the scan passes it; -2
	// means not searched yet.
	sampled, short, diag := -2, -2, -2
	for from := 0; from < len(b); {
		if sampled != -1 && sampled < from {
			sampled = m.nextSampled(b, from)
		}
		if short != -1 && short < from {
			short = m.nextShort(b, from)
		}
		if diag != -1 && diag < from {
			diag = nextDiagnostic(b, from)
		}
		at := -1
		for _, c := range [...]int{sampled, short, diag} {
			if c >= 0 && (at < 0 || c < at) {
				at = c
			}
		}
		if at < 0 {
			return
		}
		start := from + bytes.LastIndexByte(b[from:at], '\n') + 1
		end := len(b)
		if k := bytes.IndexByte(b[at:], '\n'); k >= 0 {
			end = at + k + 1
		}
		if !yield(start, end) {
			return
		}
		from = end
	}
}
