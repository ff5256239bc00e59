package rawjson

import "unicode/utf8"

// Escaping is a rule for quoting strings: which characters beyond JSON's
// required ones (", \ and the control characters) are escaped.
type Escaping uint8

const (
	// EscapeHTML is json.Marshal's rule: EscapeNoHTML's, and <, > and &
	// as \u003c, \u003e and \u0026.
	EscapeHTML Escaping = iota
	// EscapeNoHTML is json.Encoder's with SetEscapeHTML(false): \b \f \n
	// \r \t in short form and the other control characters as \u00XX,
	// U+2028 and U+2029 escaped, each byte of invalid UTF-8 as \ufffd.
	EscapeNoHTML
	// EscapeMinimal escapes only what JSON requires: " and \ by a
	// backslash, \n in short form, the other control characters as \u00XX.
	// Every other byte, invalid UTF-8 included, is copied as it is.
	EscapeMinimal
)

const hexDigits = "0123456789abcdef"

// safeASCII[e][c] marks the ASCII bytes e copies as they are.
var safeASCII = func() (t [3][utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		plain := c != '"' && c != '\\'
		t[EscapeMinimal][c] = plain
		t[EscapeNoHTML][c] = plain
		t[EscapeHTML][c] = plain && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// AppendString appends s quoted by the rule e.
func AppendString[S ~string | ~[]byte](dst []byte, s S, e Escaping) []byte {
	safe := &safeASCII[e]
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if safe[c] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c == '\n':
				dst = append(dst, '\\', 'n')
			case e != EscapeMinimal && c == '\b':
				dst = append(dst, '\\', 'b')
			case e != EscapeMinimal && c == '\f':
				dst = append(dst, '\\', 'f')
			case e != EscapeMinimal && c == '\r':
				dst = append(dst, '\\', 'r')
			case e != EscapeMinimal && c == '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		if e == EscapeMinimal {
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
