package turn

import (
	"errors"
	"fmt"
)

// Domain errors the api maps to status codes.
var (
	// ErrTurnConflict: the turn id is recorded with different calls.
	ErrTurnConflict = errors.New("turn id already used with different calls")
	// ErrShuttingDown: the service no longer accepts turns.
	ErrShuttingDown = errors.New("service shutting down")
)

// InvalidError reports a request the service refuses as a whole (a call
// without id or name, too many calls, a malformed id). Field names the
// offending JSON path.
type InvalidError struct {
	Field  string
	Reason string
	// TooLarge marks limits (too many calls) as opposed to malformed input.
	TooLarge bool
}

func (e *InvalidError) Error() string {
	if e.Field == "" {
		return e.Reason
	}
	return fmt.Sprintf("%s: %s", e.Field, e.Reason)
}

func invalid(field, format string, args ...any) error {
	return &InvalidError{Field: field, Reason: fmt.Sprintf(format, args...)}
}
