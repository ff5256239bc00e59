package budget

import (
	"bytes"
	"errors"
	"unicode/utf8"

	"github.com/turnd/turnd/internal/rawjson"
)

// bytesPerItem sets the least number of items an array keeps at a level:
// one per this many bytes of the level. With items of average size alone,
// an array of large records would keep one or two records with long
// strings; this makes it keep more records with shorter strings instead.
const bytesPerItem = 64

// itemsAt is how many items an array keeps at a level: as many as the
// level's bytes hold by the array's average item size, but at least one per
// bytesPerItem bytes, and at least one.
func itemsAt(n *node, level int) int {
	if level >= wholeLevel(n) {
		return n.count
	}
	byAverage := int(float64(level) * float64(n.count) / float64(n.size))
	return max(1, level/bytesPerItem, byAverage)
}

// wholeLevel is the least level at which itemsAt keeps the whole array.
func wholeLevel(n *node) int {
	return min(n.size, n.count*bytesPerItem)
}

// ProjectJSON projects a JSON value so that it stays valid JSON of the same
// shape: input within both caps comes back byte for byte, anything else as
// compact JSON whose long strings and arrays are cut around a marker (keys
// are never dropped), Truncated only if something was cut. When no such
// shape fits it returns Project(raw) (JSON false); input that is not JSON
// yields an error wrapping ErrInvalidJSON. See ARCHITECTURE.md, "budget:
// JSON projection".
func (p *Projector) ProjectJSON(raw []byte) (Result, error) {
	if len(raw) <= p.sizeCap {
		// Within the size cap, and so within the node budget: the parse
		// below would only validate it (most outputs end here), unless
		// it has too many lines.
		if lines := joinedLines(raw, nil); lines <= int64(p.lineCap) {
			if err := validateJSON(raw); err != nil {
				return Result{}, err
			}
			return Result{JSON: true, OriginalBytes: int64(len(raw)), OriginalLines: lines, Text: bytes.Clone(raw)}, nil
		}
	}
	return p.projectTree(raw)
}

// projectTree is ProjectJSON through the parsed tree, whatever the size.
func (p *Projector) projectTree(raw []byte) (Result, error) {
	t, err := p.parseJSON(raw, 1, nil)
	for scale := 2; errors.Is(err, errTooManyNodes); scale *= 2 {
		if scale > p.sizeCap {
			// Zones cannot shrink further; this input has no tree within
			// the budget, so it only needs checking before text takes over.
			if err := validateJSON(raw); err != nil {
				return Result{}, err
			}
			return p.Project(raw), nil
		}
		t, err = p.parseJSON(raw, scale, t.nodes)
	}
	if err != nil {
		return Result{}, err
	}
	r := Result{
		JSON:          true,
		OriginalBytes: int64(len(raw)),
		OriginalLines: joinedLines(raw, nil),
	}
	if len(raw) <= p.sizeCap && r.OriginalLines <= int64(p.lineCap) {
		r.Text = bytes.Clone(raw)
		return r, nil
	}
	switch {
	case p.lineCap < 1:
		// Compact JSON is one line, so a zero line cap leaves only text.
		return p.Project(raw), nil
	case t.compactSize <= p.sizeCap:
		r.Text = rawjson.AppendCompactValid(make([]byte, 0, t.compactSize), raw)
	case t.tooDeep:
		return p.Project(raw), nil
	default:
		pl, ok := t.search(p)
		if !ok {
			return p.Project(raw), nil
		}
		w := writer{tree: t, p: p, plan: pl, out: make([]byte, 0, min(p.sizeCap, t.compactSize))}
		w.value(0)
		r.Text = w.out
		r.Truncated = true
		r.Bound = BoundSize
		r.Unit = p.unit()
		r.DroppedItems = w.droppedItems
	}
	r.DroppedBytes = r.OriginalBytes - int64(len(r.Text))
	r.DroppedLines = r.OriginalLines - 1
	return r, nil
}

// plan caps a projection: strings keep at most chars content bytes, and
// arrays keep itemsAt(level) items.
type plan struct {
	chars int
	level int
}

// leavesWhole reports that n's subtree is left as it is by the plan.
func (pl plan) leavesWhole(n *node) bool {
	return n.maxString <= pl.chars && n.maxLevel <= pl.level
}

