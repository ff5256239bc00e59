package budget

import (
	"bytes"
	"math"
	"strconv"
	"unicode/utf8"
)

// Result is the outcome of a projection.
type Result struct {
	// Text is what the model gets: the output itself when it fits, else the
	// preview with its marker. It never aliases the caller's input.
	Text []byte
	// Truncated reports that content was dropped.
	Truncated bool
	// JSON reports that Text is valid JSON because ProjectJSON kept the
	// structure (it is false after the fallback to text projection).
	JSON bool

	OriginalBytes int64
	OriginalLines int64
	// DroppedBytes and DroppedLines count what the preview lacks. For text
	// they are the bytes and lines of the input that are not in the preview
	// (see Project). For JSON they are OriginalBytes - len(Text) and
	// OriginalLines - lines of Text, insignificant white space included.
	DroppedBytes int64
	DroppedLines int64

	// Bound is the cap that made the projection drop content.
	Bound Bound
	// Unit is what the marker counts: "bytes", "tokens", "lines", or ""
	// when nothing was dropped.
	Unit string
	// DroppedItems counts the JSON array items replaced by item markers.
	DroppedItems int64

	// Window is the window of the projector that dropped content ("" when
	// nothing was dropped), and Kept the spans of the input that Text
	// keeps, in order (nil for a JSON projection, which keeps no span).
	Window Window
	Kept   []Span
}

// Project projects text onto the caps.
//
// A text within both caps comes back byte for byte. Otherwise the preview
// keeps a head and a tail (per the window) and gets one marker line between
// them, counting the dropped bytes (or tokens) when the size cap is
// exceeded, else the dropped lines. DroppedLines is OriginalLines minus the
// lines of head and tail joined, so a line cut in the middle is not counted
// as dropped.
//
// Besides counting newlines with bytes.Count, Project looks only at the
// bytes near its cuts, so it runs at memory speed on any text.
func (p *Projector) Project(text []byte) Result {
	n := len(text)
	w := min(n, p.edgeBytes())
	v := view{prefix: text[:w], suffix: text[n-w:], size: int64(n)}
	if p.matcher != nil && n > p.sizeCap {
		// Over the size cap: the error-line scan counts the lines too.
		c := p.newCollector()
		v.newlines = c.writeAll(text)
		v.errors = c.lines()
		return p.project(v)
	}
	v.newlines = int64(bytes.Count(text, newline))
	if p.matcher != nil && v.newlines >= int64(p.lineCap) {
		c := p.newCollector()
		c.write(text)
		v.errors = c.lines()
	}
	return p.project(v)
}

var newline = []byte{'\n'}

// view is all a projection needs to know about a text, so that a stream can
// provide it without holding the whole text.
type view struct {
	prefix   []byte // the first min(size, edgeBytes()) bytes
	suffix   []byte // the last min(size, edgeBytes()) bytes
	size     int64
	newlines int64
	errors   []errorLine // WindowErrors only: the text's collected error lines
}

// edgeBytes is how many bytes of each end a projection may look at: the head
// cut inspects one byte past the size cap to see whether it is a rune
// boundary, and the tail cut one byte before its window to see whether it
// follows a '\n'. A text within the size cap is therefore whole in prefix.
func (p *Projector) edgeBytes() int {
	if p.sizeCap == math.MaxInt {
		return math.MaxInt
	}
	return p.sizeCap + 1
}

func (p *Projector) project(v view) Result {
	lines := v.newlines
	if v.size > 0 && v.suffix[len(v.suffix)-1] != '\n' {
		lines++
	}
	r := Result{OriginalBytes: v.size, OriginalLines: lines}
	withinSize := v.size <= int64(p.sizeCap)
	if withinSize && lines <= int64(p.lineCap) {
		r.Text = append(make([]byte, 0, len(v.prefix)), v.prefix...)
		return r
	}

	r.Window = p.config.Window
	if withinSize {
		r.Bound, r.Unit = BoundLines, unitLines
	} else {
		r.Bound, r.Unit = BoundSize, p.unit()
	}
	if len(v.errors) > 0 {
		if pieces, ok := p.projectErrors(v, v.errors, withinSize); ok {
			r.Truncated = true
			p.joinPieces(&r, v, pieces, withinSize)
			return r
		}
	}
	head, tail := p.cut(v, withinSize)
	r.Truncated = true
	r.DroppedBytes = v.size - int64(len(head)+len(tail))
	r.DroppedLines = lines - joinedLines(head, tail)

	count := r.DroppedLines
	if !withinSize {
		count = p.inUnit(r.DroppedBytes)
	}
	r.Text = withMarkerLine(head, tail, count, r.Unit)
	r.Kept = make([]Span, 0, 2)
	if len(head) > 0 {
		r.Kept = append(r.Kept, Span{0, int64(len(head))})
	}
	if len(tail) > 0 {
		r.Kept = append(r.Kept, Span{v.size - int64(len(tail)), int64(len(tail))})
	}
	return r
}

// cutLines keeps whole lines of a text that fits the size cap but has more
// than lineCap lines; text is the whole text.
func (p *Projector) cutLines(text []byte) (head, tail []byte) {
	headLines := p.headShareOf(p.lineCap)
	tailLines := 0
	if p.keepsTail() {
		tailLines = p.lineCap - headLines
	}
	// Both counts stay below the text's lines, so the newlines they look
	// for exist and head and tail do not overlap.
	head = text[:afterNewlines(text, headLines)]
	tail = text[startOfLastLines(text, tailLines):]
	return head, tail
}

