package rawjson

import (
	"bytes"
	"encoding/json"
	"slices"
	"unicode/utf8"
)

// Reencode is the definition of the canonical form, by encoding/json: raw's
// first JSON value decoded into any (numbers as json.Number) and marshalled
// again, so object keys sorted bytewise with only the last of a repeated
// key kept, no whitespace, strings as json.Marshal writes their text.
// Invalid JSON is returned as it is.
func Reencode(raw []byte) []byte {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return raw
	}
	b, err := json.Marshal(v)
	if err != nil {
		return raw
	}
	return b
}

// MaxCanonicalDepth bounds the nesting a Canonicalizer follows.
const MaxCanonicalDepth = 500

// maxRetained bounds the scratch buffer a Canonicalizer keeps across Reset.
const maxRetained = 64 << 10

// Canonicalizer writes the canonical form in one pass, reusing its buffers
// from call to call; the zero value is ready. It declines what Reencode
// alone can judge: invalid JSON, text after the value, nesting deeper than
// MaxCanonicalDepth.
type Canonicalizer struct {
	in    []byte
	i     int
	depth int
	out   []byte
	// scratch holds an object's members while they are written back in order.
	scratch []byte
	// members holds the members of the objects being written, the innermost
	// object's last.
	members []canonMember
}

type canonMember struct {
	key        []byte // decoded; a slice of the input unless it needed unescaping
	start, end int    // the member, `"key":value`, in out
}

// Reset drops the references to past inputs (and an oversized buffer), so
// that the Canonicalizer can be pooled.
func (w *Canonicalizer) Reset() {
	w.in, w.out = nil, nil
	if cap(w.scratch) > maxRetained {
		w.scratch = nil
	}
	clear(w.members[:cap(w.members)]) // the keys point into inputs
	w.members = w.members[:0]
}

// Append appends the canonical form of raw, one JSON value between
// optional whitespace, to dst. It reports false where it declines; dst's
// bytes past its original length are then meaningless.
func (w *Canonicalizer) Append(dst, raw []byte) ([]byte, bool) {
	w.in, w.i, w.depth, w.out = raw, 0, 0, dst
	w.members = w.members[:0] // what a declined document left
	ok := w.value()
	if ok {
		w.skipSpace()
		ok = w.i == len(w.in)
	}
	out := w.out
	w.in, w.out = nil, nil
	return out, ok
}

func (w *Canonicalizer) skipSpace() { w.i = spaceEnd(w.in, w.i) }

func (w *Canonicalizer) value() bool {
	w.skipSpace()
	if w.i >= len(w.in) {
		return false
	}
	switch c := w.in[w.i]; c {
	case '{':
		return w.object()
	case '[':
		return w.array()
	case '"':
		return w.string()
	case 't', 'f', 'n':
		return w.copyTo(LiteralEnd(w.in, w.i, literals[c]))
	default:
		// A json.Number marshals as it is.
		return w.copyTo(NumberEnd(w.in, w.i))
	}
}

// copyTo copies the input up to end, or reports false if end is -1.
func (w *Canonicalizer) copyTo(end int) bool {
	if end < 0 {
		return false
	}
	w.out = append(w.out, w.in[w.i:end]...)
	w.i = end
	return true
}

// next skips whitespace and reports the byte there, 0 at the end.
func (w *Canonicalizer) next() byte {
	w.skipSpace()
	if w.i < len(w.in) {
		return w.in[w.i]
	}
	return 0
}

func (w *Canonicalizer) object() bool {
	if w.depth++; w.depth > MaxCanonicalDepth {
		return false
	}
	w.i++ // {
	w.out = append(w.out, '{')
	start, base := len(w.out), len(w.members)
	ordered := true
	if w.next() == '}' {
		w.i++
	} else {
		for {
			if w.next() != '"' {
				return false
			}
			keyAt, at := w.i, len(w.out)
			if !w.string() {
				return false
			}
			key, ok := decodedKey(w.in[keyAt:w.i])
			if !ok {
				return false
			}
			if w.next() != ':' {
				return false
			}
			w.i++
			w.out = append(w.out, ':')
			if !w.value() {
				return false
			}
			if n := len(w.members); n > base && bytes.Compare(w.members[n-1].key, key) >= 0 {
				ordered = false
			}
			w.members = append(w.members, canonMember{key: key, start: at, end: len(w.out)})
			c := w.next()
			w.i++
			if c == '}' {
				break
			}
			if c != ',' {
				return false
			}
			w.out = append(w.out, ',')
		}
	}
	if !ordered {
		w.reorder(start, w.members[base:])
	}
	w.members = w.members[:base]
	w.out = append(w.out, '}')
	w.depth--
	return true
}

// reorder rewrites the members written from start in the order of their
// keys, keeping only the last of members with the same key, as a map
// would.
func (w *Canonicalizer) reorder(start int, ms []canonMember) {
	slices.SortFunc(ms, func(a, b canonMember) int {
		if c := bytes.Compare(a.key, b.key); c != 0 {
			return c
		}
		return a.start - b.start
	})
	w.scratch = append(w.scratch[:0], w.out[start:]...)
	w.out = w.out[:start]
	for j, m := range ms {
		if j+1 < len(ms) && bytes.Equal(ms[j+1].key, m.key) {
			continue // a later member with this key replaces it
		}
		if len(w.out) > start {
			w.out = append(w.out, ',')
		}
		w.out = append(w.out, w.scratch[m.start-start:m.end-start]...)
	}
}

