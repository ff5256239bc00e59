package budget

import (
	"bytes"
	"errors"
	"fmt"
)

// ErrInvalidJSON is what ProjectJSON's errors wrap when its input is not
// JSON; the caller can then fall back to Project.
var ErrInvalidJSON = errors.New("budget: invalid JSON")

// validateJSON checks raw without building anything.
func validateJSON(raw []byte) error {
	s := scanner{data: raw}
	for {
		tok, err := s.next()
		if err != nil || tok.kind == tokenEOF {
			return err
		}
	}
}

type tokenKind uint8

const (
	tokenEOF tokenKind = iota
	tokenBeginArray
	tokenEndArray
	tokenBeginObject
	tokenEndObject
	tokenKey // a string before ':'
	tokenString
	tokenNumber
	tokenLiteral // true, false, null
)

type token struct {
	kind       tokenKind
	start, end int // the token's bytes in the input
}

type scanState uint8

const (
	expectValue scanState = iota
	expectValueOrClose
	expectKeyOrClose
	expectCommaOrClose // also: end of input after the top-level value
)

// scanner tokenizes JSON and checks its grammar without recursion, so that
// nesting depth costs one byte of stack per level. It accepts what
// encoding/json accepts except that it has no depth limit of its own.
type scanner struct {
	data  []byte
	pos   int
	state scanState
	open  []byte // '[' or '{' for every open container
	// compact counts the bytes of the input's compact form up to pos, so a
	// container's compact size is the difference across it.
	compact int
}

func (s *scanner) next() (token, error) {
	s.skipSpace()
	switch s.state {
	case expectValueOrClose:
		if s.pos < len(s.data) && s.data[s.pos] == ']' {
			return s.close(), nil
		}
		return s.value()
	case expectKeyOrClose:
		if s.pos < len(s.data) && s.data[s.pos] == '}' {
			return s.close(), nil
		}
		return s.key()
	case expectCommaOrClose:
		if len(s.open) == 0 {
			if s.pos < len(s.data) {
				return token{}, s.errorf("unexpected %q after the top-level value", s.data[s.pos])
			}
			return token{kind: tokenEOF}, nil
		}
		if s.pos >= len(s.data) {
			return token{}, s.errorf("unexpected end of input")
		}
		top := s.open[len(s.open)-1]
		switch c := s.data[s.pos]; {
		case c == ',':
			s.pos++
			s.compact++
			s.skipSpace()
			if top == '[' {
				return s.value()
			}
			return s.key()
		case c == ']' && top == '[', c == '}' && top == '{':
			return s.close(), nil
		default:
			return token{}, s.errorf("unexpected %q after a value in a container", c)
		}
	}
	return s.value()
}

func (s *scanner) value() (token, error) {
	if s.pos >= len(s.data) {
		return token{}, s.errorf("unexpected end of input")
	}
	start := s.pos
	kind := tokenString
	switch c := s.data[s.pos]; {
	case c == '[' || c == '{':
		s.open = append(s.open, c)
		s.pos++
		s.compact++
		if c == '[' {
			s.state = expectValueOrClose
			return token{kind: tokenBeginArray, start: start, end: s.pos}, nil
		}
		s.state = expectKeyOrClose
		return token{kind: tokenBeginObject, start: start, end: s.pos}, nil
	case c == '"':
		if err := s.string(); err != nil {
			return token{}, err
		}
	case c == '-' || c >= '0' && c <= '9':
		kind = tokenNumber
		if err := s.number(); err != nil {
			return token{}, err
		}
	case c == 't' || c == 'f' || c == 'n':
		kind = tokenLiteral
		if err := s.literal(); err != nil {
			return token{}, err
		}
	default:
		return token{}, s.errorf("unexpected %q where a value belongs", c)
	}
	s.compact += s.pos - start
	s.state = expectCommaOrClose
	return token{kind: kind, start: start, end: s.pos}, nil
}

func (s *scanner) key() (token, error) {
	if s.pos >= len(s.data) || s.data[s.pos] != '"' {
		if s.pos >= len(s.data) {
			return token{}, s.errorf("unexpected end of input")
		}
		return token{}, s.errorf("unexpected %q where a key belongs", s.data[s.pos])
	}
	start := s.pos
	if err := s.string(); err != nil {
		return token{}, err
	}
	end := s.pos
	s.skipSpace()
	if s.pos >= len(s.data) || s.data[s.pos] != ':' {
		return token{}, s.errorf("missing ':' after a key")
	}
	s.pos++
	s.compact += end - start + 1
	s.state = expectValue
	return token{kind: tokenKey, start: start, end: end}, nil
}

func (s *scanner) close() token {
	start := s.pos
	kind := tokenEndArray
	if s.open[len(s.open)-1] == '{' {
		kind = tokenEndObject
	}
	s.open = s.open[:len(s.open)-1]
	s.pos++
	s.compact++
	s.state = expectCommaOrClose
	return token{kind: kind, start: start, end: s.pos}
}

func (s *scanner) skipSpace() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// plainStringByte marks the bytes a string can hold without a closer look:
// everything but '"', '\\' and control characters. Bytes of invalid UTF-8
// are plain, as they are to encoding/json.
var plainStringByte = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// string scans the string starting at pos.
func (s *scanner) string() error {
	i := s.pos + 1
	for {
		for i < len(s.data) && plainStringByte[s.data[i]] {
			i++
		}
		if i >= len(s.data) {
			return s.errorAt(i, "unterminated string")
		}
		switch s.data[i] {
		case '"':
			s.pos = i + 1
			return nil
		case '\\':
			if i+1 >= len(s.data) {
				return s.errorAt(i, "unterminated string")
			}
			switch s.data[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(s.data) || !isHex4(s.data[i+2:i+6]) {
					return s.errorAt(i, `invalid \u escape`)
				}
				i += 6
			default:
				return s.errorAt(i, "invalid escape")
			}
		default:
			return s.errorAt(i, "control character in string")
		}
	}
}

func isHex4(b []byte) bool {
	for _, c := range b[:4] {
		if hexValue(c) < 0 {
			return false
		}
	}
	return true
}

func hexValue(c byte) int {
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

// number scans -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? at pos.
func (s *scanner) number() error {
	d := s.data
	i := s.pos
	if d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		i = skipDigits(d, i)
	default:
		return s.errorAt(i, "invalid number")
	}
	if i < len(d) && d[i] == '.' {
		j := skipDigits(d, i+1)
		if j == i+1 {
			return s.errorAt(j, "invalid number")
		}
		i = j
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		j := skipDigits(d, i)
		if j == i {
			return s.errorAt(j, "invalid number")
		}
		i = j
	}
	s.pos = i
	return nil
}

func skipDigits(d []byte, i int) int {
	for i < len(d) && d[i] >= '0' && d[i] <= '9' {
		i++
	}
	return i
}

var literals = [][]byte{[]byte("true"), []byte("false"), []byte("null")}

func (s *scanner) literal() error {
	for _, lit := range literals {
		if bytes.HasPrefix(s.data[s.pos:], lit) {
			s.pos += len(lit)
			return nil
		}
	}
	return s.errorf("invalid literal")
}

func (s *scanner) errorf(format string, args ...any) error {
	return s.errorAt(s.pos, fmt.Sprintf(format, args...))
}

func (s *scanner) errorAt(offset int, reason string) error {
	return fmt.Errorf("%w: %s at byte %d", ErrInvalidJSON, reason, offset)
}