// cutSize keeps a head and a tail of a text that exceeds the size cap.
// prefix and suffix are the text's first and last edgeBytes() bytes.
func (p *Projector) cutSize(prefix, suffix []byte) (head, tail []byte) {
	head = cutHead(prefix, p.headShareOf(p.sizeCap), p.headShareOf(p.lineCap))
	if !p.keepsTail() {
		return head, nil
	}
	// The tail gets whatever the head left of both caps.
	tailBytes := p.sizeCap - len(head)
	tailLines := int64(p.lineCap) - joinedLines(head, nil)
	tail = cutTail(suffix, tailBytes, tailLines)
	return head, tail
}

// cutHead returns the longest head of text within maxBytes and maxLines,
// ending after a '\n' if one falls in the window, else on a rune boundary.
// text must be longer than maxBytes.
func cutHead(text []byte, maxBytes, maxLines int) []byte {
	if maxBytes <= 0 || maxLines <= 0 {
		return nil
	}
	window := text[:maxBytes]
	if i := nthNewline(window, maxLines); i >= 0 {
		return text[:i+1]
	}
	if i := bytes.LastIndexByte(window, '\n'); i >= 0 {
		return text[:i+1]
	}
	return text[:runeStartAtOrBefore(text, maxBytes)]
}

// cutTail returns the longest tail of text within maxBytes and maxLines,
// starting after a '\n' if one falls in the window, else on a rune boundary.
// text must be longer than maxBytes.
func cutTail(text []byte, maxBytes int, maxLines int64) []byte {
	if maxBytes <= 0 || maxLines <= 0 {
		return nil
	}
	lo := len(text) - maxBytes // the earliest start; lo >= 1
	// A tail may start right after any '\n' here; the final byte is left
	// out because a start after it would be an empty tail.
	starts := text[lo-1 : len(text)-1]
	if i := nthNewlineFromEnd(starts, maxLines); i >= 0 {
		return text[lo+i:]
	}
	if i := bytes.IndexByte(starts, '\n'); i >= 0 {
		return text[lo+i:]
	}
	return text[runeStartAtOrAfter(text, lo):]
}

// nthNewline returns the index of the n-th '\n' in b (n >= 1), or -1.
func nthNewline(b []byte, n int) int {
	at := -1
	for ; n > 0; n-- {
		i := bytes.IndexByte(b[at+1:], '\n')
		if i < 0 {
			return -1
		}
		at += i + 1
	}
	return at
}

// nthNewlineFromEnd returns the index of the n-th '\n' counted from the end
// of b (n >= 1), or -1.
func nthNewlineFromEnd(b []byte, n int64) int {
	end := len(b)
	for ; n > 0; n-- {
		i := bytes.LastIndexByte(b[:end], '\n')
		if i < 0 {
			return -1
		}
		end = i
	}
	return end
}

// afterNewlines returns the offset right after the n-th '\n' of text: the
// end of its first n lines.
func afterNewlines(text []byte, n int) int {
	if n <= 0 {
		return 0
	}
	if i := nthNewline(text, n); i >= 0 {
		return i + 1
	}
	return len(text)
}

// startOfLastLines returns the offset where the last n lines of text start.
func startOfLastLines(text []byte, n int) int {
	if n <= 0 || len(text) == 0 {
		return len(text)
	}
	// The final byte, '\n' or not, belongs to the last line.
	return nthNewlineFromEnd(text[:len(text)-1], int64(n)) + 1
}

// runeStartAtOrBefore moves a cut at i back to a rune boundary. It steps
// over at most UTFMax-1 continuation bytes, so invalid UTF-8 cannot make it
// wander.
func runeStartAtOrBefore(text []byte, i int) int {
	for k := 1; k < utf8.UTFMax && i > 0 && i < len(text) && !utf8.RuneStart(text[i]); k++ {
		i--
	}
	return i
}

// runeStartAtOrAfter moves a cut at i forward to a rune boundary.
func runeStartAtOrAfter(text []byte, i int) int {
	for k := 1; k < utf8.UTFMax && i < len(text) && !utf8.RuneStart(text[i]); k++ {
		i++
	}
	return i
}

// countNewlines counts the '\n' of b.
func countNewlines(b []byte) int { return bytes.Count(b, newline) }

// joinedLines counts the lines of head followed by tail.
func joinedLines(head, tail []byte) int64 {
	n := int64(bytes.Count(head, newline) + bytes.Count(tail, newline))
	last := tail
	if len(last) == 0 {
		last = head
	}
	if len(last) > 0 && last[len(last)-1] != '\n' {
		n++
	}
	return n
}

// appendMarker appends the text that stands for count dropped units.
func appendMarker(dst []byte, count int64, unit string) []byte {
	dst = append(dst, "..."...)
	dst = strconv.AppendInt(dst, count, 10)
	dst = append(dst, ' ')
	dst = append(dst, unit...)
	return append(dst, " truncated..."...)
}

// withMarkerLine joins head and tail with the marker on a line of its own.
func withMarkerLine(head, tail []byte, count int64, unit string) []byte {
	out := make([]byte, 0, len(head)+len(tail)+48)
	out = append(out, head...)
	if len(head) > 0 && head[len(head)-1] != '\n' {
		out = append(out, '\n')
	}
	out = appendMarker(out, count, unit)
	out = append(out, '\n')
	return append(out, tail...)
}
