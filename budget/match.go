package budget

import (
	"bytes"
	"encoding/binary"
	mathbits "math/bits"
	"slices"
	"strings"
)

// matcher finds error lines: lines holding one of a set of literal
// patterns, or a "file.ext:line:col:" diagnostic. It is immutable.
//
// Patterns at least minSampled long go through one sampled bigram filter
// (see ARCHITECTURE.md, "budget: error windows"): every step-th
// position's two bytes are looked up in a 64 Ki-bit table of the bigrams
// those patterns have at offsets 0..step-1, so that each occurrence is
// seen at exactly one sampled position and only hits are compared; its
// cost hardly grows with the number of patterns. Shorter patterns are
// found by bytes.IndexByte on their rarest byte (their anchor), one pass
// per distinct anchor. A text is searched in windows of searchWindow
// bytes, so that every pass over a window reads it from cache.
type matcher struct {
	byAnchor []anchorGroup
	step     int           // sampling distance; 0 when no pattern is sampled
	table    *[1024]uint64 // bigram bitmap of the sampled patterns
	hits     []hit         // the sampled patterns' bigrams, by bigram
	// rank[w] counts the bigrams of table words before w, so that a
	// bigram's rank among the table's is rank[g>>6] plus the bits below it
	// in its word; start[r] is the first hit of the bigram of rank r.
	rank  *[1024]uint16
	start []uint16
}

// anchorGroup is the short patterns searched by one anchor byte: each
// pattern's rarest byte (by logFrequency) and its offset in the pattern.
type anchorGroup struct {
	anchor   byte
	patterns []anchored
}

type anchored struct {
	pattern []byte
	offset  int
}

// hit is a sampled pattern, one of its bigrams and the bigram's offset.
type hit struct {
	bigram  uint16
	offset  int
	pattern []byte
}

// minSampled is the shortest pattern the bigram filter takes: a longer
// one allows a sparser sampling.
const minSampled = 5

// searchWindow is how much of a text the detectors search at a time.
const searchWindow = 32 << 10

// logFrequency lists bytes from the most to the least frequent in
// typical logs; bytes it leaves out are rarer still. It picks the anchor
// of a short pattern: "FAIL" is searched by its 'L', since every INFO line
// has an 'F' and an 'I'.
const logFrequency = " etaoinsrlhdcumpfgywbvk0123456789.:-/=_,\"'()[]TIENOFDSRAWCPLMUGHBKVYXJQZxjqz"

// anchorOf returns the offset of p's rarest byte by logFrequency.
func anchorOf(p []byte) int {
	best, bestRank := 0, -1
	for i, c := range p {
		r := strings.IndexByte(logFrequency, c)
		if r < 0 {
			r = len(logFrequency)
		}
		if r > bestRank {
			best, bestRank = i, r
		}
	}
	return best
}

func newMatcher(patterns []string) *matcher {
	if len(patterns) == 0 {
		patterns = DefaultPatterns
	}
	m := &matcher{}
	var sampled [][]byte
	for _, s := range patterns {
		p := []byte(s)
		switch {
		case len(p) >= minSampled:
			sampled = append(sampled, p)
			if m.step == 0 || len(p)-1 < m.step {
				m.step = len(p) - 1
			}
		default:
			off := anchorOf(p)
			i := 0
			for i < len(m.byAnchor) && m.byAnchor[i].anchor != p[off] {
				i++
			}
			if i == len(m.byAnchor) {
				m.byAnchor = append(m.byAnchor, anchorGroup{anchor: p[off]})
			}
			m.byAnchor[i].patterns = append(m.byAnchor[i].patterns, anchored{p, off})
		}
	}
	if len(sampled) > 0 {
		m.table = new([1024]uint64)
	}
	for _, p := range sampled {
		for off := range m.step {
			g := bigram(p, off)
			m.table[g>>6] |= 1 << (g & 63)
			m.hits = append(m.hits, hit{g, off, p})
		}
	}
	slices.SortStableFunc(m.hits, func(a, b hit) int { return int(a.bigram) - int(b.bigram) })
	if m.table != nil {
		m.rank = new([1024]uint16)
		n := 0
		for w, bits := range m.table {
			m.rank[w] = uint16(n)
			n += mathbits.OnesCount64(bits)
		}
		for i, h := range m.hits {
			if i == 0 || h.bigram != m.hits[i-1].bigram {
				m.start = append(m.start, uint16(i))
			}
		}
	}
	return m
}

