package rawjson

import "strconv"

// TokenKind is what a Token is.
type TokenKind uint8

const (
	TokenEOF TokenKind = iota
	TokenBeginArray
	TokenEndArray
	TokenBeginObject
	TokenEndObject
	TokenKey // a string before ':'
	TokenString
	TokenNumber
	TokenLiteral // true, false, null
)

// Token is one token of the input: its kind and its bytes, [Start, End).
type Token struct {
	Kind       TokenKind
	Start, End int
}

// SyntaxError says where and why the input is not JSON.
type SyntaxError struct {
	Offset int
	Reason string
}

func (e *SyntaxError) Error() string {
	return e.Reason + " at byte " + strconv.Itoa(e.Offset)
}

type tokenState uint8

const (
	expectValue tokenState = iota
	expectValueOrClose
	expectKeyOrClose
	expectCommaOrClose // also: end of input after the top-level value
)

var literals = [256]string{'t': "true", 'f': "false", 'n': "null"}

// Tokenizer reads the tokens of Data in order, checking the grammar
// Scanner checks without recursion: nesting costs one byte of memory per
// level and has no limit. Compact counts the bytes of the input's compact
// form up to the last token, so a container's compact size is the
// difference across it. The zero value with Data set is ready.
type Tokenizer struct {
	Data    []byte
	Compact int
	pos     int
	state   tokenState
	open    []byte // '[' or '{' for every open container
}

// Next returns the next token, TokenEOF after the top-level value, or a
// *SyntaxError.
func (s *Tokenizer) Next() (Token, error) {
	s.skipSpace()
	switch s.state {
	case expectValueOrClose:
		if s.pos < len(s.Data) && s.Data[s.pos] == ']' {
			return s.close(), nil
		}
		return s.value()
	case expectKeyOrClose:
		if s.pos < len(s.Data) && s.Data[s.pos] == '}' {
			return s.close(), nil
		}
		return s.key()
	case expectCommaOrClose:
		if len(s.open) == 0 {
			if s.pos < len(s.Data) {
				return Token{}, syntaxError("unexpected "+strconv.QuoteRune(rune(s.Data[s.pos]))+" after the top-level value", s.pos)
			}
			return Token{Kind: TokenEOF}, nil
		}
		if s.pos >= len(s.Data) {
			return Token{}, syntaxError("unexpected end of input", s.pos)
		}
		top := s.open[len(s.open)-1]
		switch c := s.Data[s.pos]; {
		case c == ',':
			s.pos++
			s.Compact++
			s.skipSpace()
			if top == '[' {
				return s.value()
			}
			return s.key()
		case c == ']' && top == '[', c == '}' && top == '{':
			return s.close(), nil
		default:
			return Token{}, syntaxError("unexpected "+strconv.QuoteRune(rune(c))+" after a value in a container", s.pos)
		}
	}
	return s.value()
}

func (s *Tokenizer) value() (Token, error) {
	if s.pos >= len(s.Data) {
		return Token{}, syntaxError("unexpected end of input", s.pos)
	}
	start := s.pos
	kind := TokenString
	end := -1
	switch c := s.Data[s.pos]; {
	case c == '[' || c == '{':
		s.open = append(s.open, c)
		s.pos++
		s.Compact++
		if c == '[' {
			s.state = expectValueOrClose
			return Token{Kind: TokenBeginArray, Start: start, End: s.pos}, nil
		}
		s.state = expectKeyOrClose
		return Token{Kind: TokenBeginObject, Start: start, End: s.pos}, nil
	case c == '"':
		if end = StringEnd(s.Data, start); end < 0 {
			return Token{}, syntaxError("invalid string", start)
		}
	case c == '-' || c >= '0' && c <= '9':
		kind = TokenNumber
		if end = NumberEnd(s.Data, start); end < 0 {
			return Token{}, syntaxError("invalid number", start)
		}
	case c == 't' || c == 'f' || c == 'n':
		kind = TokenLiteral
		end = LiteralEnd(s.Data, start, literals[c])
		if end < 0 {
			return Token{}, syntaxError("invalid literal", start)
		}
	default:
		return Token{}, syntaxError("unexpected "+strconv.QuoteRune(rune(c))+" where a value belongs", start)
	}
	s.pos = end
	s.Compact += end - start
	s.state = expectCommaOrClose
	return Token{Kind: kind, Start: start, End: end}, nil
}

func (s *Tokenizer) key() (Token, error) {
	start := s.pos
	end := StringEnd(s.Data, start)
	if end < 0 {
		switch {
		case start >= len(s.Data):
			return Token{}, syntaxError("unexpected end of input", start)
		case s.Data[start] != '"':
			return Token{}, syntaxError("unexpected "+strconv.QuoteRune(rune(s.Data[start]))+" where a key belongs", start)
		}
		return Token{}, syntaxError("invalid string", start)
	}
	s.pos = end
	s.skipSpace()
	if s.pos >= len(s.Data) || s.Data[s.pos] != ':' {
		return Token{}, syntaxError("missing ':' after a key", s.pos)
	}
	s.pos++
	s.Compact += end - start + 1
	s.state = expectValue
	return Token{Kind: TokenKey, Start: start, End: end}, nil
}

func (s *Tokenizer) close() Token {
	start := s.pos
	kind := TokenEndArray
	if s.open[len(s.open)-1] == '{' {
		kind = TokenEndObject
	}
	s.open = s.open[:len(s.open)-1]
	s.pos++
	s.Compact++
	s.state = expectCommaOrClose
	return Token{Kind: kind, Start: start, End: s.pos}
}

func (s *Tokenizer) skipSpace() { s.pos = spaceEnd(s.Data, s.pos) }

func syntaxError(reason string, offset int) error {
	return &SyntaxError{Offset: offset, Reason: reason}
}
