package turn

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/turnd/turnd/dispatch"
)

// canonicalJSON re-encodes a JSON value with sorted keys and no
// insignificant whitespace, so that formatting differences in a client's
// retry do not read as a conflict. Invalid JSON is returned as is.
//
// The result is defined by reencodeJSON (decode into any, marshal again);
// a canonWriter produces the same bytes without building maps, and
// reencodeJSON itself runs only for what the writer declines.
func canonicalJSON(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	if isCanonical(raw) {
		return raw // what the re-encoding below would produce, byte for byte
	}
	w := getCanonWriter()
	defer putCanonWriter(w)
	w.out = w.out[:0]
	if w.document(raw) {
		return bytes.Clone(w.out)
	}
	return reencodeJSON(raw)
}

// reencodeJSON decodes the first JSON value of raw into any (numbers as
// json.Number) and marshals it again: maps marshal with sorted keys, a
// repeated key keeps its last value, strings come out as encoding/json
// writes them. Invalid JSON is returned as is.
func reencodeJSON(raw []byte) []byte {
	var v any
	dec := json.NewDecoder(strings.NewReader(string(raw)))
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

// canonWriter writes, in one pass over its input, the bytes reencodeJSON
// produces: whitespace dropped, numbers and literals copied (a json.Number
// marshals verbatim), object members sorted bytewise by their decoded key
// with only the last of a repeated key kept, strings as encoding/json
// writes their decoded text. A member is written where it is read and the
// object's members are reordered afterwards, only when they are not
// already in order. Strings that are not plain text with the simple
// escapes are handed to encoding/json one at a time. The writer declines
// (returns false, its output then meaningless) whatever it does not handle
// exactly: invalid JSON, text after the value, nesting deeper than
// maxCanonDepth.
type canonWriter struct {
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

// maxCanonDepth bounds the writer's recursion; deeper values, rare in tool
// arguments, are left to reencodeJSON (whose decoder stops at 10000).
const maxCanonDepth = 500

// maxPooledCanon keeps a writer that served a huge request out of the pool.
const maxPooledCanon = 64 << 10

var canonPool = sync.Pool{New: func() any { return new(canonWriter) }}

func getCanonWriter() *canonWriter { return canonPool.Get().(*canonWriter) }

func putCanonWriter(w *canonWriter) {
	if cap(w.out) > maxPooledCanon || cap(w.scratch) > maxPooledCanon {
		return
	}
	w.in = nil
	clear(w.members[:cap(w.members)]) // the keys point into request bodies
	w.members = w.members[:0]
	canonPool.Put(w)
}

// request writes what json.Marshal writes for requestHashJSON's struct.
func (w *canonWriter) request(calls []Call, mode dispatch.Mode, policy dispatch.FailurePolicy) bool {
	w.out = append(w.out[:0], `{"calls":[`...)
	for i, c := range calls {
		if i > 0 {
			w.out = append(w.out, ',')
		}
		w.out = append(w.out, `{"id":`...)
		w.out = appendJSONString(w.out, c.ID)
		w.out = append(w.out, `,"name":`...)
		w.out = appendJSONString(w.out, c.Name)
		// canonicalJSON never returns nothing, so omitempty never omits.
		w.out = append(w.out, `,"arguments":`...)
		if len(c.Arguments) == 0 {
			w.out = append(w.out, "null"...)
		} else if !w.document(c.Arguments) {
			return false
		}
		w.out = append(w.out, '}')
	}
	w.out = append(w.out, `],"mode":`...)
	w.out = appendJSONString(w.out, string(mode))
	w.out = append(w.out, `,"policy":`...)
	w.out = appendJSONString(w.out, string(policy))
	w.out = append(w.out, '}')
	return true
}

// appendJSONString appends s as json.Marshal writes a Go string.
func appendJSONString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if !plainByte(s[i]) || s[i] == '\\' {
			b, _ := json.Marshal(s) // a string always marshals
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// plainByte reports whether encoding/json writes c, a byte of a string
// (not a quote), as it is: printable ASCII other than <, > and &, which
// it escapes for HTML. The backslash is the caller's to judge.
func plainByte(c byte) bool {
	return c >= 0x20 && c < utf8.RuneSelf && c != '"' && c != '<' && c != '>' && c != '&'
}

// document appends the canonical form of raw, one JSON value between
// optional whitespace.
func (w *canonWriter) document(raw []byte) bool {
	w.in, w.i, w.depth = raw, 0, 0
	w.members = w.members[:0] // what a declined document left
	if !w.value() {
		return false
	}
	w.skipSpace()
	return w.i == len(w.in)
}

func (w *canonWriter) skipSpace() {
	for w.i < len(w.in) {
		switch w.in[w.i] {
		case ' ', '\t', '\n', '\r':
			w.i++
		default:
			return
		}
	}
}

func (w *canonWriter) value() bool {
	w.skipSpace()
	if w.i >= len(w.in) {
		return false
	}
	switch w.in[w.i] {
	case '{':
		return w.object()
	case '[':
		return w.array()
	case '"':
		return w.string()
	case 't':
		return w.literal("true")
	case 'f':
		return w.literal("false")
	case 'n':
		return w.literal("null")
	default:
		return w.number()
	}
}

// next skips whitespace and reports the byte there, 0 at the end.
func (w *canonWriter) next() byte {
	w.skipSpace()
	if w.i < len(w.in) {
		return w.in[w.i]
	}
	return 0
}

func (w *canonWriter) object() bool {
	if w.depth++; w.depth > maxCanonDepth {
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
func (w *canonWriter) reorder(start int, ms []canonMember) {
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

func (w *canonWriter) array() bool {
	if w.depth++; w.depth > maxCanonDepth {
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

const hexDigits = "0123456789abcdef"

// string writes the string at w.i as encoding/json writes its decoded
// text. Plain text, the escapes that decode to a character encoding/json
// escapes the same way, <, >, & and valid UTF-8 are handled here; a \u
// escape, invalid UTF-8 or a control character sends the string to
// encodedString.
func (w *canonWriter) string() bool {
	in, at, mark := w.in, w.i, len(w.out)
	w.out = append(w.out, '"')
	run := at + 1 // the start of the bytes not yet copied
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
				return w.encodedString(at, mark)
			}
		case plainByte(c):
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
				return w.encodedString(at, mark) // decodes to U+FFFD
			case r == '\u2028' || r == '\u2029':
				w.out = append(w.out, in[run:i]...)
				w.out = append(w.out, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
				i += size
				run = i
			default:
				i += size
			}
		default:
			return w.encodedString(at, mark) // a control character: invalid
		}
	}
	return false // unterminated
}

// encodedString rewrites the string token at in[at:] (whose output began
// at out[mark:]) by decoding it with encoding/json and encoding the text.
func (w *canonWriter) encodedString(at, mark int) bool {
	end := stringEnd(w.in, at)
	if end < 0 {
		return false
	}
	var s string
	if err := json.Unmarshal(w.in[at:end], &s); err != nil {
		return false
	}
	b, _ := json.Marshal(s) // a string always marshals
	w.out = append(w.out[:mark], b...)
	w.i = end
	return true
}

// stringEnd returns the index after the string token at in[at:], or -1 if
// it is not terminated.
func stringEnd(in []byte, at int) int {
	for i := at + 1; i < len(in); i++ {
		switch in[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return -1
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

func (w *canonWriter) literal(lit string) bool {
	if !bytes.HasPrefix(w.in[w.i:], []byte(lit)) {
		return false
	}
	w.i += len(lit)
	w.out = append(w.out, lit...)
	return true
}

// number copies -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? as it is,
// as a json.Number marshals.
func (w *canonWriter) number() bool {
	c := canonScan{b: w.in, i: w.i}
	if !c.number() {
		return false
	}
	w.out = append(w.out, w.in[w.i:c.i]...)
	w.i = c.i
	return true
}

// isCanonical reports, without allocating, whether raw is exactly what
// canonicalJSON's decode and re-encode would produce: one JSON value, no
// whitespace, object keys strictly increasing (bytewise, as encoding/json
// sorts them; a repeated key is not canonical, decoding keeps only its
// last value), strings of printable ASCII needing no escape and not
// escaped by encoding/json (<, > and &). It may say false of a canonical
// value (e.g. one with non-ASCII text), never true of another.
func isCanonical(raw []byte) bool {
	c := canonScan{b: raw}
	return c.value() && c.i == len(raw)
}

type canonScan struct {
	b []byte
	i int
}

func (c *canonScan) peek() byte {
	if c.i < len(c.b) {
		return c.b[c.i]
	}
	return 0
}

func (c *canonScan) value() bool {
	switch c.peek() {
	case '{':
		c.i++
		if c.peek() == '}' {
			c.i++
			return true
		}
		var prev []byte
		for first := true; ; first = false {
			start := c.i + 1
			if !c.str() {
				return false
			}
			key := c.b[start : c.i-1]
			if !first && bytes.Compare(prev, key) >= 0 {
				return false
			}
			prev = key
			if c.peek() != ':' {
				return false
			}
			c.i++
			if !c.value() {
				return false
			}
			switch c.peek() {
			case ',':
				c.i++
			case '}':
				c.i++
				return true
			default:
				return false
			}
		}
	case '[':
		c.i++
		if c.peek() == ']' {
			c.i++
			return true
		}
		for {
			if !c.value() {
				return false
			}
			switch c.peek() {
			case ',':
				c.i++
			case ']':
				c.i++
				return true
			default:
				return false
			}
		}
	case '"':
		return c.str()
	case 't':
		return c.literal("true")
	case 'f':
		return c.literal("false")
	case 'n':
		return c.literal("null")
	default:
		return c.number()
	}
}

// str scans a string of printable ASCII without escapes or <, >, &.
func (c *canonScan) str() bool {
	if c.peek() != '"' {
		return false
	}
	for c.i++; c.i < len(c.b); c.i++ {
		switch ch := c.b[c.i]; {
		case ch == '"':
			c.i++
			return true
		case ch < 0x20 || ch > 0x7e || ch == '\\' || ch == '<' || ch == '>' || ch == '&':
			return false
		}
	}
	return false
}

func (c *canonScan) literal(lit string) bool {
	if !bytes.HasPrefix(c.b[c.i:], []byte(lit)) {
		return false
	}
	c.i += len(lit)
	return true
}

// number scans -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?, which a
// json.Number re-encodes as it is.
func (c *canonScan) number() bool {
	if c.peek() == '-' {
		c.i++
	}
	switch ch := c.peek(); {
	case ch == '0':
		c.i++
	case ch >= '1' && ch <= '9':
		c.digits()
	default:
		return false
	}
	if c.peek() == '.' {
		c.i++
		if c.digits() == 0 {
			return false
		}
	}
	if ch := c.peek(); ch == 'e' || ch == 'E' {
		c.i++
		if ch := c.peek(); ch == '+' || ch == '-' {
			c.i++
		}
		if c.digits() == 0 {
			return false
		}
	}
	return true
}

func (c *canonScan) digits() int {
	n := 0
	for ch := c.peek(); ch >= '0' && ch <= '9'; ch = c.peek() {
		c.i++
		n++
	}
	return n
}
