package sqlite

import (
	"context"
	"database/sql"
	"errors"

	sqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/turnd/turnd/store/internal/sqlstore"
	"github.com/turnd/turnd/turn"
)

// wrap translates err at the store boundary and says what was being done;
// see sqlstore.Wrap and kind.
func wrap(op string, err error) error {
	return sqlstore.Wrap(op, err, kind)
}

// kind classifies a driver error: sql.ErrNoRows and foreign key violations
// (a row referring to one that does not exist) → turn.ErrNotFound; a
// database that stayed locked past busy_timeout, an I/O failure or a missed
// deadline → turn.ErrUnavailable; a refused value → turn.ErrRejected;
// anything else nil.
func kind(err error) error {
	switch {
	case errors.Is(err, sql.ErrNoRows) || foreignKeyViolation(err):
		return turn.ErrNotFound
	case unavailable(err):
		return turn.ErrUnavailable
	case rejected(err):
		return turn.ErrRejected
	}
	return nil
}

// rejected reports whether err is SQLite refusing a statement for the data
// it carries (a constraint wrap did not map, a value too big, a type
// mismatch): the same statement would fail again.
func rejected(err error) bool {
	var e *sqlite.Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Code() & 0xff {
	case sqlite3.SQLITE_CONSTRAINT, sqlite3.SQLITE_TOOBIG, sqlite3.SQLITE_MISMATCH, sqlite3.SQLITE_RANGE:
		return true
	}
	return false
}

func unavailable(err error) bool {
	var e *sqlite.Error
	if errors.As(err, &e) {
		switch e.Code() & 0xff { // the primary result code
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_IOERR,
			sqlite3.SQLITE_FULL, sqlite3.SQLITE_CANTOPEN:
			return true
		}
		return false
	}
	return errors.Is(err, context.DeadlineExceeded)
}

func foreignKeyViolation(err error) bool {
	var e *sqlite.Error
	return errors.As(err, &e) && e.Code() == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY
}
