package rawjson

// MaxDepth is how deeply nested a value Scanner.Value follows before it
// declines. encoding/json allows 10000; a caller falls back to it for
// deeper values.
const MaxDepth = 512

// Scanner checks JSON text against the grammar encoding/json accepts: RFC
// 8259 values, strings of any bytes but control characters (their UTF-8 is
// not checked), the escapes \" \\ \/ \b \f \n \r \t \uXXXX. Its methods
// take and return indexes into B; -1 means "not JSON here".
type Scanner struct {
	B        []byte
	SawSpace bool // whitespace was skipped somewhere
	TooDeep  bool // Value declined a value for its depth
}

// Valid reports whether raw is one JSON value between optional whitespace,
// as json.Valid does but without a depth limit. Scanner judges what it can
// follow; a deeper value goes to the Tokenizer.
func Valid(raw []byte) bool {
	s := Scanner{B: raw}
	if end := s.Value(s.Space(0), 0); end >= 0 {
		return s.Space(end) == len(raw)
	}
	if !s.TooDeep {
		return false
	}
	t := Tokenizer{Data: raw}
	for {
		tok, err := t.Next()
		if err != nil {
			return false
		}
		if tok.Kind == TokenEOF {
			return true
		}
	}
}

// Space returns the index of the first byte at or after i that is not JSON
// whitespace.
func (s *Scanner) Space(i int) int {
	j := spaceEnd(s.B, i)
	if j > i {
		s.SawSpace = true
	}
	return j
}

// Sep reads what follows a member or an item ending before i: a comma
// (more; next is where the next one starts) or the container's closing
// byte end (not more; next is just past it). ok is false for anything else.
func (s *Scanner) Sep(i int, end byte) (next int, more, ok bool) {
	if i = s.Space(i); i < len(s.B) {
		switch s.B[i] {
		case ',':
			return s.Space(i + 1), true, true
		case end:
			return i + 1, false, true
		}
	}
	return i, false, false
}

// Value returns the index just past the JSON value that starts at B[i],
// or -1 if none does or it nests deeper than MaxDepth counting from depth.
func (s *Scanner) Value(i, depth int) int {
	b := s.B
	if i >= len(b) {
		return -1
	}
	switch c := b[i]; c {
	case '{', '[':
		if depth >= MaxDepth {
			s.TooDeep = true
			return -1
		}
		end := byte(']')
		if c == '{' {
			end = '}'
		}
		if i = s.Space(i + 1); i < len(b) && b[i] == end {
			return i + 1
		}
		for {
			if c == '{' { // a member's key and colon
				if i = StringEnd(b, i); i < 0 {
					return -1
				}
				if i = s.Space(i); i >= len(b) || b[i] != ':' {
					return -1
				}
				i = s.Space(i + 1)
			}
			if i = s.Value(i, depth+1); i < 0 {
				return -1
			}
			more, ok := false, false
			if i, more, ok = s.Sep(i, end); !ok {
				return -1
			} else if !more {
				return i
			}
		}
	case '"':
		return StringEnd(b, i)
	case 't', 'f', 'n':
		return LiteralEnd(b, i, literals[c])
	default:
		return NumberEnd(b, i)
	}
}

// spaceEnd returns the index of the first byte at or after i that is not
// JSON whitespace.
func spaceEnd(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// plainStringByte marks the bytes a string holds as they are: all but '"',
// '\\' and control characters. Bytes of invalid UTF-8 are plain, as they
// are to encoding/json.
var plainStringByte = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// StringEnd returns the index just past the string that starts at b[i],
// or -1 if b[i] is not a quote or no valid string follows.
func StringEnd(b []byte, i int) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	for i++; ; {
		for i < len(b) && plainStringByte[b[i]] {
			i++
		}
		if i >= len(b) {
			return -1
		}
		switch b[i] {
		case '"':
			return i + 1
		case '\\':
			if i+1 >= len(b) {
				return -1
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !isHex4(b[i+2:i+6]) {
					return -1
				}
				i += 6
			default:
				return -1
			}
		default:
			return -1 // a control character
		}
	}
}

func isHex4(b []byte) bool {
	for _, c := range b[:4] {
		if HexValue(c) < 0 {
			return false
		}
	}
	return true
}

// HexValue is the value of the hexadecimal digit c, or -1.
func HexValue(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// LiteralEnd returns the index just past lit if b holds it at i, else -1.
func LiteralEnd(b []byte, i int, lit string) int {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// NumberEnd returns the index just past the number that starts at b[i]:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?, or -1.
func NumberEnd(b []byte, i int) int {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return -1
	case b[i] == '0':
		i++
	case '1' <= b[i] && b[i] <= '9':
		i = skipDigits(b, i+1)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		j := skipDigits(b, i+1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := skipDigits(b, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

func skipDigits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}