// search finds the plan with the largest caps whose projection fits the
// size cap, or reports that not even the smallest plan fits.
func (t *tree) search(p *Projector) (plan, bool) {
	fits := func(pl plan) bool {
		s := sizer{tree: t, p: p, plan: pl, limit: p.sizeCap}
		return s.value(0)
	}
	if !fits(plan{}) {
		return plan{}, false
	}
	maxString := t.nodes[0].maxString
	// First strings and arrays shrink together to one level of bytes, so
	// that neither is starved for the other; then each in turn takes what
	// the other left.
	x := largest(0, max(maxString, t.maxLevel)+1, func(x int) bool { return fits(plan{chars: x, level: x}) })
	best := plan{chars: x, level: x}
	best.chars = largest(best.chars, maxString+1, func(c int) bool { return fits(plan{chars: c, level: best.level}) })
	best.level = largest(best.level, t.maxLevel+1, func(l int) bool { return fits(plan{chars: best.chars, level: l}) })
	return best, true
}

// largest returns the largest x in [lo, hi) for which ok holds, given that
// ok(lo) does and that ok holds on a prefix of the range. (Sizes are nearly
// monotone in the caps; where they are not, the answer still fits.)
func largest(lo, hi int, ok func(int) bool) int {
	for lo+1 < hi {
		mid := lo + (hi-lo)/2
		if ok(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// sizer adds up the compact size of a plan's projection, giving up as soon
// as it exceeds the limit. Every node it visits adds at least one byte, so
// one sizing costs O(limit) however large the input.
type sizer struct {
	tree  *tree
	p     *Projector
	plan  plan
	used  int
	limit int
}

func (s *sizer) add(n int) bool {
	s.used += n
	return s.used <= s.limit
}

func (s *sizer) value(id int) bool {
	t := s.tree
	n := &t.nodes[id]
	if s.plan.leavesWhole(n) {
		return s.add(n.size)
	}
	switch n.kind {
	case kindString:
		size, _ := s.p.stringSize(n.size-2, s.plan.chars)
		return s.add(size)
	case kindObject:
		if n.tooBig || !s.add(2+max(n.count-1, 0)) {
			return false
		}
		kids := t.kids[n.kids : n.kids+2*n.count]
		for i := 0; i < len(kids); i += 2 {
			if !s.add(t.nodes[kids[i]].size+1) || !s.value(kids[i+1]) {
				return false
			}
		}
		return true
	case kindArray:
		c, ok := t.cut(s.p, n, itemsAt(n, s.plan.level))
		if !ok {
			return false
		}
		kept := c.head + c.tail
		size := 2 + max(kept-1, 0)
		if c.dropped > 0 {
			size = 2 + kept + itemMarkerSize(c.dropped)
		}
		if !s.add(size) {
			return false
		}
		kids := t.kids[n.kids : n.kids+n.head+n.tail]
		for _, k := range kids[:c.head] {
			if !s.value(k) {
				return false
			}
		}
		for _, k := range kids[len(kids)-c.tail:] {
			if !s.value(k) {
				return false
			}
		}
		return true
	}
	return s.add(n.size)
}

// arrayCut is what a plan keeps of an array: head items from the start,
// tail items from the end, and the number dropped in between.
type arrayCut struct {
	head, tail, dropped int
}

// cut applies a plan's item count to an array. It reports false when the
// array would keep no item: every non-empty array keeps at least one, and
// only items with nodes can be kept.
func (t *tree) cut(p *Projector, n *node, items int) (arrayCut, bool) {
	elided := n.head+n.tail < n.count
	whole := arrayCut{head: n.count}
	if !elided && n.count <= items {
		return whole, true
	}
	head := min(p.headItems(items), n.head)
	tail := min(items-head, n.tail)
	head = min(items-tail, n.head) // the tail may return what it cannot use
	if head+tail == 0 {
		return arrayCut{}, false
	}
	c := arrayCut{head: head, tail: tail, dropped: n.count - head - tail}
	if elided {
		return c, true
	}
	// Trim only if the dropped items and their commas take more room than
	// the marker and its comma.
	kids := t.kids[n.kids : n.kids+n.count]
	droppedSize := n.size - 2 - (n.count - 1) + c.dropped
	for _, k := range kids[:head] {
		droppedSize -= t.nodes[k].size
	}
	for _, k := range kids[len(kids)-tail:] {
		droppedSize -= t.nodes[k].size
	}
	if droppedSize <= itemMarkerSize(c.dropped)+1 {
		return whole, true
	}
	return c, true
}

// headItems is how many of k kept items come from the head of an array.
func (p *Projector) headItems(k int) int {
	switch p.config.Window {
	case WindowHead:
		return k
	case WindowTail:
		return 0
	}
	h := float64(k) * p.config.HeadShare
	n := int(h)
	if float64(n) < h {
		n++
	}
	return min(n, k)
}

// markerTextSize is the length of "... truncated..." around a count.
const markerTextSize = len("...") + len(" ") + len(" truncated...")

// markerSize is the length of the size marker for maxBytes dropped bytes.
// A string's marker never counts more than its length, so markerSize of the
// length bounds it from above.
func (p *Projector) markerSize(maxBytes int) int {
	return markerTextSize + digits(p.inUnit(int64(maxBytes))) + len(p.unit())
}

// itemMarkerSize is the length of the quoted item marker for n items.
func itemMarkerSize(n int) int {
	return 2 + markerTextSize + digits(int64(n)) + len("items")
}

func digits(n int64) int {
	d := 1
	for ; n >= 10; n /= 10 {
		d++
	}
	return d
}

// stringSize returns the projected size of a string value with c content
// bytes under a cap of chars bytes, and whether it stays whole: it does
// when shortening would not make it smaller.
func (p *Projector) stringSize(c, chars int) (size int, whole bool) {
	if c <= chars {
		return c + 2, true
	}
	m := p.markerSize(c)
	if c <= chars+m {
		return c + 2, true
	}
	return chars + m + 2, false
}

// writer emits a plan's projection, making the same choices as sizer.
type writer struct {
	tree         *tree
	p            *Projector
	plan         plan
	out          []byte
	droppedItems int64
}

func (w *writer) value(id int) {
	t := w.tree
	n := &t.nodes[id]
	raw := t.raw[n.start:n.end]
	if w.plan.leavesWhole(n) {
		w.out = rawjson.AppendCompactValid(w.out, raw)
		return
	}
	switch n.kind {
	case kindString:
		if _, whole := w.p.stringSize(n.size-2, w.plan.chars); whole {
			w.out = append(w.out, raw...)
			return
		}
		w.out = w.p.appendShortString(w.out, raw[1:len(raw)-1], w.plan.chars)
	case kindObject:
		w.out = append(w.out, '{')
		kids := t.kids[n.kids : n.kids+2*n.count]
		for i := 0; i < len(kids); i += 2 {
			if i > 0 {
				w.out = append(w.out, ',')
			}
			key := &t.nodes[kids[i]]
			w.out = append(w.out, t.raw[key.start:key.end]...)
			w.out = append(w.out, ':')
			w.value(kids[i+1])
		}
		w.out = append(w.out, '}')
	case kindArray:
		c, _ := t.cut(w.p, n, itemsAt(n, w.plan.level))
		kids := t.kids[n.kids : n.kids+n.head+n.tail]
		w.out = append(w.out, '[')
		for i, k := range kids[:c.head] {
			if i > 0 {
				w.out = append(w.out, ',')
			}
			w.value(k)
		}
		if c.dropped > 0 {
			if c.head > 0 {
				w.out = append(w.out, ',')
			}
			w.out = append(w.out, '"')
			w.out = appendMarker(w.out, int64(c.dropped), "items")
			w.out = append(w.out, '"')
			w.droppedItems += int64(c.dropped)
		}
		for i, k := range kids[len(kids)-c.tail:] {
			if i > 0 || c.head > 0 || c.dropped > 0 {
				w.out = append(w.out, ',')
			}
			w.value(k)
		}
		w.out = append(w.out, ']')
	default:
		w.out = append(w.out, raw...)
	}
}

// appendShortString appends a string value whose content (escaped, without
// quotes) keeps at most keep bytes around a marker. Cuts fall between
// escape sequences (a surrogate pair counts as one) and between runes.
func (p *Projector) appendShortString(dst, content []byte, keep int) []byte {
	head := headCutJSON(content, p.headShareOf(keep))
	tailBudget := 0
	if p.keepsTail() {
		tailBudget = keep - head // the tail gets what the head's cut left
	}
	tailStart, dropped := skipJSON(content, head, len(content)-tailBudget)
	if line := lineStartJSON(content, tailStart, tailBudget/4); line > tailStart {
		_, more := skipJSON(content, tailStart, line)
		tailStart, dropped = line, dropped+more
	}
	dst = append(dst, '"')
	dst = append(dst, content[:head]...)
	dst = appendMarker(dst, p.inUnit(int64(dropped)), p.unit())
	dst = append(dst, content[tailStart:]...)
	return append(dst, '"')
}

// headCutJSON returns the longest prefix of string content within limit
// bytes that ends between escapes and runes. Like text, a string holding
// lines is cut after an escaped newline, but only when that loses at most
// a quarter of the prefix: a string's budget is small and hard-won.
func headCutJSON(content []byte, limit int) int {
	i, line := 0, 0
	for i < len(content) {
		l := jsonUnitLen(content, i)
		if i+l > limit {
			break
		}
		if content[i] == '\\' && content[i+1] == 'n' {
			line = i + l
		}
		i += l
	}
	if line > 0 && line >= i-i/4 {
		return line
	}
	return i
}

// lineStartJSON returns the offset right after the first escaped newline in
// content[from:from+within], or from if there is none. from must be a unit
// boundary.
func lineStartJSON(content []byte, from, within int) int {
	end := min(len(content), from+within)
	for i := from; i < end; {
		if content[i] != '\\' {
			i++ // a rune's bytes are never '\\', so stepping bytewise is safe
			continue
		}
		l := escapeLen(content, i)
		if content[i+1] == 'n' {
			if i+l <= end {
				return i + l
			}
			break
		}
		i += l
	}
	return from
}

// jsonUnitLen is the length of the escape sequence or rune at i.
func jsonUnitLen(content []byte, i int) int {
	switch c := content[i]; {
	case c == '\\':
		return escapeLen(content, i)
	case c < 0x80:
		return 1
	}
	_, size := utf8.DecodeRune(content[i:])
	return size
}

// skipJSON skips string content from a unit boundary to the first unit
// boundary at or after to, returning it and the decoded length of what it
// skipped. Escapes are found with bytes.IndexByte, so long runs cost little.
func skipJSON(content []byte, from, to int) (end, decoded int) {
	i := from
	for i < to {
		j := bytes.IndexByte(content[i:to], '\\')
		if j < 0 {
			decoded += to - i
			i = to
			break
		}
		i += j
		decoded += j
		l := escapeLen(content, i)
		decoded += escapeDecodedLen(content, i, l)
		i += l
	}
	if i == to {
		// Not inside an escape; step over continuation bytes so no rune
		// is split.
		for k := 1; k < utf8.UTFMax && i < len(content) && !utf8.RuneStart(content[i]); k++ {
			i++
			decoded++
		}
	}
	return i, decoded
}

// escapeLen is the length of the escape at i, 12 for a surrogate pair.
// content has been validated.
func escapeLen(content []byte, i int) int {
	if content[i+1] != 'u' {
		return 2
	}
	if r := hex4(content[i+2:]); r >= 0xD800 && r < 0xDC00 &&
		i+12 <= len(content) && content[i+6] == '\\' && content[i+7] == 'u' {
		if r2 := hex4(content[i+8:]); r2 >= 0xDC00 && r2 < 0xE000 {
			return 12
		}
	}
	return 6
}

// escapeDecodedLen is how many UTF-8 bytes the escape at i stands for.
func escapeDecodedLen(content []byte, i, l int) int {
	switch l {
	case 2:
		return 1
	case 12:
		return 4
	}
	switch r := hex4(content[i+2:]); {
	case r < 0x80:
		return 1
	case r < 0x800:
		return 2
	}
	return 3 // includes a lone surrogate, which decodes to U+FFFD
}

func hex4(b []byte) int {
	return rawjson.HexValue(b[0])<<12 | rawjson.HexValue(b[1])<<8 | rawjson.HexValue(b[2])<<4 | rawjson.HexValue(b[3])
}
