package turn

import (
	"unicode/utf8"
)

// Tool outputs are repaired where they enter the service, before anything
// of them reaches a store: each byte sequence that is not UTF-8, each NUL
// (U+0000, which PostgreSQL's text and JSON types cannot hold) and, in JSON,
// each \u0000 escape and unpaired surrogate escape becomes U+FFFD. The
// call_answered line of a repaired output says how many were replaced
// (output_repaired). Both stores then hold the same text.

// replacement is U+FFFD as UTF-8, and as a JSON escape.
const (
	replacement     = "\uFFFD"
	replacementJSON = `\ufffd`
)

// repairText returns b with invalid UTF-8 and NUL replaced by U+FFFD and how
// many replacements were made; b itself when there were none.
func repairText(b []byte) ([]byte, int) {
	i := firstBad(b, false)
	if i < 0 {
		return b, 0
	}
	out := make([]byte, 0, len(b)+8)
	out = append(out, b[:i]...)
	n := 0
	for i < len(b) {
		c := b[i]
		if c == 0 {
			out = append(out, replacement...)
			n++
			i++
			continue
		}
		var bad bool
		out, i, bad = appendRune(out, b, i)
		if bad {
			n++
		}
	}
	return out, n
}

// appendRune appends the character at b[i] to out, U+FFFD in place of a
// byte that starts no valid UTF-8 sequence, and returns where the next one
// starts and whether it replaced one.
func appendRune(out, b []byte, i int) ([]byte, int, bool) {
	if b[i] < utf8.RuneSelf {
		return append(out, b[i]), i + 1, false
	}
	r, size := utf8.DecodeRune(b[i:])
	if r == utf8.RuneError && size == 1 {
		return append(out, replacement...), i + 1, true
	}
	return append(out, b[i:i+size]...), i + size, false
}

// repairJSON returns the JSON text b with invalid UTF-8 in its strings, \u0000
// escapes and unpaired surrogate escapes replaced by U+FFFD, and how many
// replacements were made; b itself when there were none. b must be valid
// JSON apart from its encoding (as the budget's projections are).
func repairJSON(b []byte) ([]byte, int) {
	i := firstBad(b, true)
	if i < 0 {
		return b, 0
	}
	// The copy starts from the beginning, where the scan knows it is
	// outside any string.
	out := make([]byte, 0, len(b)+8)
	n := 0
	inString := false
	for i = 0; i < len(b); {
		c := b[i]
		switch {
		case !inString:
			if c == '"' {
				inString = true
			}
			out = append(out, c)
			i++
		case c == '"':
			inString = false
			out = append(out, c)
			i++
		case c == '\\' && i+1 < len(b) && b[i+1] == 'u' && i+6 <= len(b):
			r, ok := hex4(b[i+2 : i+6])
			switch {
			case !ok:
				out = append(out, b[i:i+6]...)
				i += 6
			case r == 0:
				out = append(out, replacementJSON...)
				n++
				i += 6
			case r >= 0xD800 && r <= 0xDBFF:
				if i+12 <= len(b) && b[i+6] == '\\' && b[i+7] == 'u' {
					if lo, ok := hex4(b[i+8 : i+12]); ok && lo >= 0xDC00 && lo <= 0xDFFF {
						out = append(out, b[i:i+12]...)
						i += 12
						continue
					}
				}
				out = append(out, replacementJSON...)
				n++
				i += 6
			case r >= 0xDC00 && r <= 0xDFFF:
				out = append(out, replacementJSON...)
				n++
				i += 6
			default:
				out = append(out, b[i:i+6]...)
				i += 6
			}
		case c == '\\' && i+1 < len(b):
			out = append(out, c, b[i+1])
			i += 2
		case c == 0:
			out = append(out, replacementJSON...)
			n++
			i++
		default:
			var bad bool
			out, i, bad = appendRune(out, b, i)
			if bad {
				n++
			}
		}
	}
	return out, n
}

// firstBad returns the index of the first byte that may need a repair (a
// NUL, a byte outside ASCII that starts no valid sequence, or, in JSON, a
// \u escape of a NUL or a surrogate), or -1. It is the fast path: most
// outputs are valid, and a whole output is checked without copying.
func firstBad(b []byte, json bool) int {
	for i := 0; i < len(b); {
		c := b[i]
		switch {
		case c == 0:
			return i
		case c == '\\' && json && i+5 < len(b) && b[i+1] == 'u':
			if r, ok := hex4(b[i+2 : i+6]); ok && (r == 0 || (r >= 0xD800 && r <= 0xDFFF)) {
				return i
			}
			i += 2
		case c == '\\' && json:
			i += 2
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				return i
			}
			i += size
		}
	}
	return -1
}

func hex4(b []byte) (rune, bool) {
	var r rune
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// repairString is repairText for a string (error codes and messages).
func repairString(s string) (string, int) {
	b, n := repairText([]byte(s))
	if n == 0 {
		return s, 0
	}
	return string(b), n
}
