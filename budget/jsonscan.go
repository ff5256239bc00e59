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
		tok, err := nextToken(&s)
		if err != nil || tok.Kind == rawjson.TokenEOF {
			return err
		}
	}
}

// nextToken reads t's next token, its error wrapping ErrInvalidJSON.
func nextToken(t *rawjson.Tokenizer) (rawjson.Token, error) {
	tok, err := t.Next()
	if err != nil {
		return tok, invalid(err)
	}
	return tok, nil
}

func invalid(err error) error { return fmt.Errorf("%w: %v", ErrInvalidJSON, err) }
