package turn

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/turnd/turnd/dispatch"
)

var idEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// newID returns prefix + 26 lowercase base32 characters (128 random bits).
func newID(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return prefix + strings.ToLower(idEncoding.EncodeToString(b[:]))
}

// validPathID reports whether id may name a session or turn: it appears in
// URL paths, so it is limited to unreserved characters.
func validPathID(id string) bool {
	if len(id) == 0 || len(id) > 256 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '-' || c == '_' || c == '.' || c == '~' || c == ':' || c == '@' || c == '+' || c == '=':
		default:
			return false
		}
	}
	return true
}

// validCallID accepts the ids providers generate: printable UTF-8 without
// control characters, at most 256 bytes.
func validCallID(id string) bool {
	if len(id) == 0 || len(id) > 256 || !utf8.ValidString(id) {
		return false
	}
	for _, r := range id {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}

// requestHash identifies a turn request: the calls (ids, names, compacted
// arguments), the mode and the failure policy. Reposting the same turn id
// with another hash is a conflict.
func requestHash(calls []Call, mode dispatch.Mode, policy dispatch.FailurePolicy) string {
	type canon struct {
		Calls  []Call `json:"calls"`
		Mode   string `json:"mode"`
		Policy string `json:"policy"`
	}
	c := canon{Calls: make([]Call, len(calls)), Mode: string(mode), Policy: string(policy)}
	for i, call := range calls {
		c.Calls[i] = Call{ID: call.ID, Name: call.Name, Arguments: canonicalJSON(call.Arguments)}
	}
	b, _ := json.Marshal(c)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// canonicalJSON re-encodes a JSON value with sorted keys and no
// insignificant whitespace, so that formatting differences in a client's
// retry do not read as a conflict. Invalid JSON is returned as is.
func canonicalJSON(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	if isCanonical(raw) {
		return raw // what the re-encoding below would produce, byte for byte
	}
	var v any
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return raw
	}
	b, err := json.Marshal(v) // maps marshal with sorted keys
	if err != nil {
		return raw
	}
	return b
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
