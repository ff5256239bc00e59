package codec

import (
	"errors"
	"fmt"

	"github.com/turnd/turnd/turn"
)

// Wrap says what was being done (op) around err, a driver error the store
// has classified as kind (nil: none of the domain errors). The domain
// errors of a row found or not (turn.ErrNotFound, ErrSessionExists,
// ErrTurnExists) replace err; turn.ErrUnavailable and turn.ErrRejected
// join it, so that callers test errors.Is and logs keep the cause.
func Wrap(op string, err, kind error) error {
	switch {
	case err == nil:
		return nil
	case kind == nil:
		return fmt.Errorf("%s: %w", op, err)
	case errors.Is(kind, turn.ErrUnavailable), errors.Is(kind, turn.ErrRejected):
		return fmt.Errorf("%s: %w: %w", op, kind, err)
	}
	return fmt.Errorf("%s: %w", op, kind)
}
