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

// Error codes the service puts on results and settled turns.
const (
	// CodeRecoveryExhausted: the turn was resumed MaxResumes times without
	// finishing, and was settled failed instead of resumed again.
	CodeRecoveryExhausted = "recovery_exhausted"
	// CodeInterrupted: a write attempt was journaled by a process that
	// stopped before its outcome was recorded, and its tool is not
	// idempotent, so it was not run again.
	CodeInterrupted = "interrupted"
	// CodeStoreRejected: the store refused the call's outcome for its
	// content (see ErrRejected), so the turn failed without recording it.
	CodeStoreRejected = "store_rejected"
)

// ErrRejected marks a write the store refused for its content (a data
// exception or a constraint it violates): retrying the same write cannot
// succeed, unlike ErrUnavailable.
var ErrRejected = errors.New("store rejected the write")
