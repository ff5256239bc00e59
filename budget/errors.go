package budget

import "strconv"

// Span is a part of an output that a projection kept.
type Span struct {
	Offset int64 `json:"offset"`
	Length int64 `json:"length"`
}

// errorBudget is the part of the caps that WindowErrors sets aside for the
// error lines of the dropped middle: half of each.
func (p *Projector) errorBudget() (bytes, lines int) {
	return p.sizeCap / 2, p.lineCap / 2
}

// capped returns a copy of p with other caps, for cutting.
func (p *Projector) capped(sizeCap, lineCap int) *Projector {
	q := *p
	q.sizeCap, q.lineCap = max(sizeCap, 0), max(lineCap, 0)
	return &q
}

// cut returns the head and tail that p keeps of v, which exceeds a cap.
func (p *Projector) cut(v view, withinSize bool) (head, tail []byte) {
	if withinSize {
		return p.cutLines(v.prefix)
	}
	return p.cutSize(v.prefix, v.suffix)
}

// piece is a kept part of a text: its bytes, where it starts, and the
// lines before its start and its end.
type piece struct {
	text               []byte
	start              int64
	startLine, endLine int64
}

// projectErrors projects v, which exceeds a cap, keeping error lines of the
// dropped middle (ARCHITECTURE.md, "budget: error windows"). Head and tail
// are first cut within what the error budget leaves; the middle's error
// lines are then taken in order while they fit the error budget, each run
// of adjacent lines paying for its marker line, until one does not fit.
// Head and tail are cut again within what those lines left. Without error
// lines the result is the head_tail projection.
func (p *Projector) projectErrors(v view, found []errorLine, withinSize bool) ([]piece, bool) {
	errBytes, errLines := p.errorBudget()
	head, tail := p.capped(p.sizeCap-errBytes, p.lineCap-errLines).cut(v, withinSize)
	byteRoom := errBytes
	if withinSize {
		byteRoom = p.sizeCap - len(head) - len(tail)
	}
	lo, hi := int64(len(head)), v.size-int64(len(tail))
	reserve := p.markerReserve(v.size)
	var chosen []errorLine
	usedBytes, usedLines, prevEnd := 0, 0, int64(-1)
	for _, l := range found {
		if l.start < lo {
			continue
		}
		if l.end() > hi {
			break
		}
		b, n := l.size, 1
		if l.start != prevEnd {
			b, n = b+reserve, n+1
		}
		if usedBytes+b > byteRoom || usedLines+n > errLines {
			break
		}
		chosen = append(chosen, l)
		usedBytes, usedLines, prevEnd = usedBytes+b, usedLines+n, l.end()
	}
	if len(chosen) == 0 {
		return nil, false
	}
	h, t := p.capped(p.sizeCap-usedBytes, p.lineCap-usedLines).cut(v, withinSize)
	if withinSize && (len(h)+len(t)+usedBytes > p.sizeCap) {
		// Longer lines than the first cut's: keep that one.
		h, t = head, tail
	}
	lo, hi = int64(len(h)), v.size-int64(len(t))
	pieces := make([]piece, 0, len(chosen)+2)
	pieces = append(pieces, piece{text: h, endLine: int64(countNewlines(h))})
	for _, l := range chosen {
		if l.start < lo || l.end() > hi {
			continue // the second cut reaches it
		}
		if last := &pieces[len(pieces)-1]; len(pieces) > 1 && last.start+int64(len(last.text)) == l.start {
			last.text = append(last.text, l.text...)
			last.endLine++
			continue
		}
		pieces = append(pieces, piece{text: append([]byte(nil), l.text...), start: l.start, startLine: l.line, endLine: l.line + 1})
	}
	tailLine := v.newlines - int64(countNewlines(t))
	pieces = append(pieces, piece{text: t, start: hi, startLine: tailLine, endLine: v.newlines})
	return pieces, true
}

// markerReserve is the most bytes a marker line of a text of size bytes
// takes, with the newline that may precede it.
func (p *Projector) markerReserve(size int64) int {
	return len("...") + len(strconv.FormatInt(size, 10)) + len(" tokens truncated...") + 2
}

// joinPieces fills r from the kept pieces of v: the text with a marker in
// every gap, the counts and the spans.
func (p *Projector) joinPieces(r *Result, v view, pieces []piece, withinSize bool) {
	var kept, newlines int64
	size := 0
	for _, pc := range pieces {
		size += len(pc.text) + 48
	}
	out := make([]byte, 0, size)
	var last []byte
	for i, pc := range pieces {
		if i > 0 {
			prev := pieces[i-1]
			gapBytes := pc.start - prev.start - int64(len(prev.text))
			if gapBytes > 0 {
				if len(out) > 0 && out[len(out)-1] != '\n' {
					out = append(out, '\n')
				}
				count := p.inUnit(gapBytes)
				if withinSize {
					count = pc.startLine - prev.endLine
				}
				out = appendMarker(out, count, r.Unit)
				out = append(out, '\n')
			}
		}
		out = append(out, pc.text...)
		kept += int64(len(pc.text))
		newlines += int64(countNewlines(pc.text))
		if len(pc.text) > 0 {
			last = pc.text
			r.Kept = appendSpan(r.Kept, pc.start, int64(len(pc.text)))
		}
	}
	if len(last) > 0 && last[len(last)-1] != '\n' {
		newlines++
	}
	r.Text = out
	r.DroppedBytes = v.size - kept
	r.DroppedLines = r.OriginalLines - newlines
}

// appendSpan adds a kept span, merging it with the last one it continues.
func appendSpan(spans []Span, off, n int64) []Span {
	if k := len(spans); k > 0 && spans[k-1].Offset+spans[k-1].Length == off {
		spans[k-1].Length += n
		return spans
	}
	return append(spans, Span{Offset: off, Length: n})
}
