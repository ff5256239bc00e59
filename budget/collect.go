package budget

import "bytes"

// errorLine is an error line of a text: where it starts, how many lines
// precede it, its size and its bytes.
type errorLine struct {
	start int64
	line  int64
	size  int
	text  []byte
}

// maxErrorLine is the longest error line: a longer line is never one,
// whatever it holds, so that a stream need not hold more of a line.
const maxErrorLine = 2048

func (l errorLine) end() int64 { return l.start + int64(l.size) }

// collector gathers the error lines of a text written to it in pieces, in
// memory bounded by the caps: every error line that starts before edge
// (the projection looks at the text's first edge bytes anyway) and, after
// edge, the first ones until their bytes or count would pass capBytes or
// capLines. Later lines could not be kept by any projection whose error
// budget is within those caps (see projectErrors), so it stops scanning.
type collector struct {
	m        *matcher
	edge     int64
	capBytes int
	capLines int

	found       []errorLine
	beyondBytes int
	beyondLines int
	full        bool

	offset   int64 // the offset of the next byte written
	newlines int64 // newlines before offset
	// The unfinished last line: where it starts, its size, and its first
	// maxErrorLine+1 bytes.
	open      bool
	openStart int64
	openSize  int
	carry     []byte
}

func (p *Projector) newCollector() *collector {
	errBytes, errLines := p.errorBudget()
	return &collector{
		m: p.matcher, edge: int64(p.edgeBytes()),
		capBytes: errBytes, capLines: errLines,
	}
}

// write adds b. Once the collector is full it only tracks offsets.
func (c *collector) write(b []byte) {
	if c.open && len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		piece := b
		if i >= 0 {
			piece = b[:i+1]
		}
		c.hold(piece)
		c.offset += int64(len(piece))
		b = b[len(piece):]
		if i < 0 {
			return
		}
		c.closeOpen()
		c.newlines++
	}
	if len(b) == 0 {
		return
	}
	j := bytes.LastIndexByte(b, '\n')
	if j >= 0 {
		if !c.full {
			c.newlines += c.scan(b[:j+1], c.offset, c.newlines)
		}
		c.offset += int64(j + 1)
		b = b[j+1:]
	}
	if len(b) > 0 {
		c.open, c.openStart, c.openSize, c.carry = true, c.offset, 0, c.carry[:0]
		c.hold(b)
		c.offset += int64(len(b))
	}
}

// writeAll writes text to a new collector and returns its newlines,
// counted while each window of it is in cache.
func (c *collector) writeAll(text []byte) int64 {
	c.write(text)
	if c.full {
		return int64(bytes.Count(text, newline))
	}
	return c.newlines
}

// hold adds b to the unfinished line.
func (c *collector) hold(b []byte) {
	c.openSize += len(b)
	if room := maxErrorLine + 1 - len(c.carry); room > 0 && !c.full {
		c.carry = appendWithin(c.carry, b[:min(room, len(b))], maxErrorLine+1)
	}
}

// closeOpen examines the unfinished line, now finished.
func (c *collector) closeOpen() {
	if !c.full && c.openSize <= maxErrorLine {
		hit := false
		c.m.lines(c.carry, func(int, int) bool { hit = true; return false })
		if hit {
			c.add(errorLine{start: c.openStart, line: c.newlines, size: c.openSize, text: c.carry})
		}
	}
	c.open, c.carry = false, c.carry[:0]
}

// scan collects the error lines of b, which starts at offset start after
// line newlines and ends with a line's end, and returns b's newlines
// (while the collector is not full). It goes through b in windows of
// about searchWindow bytes, each searched and counted while in cache.
func (c *collector) scan(b []byte, start, line int64) int64 {
	var total int64
	for pos := 0; pos < len(b) && !c.full; {
		end := len(b)
		if pos+searchWindow < len(b) {
			if k := bytes.IndexByte(b[pos+searchWindow:], '\n'); k >= 0 {
				end = pos + searchWindow + k + 1
			}
		}
		w := b[pos:end]
		at, counted := line+total, 0
		c.m.lines(w, func(s, e int) bool {
			text := w[s:e]
			if len(text) > maxErrorLine {
				return true
			}
			at += int64(bytes.Count(w[counted:s], newline))
			counted = s
			return c.add(errorLine{start: start + int64(pos+s), line: at, size: len(text), text: text})
		})
		total += int64(bytes.Count(w, newline))
		pos = end
	}
	return total
}

// add keeps l, cloning its bytes, unless the caps are reached; it reports
// whether collecting goes on.
func (c *collector) add(l errorLine) bool {
	if l.start >= c.edge {
		if c.beyondBytes+l.size > c.capBytes || c.beyondLines+1 > c.capLines {
			c.full = true
			return false
		}
		c.beyondBytes += l.size
		c.beyondLines++
	}
	l.text = bytes.Clone(l.text)
	c.found = append(c.found, l)
	return true
}

// lines returns the error lines so far, the unfinished line included.
func (c *collector) lines() []errorLine {
	if !c.open || c.full {
		return c.found
	}
	probe := *c
	probe.found = c.found[:len(c.found):len(c.found)]
	probe.closeOpen()
	return probe.found
}