func bigram(b []byte, i int) uint16 { return binary.LittleEndian.Uint16(b[i:]) }

// The detectors below return the start of the leftmost match that starts
// in b[from:lim] (they may read past lim to complete it), or -1.

// nextAnchored finds the short patterns by their anchors.
func (m *matcher) nextAnchored(b []byte, from, lim int) int {
	best := -1
	for _, g := range m.byAnchor {
		end := lim
		if best >= 0 {
			end = best
		}
		// An occurrence starting before end has its anchor before
		// end+maxOffset.
		maxOff := 0
		for _, a := range g.patterns {
			maxOff = max(maxOff, a.offset)
		}
		stop := min(len(b), end+maxOff)
		for i := from; i < stop; {
			k := bytes.IndexByte(b[i:stop], g.anchor)
			if k < 0 {
				break
			}
			i += k
			for _, a := range g.patterns {
				s := i - a.offset
				if s >= from && s < end && (best < 0 || s < best) && bytes.HasPrefix(b[s:], a.pattern) {
					best = s
				}
			}
			if best >= 0 {
				// A later anchor starts an earlier match only within
				// maxOff of it.
				stop = min(stop, best+maxOff)
			}
			i++
		}
	}
	return best
}

// nextSampled finds the patterns of the bigram filter.
func (m *matcher) nextSampled(b []byte, from, lim int) int {
	if m.table == nil {
		return -1
	}
	step := m.step
	last := min(lim+step-1, len(b)-1) // the last sampled position may pass lim by step-1
	p := from
	if step == 4 {
		// The common case (a five-byte pattern such as "error"): four
		// sampled positions per two 8-byte loads, one branch for all.
		t := m.table
		for ; p+12 < last && p+16 <= len(b); p += 16 {
			w0 := binary.LittleEndian.Uint64(b[p:])
			w1 := binary.LittleEndian.Uint64(b[p+8:])
			g0, g1, g2, g3 := uint16(w0), uint16(w0>>32), uint16(w1), uint16(w1>>32)
			if t[g0>>6]&(1<<(g0&63))|t[g1>>6]&(1<<(g1&63))|t[g2>>6]&(1<<(g2&63))|t[g3>>6]&(1<<(g3&63)) == 0 {
				continue
			}
			for k, g := range [4]uint16{g0, g1, g2, g3} {
				if t[g>>6]&(1<<(g&63)) != 0 {
					if s := m.verify(b, p+4*k, g, from, lim); s >= 0 {
						return s
					}
				}
			}
		}
	}
	for ; p < last; p += step {
		g := binary.LittleEndian.Uint16(b[p:])
		if m.table[g>>6]&(1<<(g&63)) != 0 {
			if s := m.verify(b, p, g, from, lim); s >= 0 {
				return s
			}
		}
	}
	return -1
}

// verify returns the leftmost start in [from, lim) of a sampled pattern
// whose bigram g is at p, or -1.
func (m *matcher) verify(b []byte, p int, g uint16, from, lim int) int {
	best := -1
	r := int(m.rank[g>>6]) + mathbits.OnesCount64(m.table[g>>6]&(1<<(g&63)-1))
	for _, h := range m.hits[m.start[r]:] {
		if h.bigram != g {
			break
		}
		s := p - h.offset
		if s >= from && s < lim && (best < 0 || s < best) && bytes.HasPrefix(b[s:], h.pattern) {
			best = s
		}
	}
	return best
}

// nextDiagnostic finds the first ':' of a "name.ext:digits:digits:".
func nextDiagnostic(b []byte, from, lim int) int {
	for i := from; i < lim; {
		k := bytes.IndexByte(b[i:lim], ':')
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
	if c == 0 || !isLetter(b[c-1]) {
		return false
	}
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
		case isLetter(ch):
			ext++
		}
	}
	return false
}

func isLetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }

// lines calls yield with the start and end (after its '\n') of every error
// line of b, in order, until yield returns false. b holds whole lines; a
// last line without '\n' ends at len(b).
func (m *matcher) lines(b []byte, yield func(start, end int) bool) {
	for from := 0; from < len(b); {
		lim := min(len(b), from+searchWindow)
		at := -1
		for _, next := range [...]func([]byte, int, int) int{m.nextAnchored, m.nextSampled, nextDiagnostic} {
			if c := next(b, from, lim); c >= 0 && (at < 0 || c < at) {
				at, lim = c, c+1
			}
		}
		if at < 0 {
			from = lim
			continue
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
