package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/turnd/turnd/turn"
)

func TestWrap(t *testing.T) {
	t.Parallel()
	netErr := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	tests := []struct {
		name string
		err  error
		want error // nil: none of the domain errors
	}{
		{"no rows", pgx.ErrNoRows, turn.ErrNotFound},
		{"wrapped no rows", fmt.Errorf("scan: %w", pgx.ErrNoRows), turn.ErrNotFound},
		{"session pkey", &pgconn.PgError{Code: "23505", ConstraintName: "sessions_pkey"}, turn.ErrSessionExists},
		{"turn pkey", &pgconn.PgError{Code: "23505", ConstraintName: "turns_pkey"}, turn.ErrTurnExists},
		{"foreign key", &pgconn.PgError{Code: "23503", ConstraintName: "completions_session_id_turn_id_fkey"}, turn.ErrNotFound},
		{"other unique", &pgconn.PgError{Code: "23505", ConstraintName: "outputs_pkey"}, turn.ErrRejected},
		{"invalid byte sequence", &pgconn.PgError{Code: "22021"}, turn.ErrRejected},
		{"unsupported unicode escape", &pgconn.PgError{Code: "22P05"}, turn.ErrRejected},
		{"check violation", &pgconn.PgError{Code: "23514"}, turn.ErrRejected},
		{"serialization failure", &pgconn.PgError{Code: "40001"}, turn.ErrUnavailable},
		{"deadlock", &pgconn.PgError{Code: "40P01"}, turn.ErrUnavailable},
		{"connection exception", &pgconn.PgError{Code: "08006"}, turn.ErrUnavailable},
		{"admin shutdown", &pgconn.PgError{Code: "57P01"}, turn.ErrUnavailable},
		{"starting up", &pgconn.PgError{Code: "57P03"}, turn.ErrUnavailable},
		{"too many connections", &pgconn.PgError{Code: "53300"}, turn.ErrUnavailable},
		{"syntax error", &pgconn.PgError{Code: "42601"}, nil},
		{"query cancelled", &pgconn.PgError{Code: "57014"}, nil},
		{"net error", netErr, turn.ErrUnavailable},
		{"deadline", fmt.Errorf("acquire: %w", context.DeadlineExceeded), turn.ErrUnavailable},
		{"eof", fmt.Errorf("receive: %w", io.ErrUnexpectedEOF), turn.ErrUnavailable},
		{"canceled", context.Canceled, nil},
		{"plain", errors.New("boom"), nil},
	}
	domain := []error{turn.ErrNotFound, turn.ErrSessionExists, turn.ErrTurnExists, turn.ErrUnavailable, turn.ErrLeaseLost, turn.ErrRejected}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := wrap("doing it", tt.err)
			for _, d := range domain {
				if errors.Is(got, d) != (d == tt.want) {
					t.Errorf("wrap(%v) = %v: errors.Is(%v) = %v", tt.err, got, d, !(d == tt.want))
				}
			}
			if (tt.want == turn.ErrUnavailable || tt.want == turn.ErrRejected) && !errors.Is(got, tt.err) {
				t.Errorf("wrap(%v) = %v lost its cause", tt.err, got)
			}
		})
	}
	if wrap("x", nil) != nil {
		t.Error("wrap(nil) != nil")
	}
}