func (w *Canonicalizer) array() bool {
	if w.depth++; w.depth > MaxCanonicalDepth {
		return false
	}
	w.i++ // [
	w.out = append(w.out, '[')
	if w.next() == ']' {
		w.i++
	} else {
		for {
			if !w.value() {
				return false
			}
			c := w.next()
			w.i++
			if c == ']' {
				break
			}
			if c != ',' {
				return false
			}
			w.out = append(w.out, ',')
		}
	}
	w.out = append(w.out, ']')
	w.depth--
	return true
}

// string writes the string at w.i as json.Marshal writes its decoded
// text. Plain text, the escapes that decode to a character json.Marshal
// escapes the same way, <, >, & and valid UTF-8 are handled here; a \u
// escape, invalid UTF-8 or a control character sends the string to
// decodedString.
func (w *Canonicalizer) string() bool {
	in, at, mark := w.in, w.i, len(w.out)
	w.out = append(w.out, '"')
	run := at + 1 // the start of the bytes not yet copied
	safe := &safeASCII[EscapeHTML]
	for i := run; i < len(in); {
		c := in[i]
		switch {
		case c == '"':
			w.out = append(w.out, in[run:i]...)
			w.out = append(w.out, '"')
			w.i = i + 1
			return true
		case c == '\\':
			if i+1 >= len(in) {
				return false
			}
			switch in[i+1] {
			case '"', '\\', 'b', 'f', 'n', 'r', 't':
				i += 2 // decodes to a character written with this same escape
			case '/':
				w.out = append(w.out, in[run:i]...)
				w.out = append(w.out, '/')
				i += 2
				run = i
			default:
				return w.decodedString(at, mark)
			}
		case c < utf8.RuneSelf && safe[c]:
			i++
		case c == '<' || c == '>' || c == '&':
			w.out = append(w.out, in[run:i]...)
			w.out = append(w.out, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			i++
			run = i
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(in[i:])
			switch {
			case r == utf8.RuneError && size == 1:
				return w.decodedString(at, mark) // decodes to U+FFFD
			case r == '\u2028' || r == '\u2029':
				w.out = append(w.out, in[run:i]...)
				w.out = append(w.out, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
				i += size
				run = i
			default:
				i += size
			}
		default:
			return false // a control character: invalid
		}
	}
	return false // unterminated
}

// decodedString rewrites the string token at in[at:] (whose output began
// at out[mark:]) by decoding it with encoding/json and quoting the text.
func (w *Canonicalizer) decodedString(at, mark int) bool {
	end := StringEnd(w.in, at)
	if end < 0 {
		return false
	}
	var s string
	if err := json.Unmarshal(w.in[at:end], &s); err != nil {
		return false
	}
	w.out = AppendString(w.out[:mark], s, EscapeHTML)
	w.i = end
	return true
}

// decodedKey returns the text of tok, a string token that string()
// accepted. Without escapes its valid UTF-8 bytes are the text; otherwise
// encoding/json decodes it (and the key then costs an allocation).
func decodedKey(tok []byte) ([]byte, bool) {
	inner := tok[1 : len(tok)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return inner, true
	}
	var s string
	if err := json.Unmarshal(tok, &s); err != nil {
		return nil, false
	}
	return []byte(s), true
}

// IsCanonical reports, without allocating, whether raw is exactly its
// canonical form: one JSON value, no whitespace, object keys strictly
// increasing, strings of printable ASCII that json.Marshal writes as they
// are. It may say false of a canonical value (one with non-ASCII text,
// say), never true of another.
func IsCanonical(raw []byte) bool {
	i := canonicalEnd(raw, 0)
	return i >= 0 && i == len(raw)
}

// canonicalEnd returns the index past the canonical value at raw[i], or -1.
func canonicalEnd(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch c := b[i]; c {
	case '{':
		if i++; i < len(b) && b[i] == '}' {
			return i + 1
		}
		var prev []byte
		for first := true; ; first = false {
			start := i + 1
			if i = canonicalStringEnd(b, i); i < 0 {
				return -1
			}
			key := b[start : i-1]
			if !first && bytes.Compare(prev, key) >= 0 {
				return -1
			}
			prev = key
			if i >= len(b) || b[i] != ':' {
				return -1
			}
			if i = canonicalEnd(b, i+1); i < 0 || i >= len(b) {
				return -1
			}
			switch b[i] {
			case ',':
				i++
			case '}':
				return i + 1
			default:
				return -1
			}
		}
	case '[':
		if i++; i < len(b) && b[i] == ']' {
			return i + 1
		}
		for {
			if i = canonicalEnd(b, i); i < 0 || i >= len(b) {
				return -1
			}
			switch b[i] {
			case ',':
				i++
			case ']':
				return i + 1
			default:
				return -1
			}
		}
	case '"':
		return canonicalStringEnd(b, i)
	case 't', 'f', 'n':
		return LiteralEnd(b, i, literals[c])
	default:
		return NumberEnd(b, i)
	}
}

// canonicalStringEnd returns the index past the string at b[i] if it is
// printable ASCII without escapes or <, >, &; else -1.
func canonicalStringEnd(b []byte, i int) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	safe := &safeASCII[EscapeHTML]
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1
		case c >= utf8.RuneSelf || !safe[c] || c == 0x7f:
			return -1
		}
	}
	return -1
}
