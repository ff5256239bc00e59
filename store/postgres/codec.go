package postgres

import (
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// Times are stored as timestamptz, which keeps microseconds: they come back
// truncated to the microsecond and in UTC, whatever location they went in
// with. A zero time.Time in a nullable column is stored as NULL.

// nullTime encodes t for a nullable timestamptz column.
func nullTime(t time.Time) pgtype.Timestamptz {
	if t.IsZero() {
		return pgtype.Timestamptz{}
	}
	return pgtype.Timestamptz{Time: t, Valid: true}
}

// fromNullTime decodes a nullable timestamptz: NULL is the zero time.
func fromNullTime(ts pgtype.Timestamptz) time.Time {
	if !ts.Valid {
		return time.Time{}
	}
	return ts.Time.UTC()
}

// nullText encodes s for a nullable text column, nil being NULL.
func nullText(b []byte) *string {
	if b == nil {
		return nil
	}
	s := string(b)
	return &s
}
