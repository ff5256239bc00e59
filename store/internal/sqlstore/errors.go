package sqlstore

import (
	"errors"
	"fmt"

	"github.com/turnd/turnd/turn"
)

// Wrap says what was being done (op) around err, a driver error that kind
// classifies: it returns the domain error err stands for, or nil for none.
// The domain errors of a row found or not (turn.ErrNotFound,
// ErrSessionExists, ErrTurnExists) replace err; turn.ErrUnavailable and
// turn.ErrRejected join it, so that callers test errors.Is and logs keep
// the cause. A nil err is nil.
func Wrap(op string, err error, kind func(error) error) error {
	if err == nil {
		return nil
	}
	switch k := kind(err); {
	case k == nil:
		return fmt.Errorf("%s: %w", op, err)
	case errors.Is(k, turn.ErrUnavailable), errors.Is(k, turn.ErrRejected):
		return fmt.Errorf("%s: %w: %w", op, k, err)
	default:
		return fmt.Errorf("%s: %w", op, k)
	}
}

// Collect reads with collect the rows of a query that returned err (nil:
// it ran); an error of either is wrapped with op as Wrap does.
func Collect[R, T any](op string, rows R, err error, collect func(R) ([]T, error), kind func(error) error) ([]T, error) {
	if err != nil {
		return nil, Wrap(op, err, kind)
	}
	out, err := collect(rows)
	if err != nil {
		return nil, Wrap(op, err, kind)
	}
	return out, nil
}
