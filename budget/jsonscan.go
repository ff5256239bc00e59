package budget

import (
	"errors"
	"fmt"

	"github.com/turnd/turnd/internal/rawjson"
)

// ErrInvalidJSON is what ProjectJSON's errors wrap when its input is not
// JSON; the caller can then fall back to Project.
var ErrInvalidJSON = errors.New("budget: invalid JSON")

// validateJSON checks raw without building anything or limiting its depth.
func validateJSON(raw []byte) error {
	if rawjson.Valid(raw) {
		return nil
	}
	// Not JSON: the tokenizer says where.
	s := rawjson.Tokenizer{Data: raw}
	for {
		tok, err := s.Next()
		if err != nil {
			return invalid(err)
		}
		if tok.Kind == rawjson.TokenEOF {
			return nil
		}
	}
}

type tokenKind = rawjson.TokenKind

const (
	tokenEOF         = rawjson.TokenEOF
	tokenBeginArray  = rawjson.TokenBeginArray
	tokenEndArray    = rawjson.TokenEndArray
	tokenBeginObject = rawjson.TokenBeginObject
	tokenEndObject   = rawjson.TokenEndObject
	tokenKey         = rawjson.TokenKey
	tokenString      = rawjson.TokenString
	tokenNumber      = rawjson.TokenNumber
	tokenLiteral     = rawjson.TokenLiteral
)

type token struct {
	kind       tokenKind
	start, end int // the token's bytes in the input
}

// scanner is the parse's view of a rawjson.Tokenizer over data: compact
// is the compact size of the input read so far.
type scanner struct {
	data    []byte
	compact int
	t       rawjson.Tokenizer
}

func (s *scanner) next() (token, error) {
	s.t.Data = s.data
	t, err := s.t.Next()
	s.compact = s.t.Compact
	if err != nil {
		return token{}, invalid(err)
	}
	return token{kind: t.Kind, start: t.Start, end: t.End}, nil
}

func invalid(err error) error { return fmt.Errorf("%w: %v", ErrInvalidJSON, err) }

func hexValue(c byte) int { return rawjson.HexValue(c) }
