package postgres

import (
	"context"
	"errors"
	"io"
	"net"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/turnd/turnd/store/internal/sqlstore"
	"github.com/turnd/turnd/turn"
)

// wrap translates err at the store boundary and says what was being done;
// see sqlstore.Wrap. Domain errors replace driver ones (pgx.ErrNoRows and
// foreign key violations → turn.ErrNotFound); for an unreachable database
// both turn.ErrUnavailable and the cause stay in the chain.
func wrap(op string, err error) error {
	return sqlstore.Wrap(op, err, kind)
}

// kind classifies a driver error: the domain error it stands for, or nil.
func kind(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return turn.ErrNotFound
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23503" {
		// foreign_key_violation: the row written refers to one that does
		// not exist (a completion of an unknown turn).
		return turn.ErrNotFound
	}
	switch uniqueViolation(err) {
	case "sessions_pkey":
		return turn.ErrSessionExists
	case "turns_pkey":
		return turn.ErrTurnExists
	}
	if unavailable(err) {
		return turn.ErrUnavailable
	}
	if rejected(err) {
		return turn.ErrRejected
	}
	return nil
}

// rejected reports whether err is the database refusing a statement for
// the data it carries: a data exception (class 22: invalid text, a value
// out of range) or an integrity constraint violation (class 23) that wrap
// did not map to a domain error. The same statement would fail again.
func rejected(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || len(pgErr.Code) != 5 {
		return false
	}
	class := pgErr.Code[:2]
	return class == "22" || class == "23"
}

// uniqueViolation returns the constraint a unique_violation (23505) in err
// names, or "" for any other error.
func uniqueViolation(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		return pgErr.ConstraintName
	}
	return ""
}

// unavailable reports whether err means the database could not be reached or
// did not answer in time — the caller may retry later — as opposed to a
// statement the database rejected.
func unavailable(err error) bool {
	// A refused connection attempt is unavailability whatever the server
	// said (e.g. 55000 "database is not currently accepting connections"
	// or 28000 while a role is disabled), so it is checked before the
	// server's error code.
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) || errors.Is(err, net.ErrClosed) || pgconn.SafeToRetry(err) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case len(pgErr.Code) == 5 && pgErr.Code[:2] == "08": // connection exception
			return true
		case pgErr.Code == "40001", // serialization_failure
			pgErr.Code == "40P01", // deadlock_detected
			pgErr.Code == "57P01", // admin_shutdown
			pgErr.Code == "57P02", // crash_shutdown
			pgErr.Code == "57P03", // cannot_connect_now (starting up, recovery)
			pgErr.Code == "53300": // too_many_connections
			return true
		}
		return false
	}
	var netErr net.Error
	switch {
	case errors.As(err, &netErr):
		return true
	case errors.Is(err, context.DeadlineExceeded):
		// Waiting for a pooled connection or for an answer past the
		// caller's deadline: the database is slow or gone.
		return true
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		// The server closed the connection mid-conversation.
		return true
	}
	return false
}
