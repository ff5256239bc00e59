package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/turnd/turnd/turn"
)

const (
	// Expiry is judged by the caller's clock, the one DeleteExpiredOutputs
	// is given.
	sqlGetOutput = `SELECT session_id, turn_id, call_id, content_type, data, created_at, expires_at
FROM outputs WHERE id = ? AND (expires_at IS NULL OR expires_at >= ?)`

	sqlDeleteExpiredOutputs = `DELETE FROM outputs WHERE expires_at < ?`
)

// GetOutput returns a kept output that has not expired, or turn.ErrNotFound.
// An output whose ExpiresAt is zero never expires.
func (s *Store) GetOutput(ctx context.Context, id string) (turn.Output, error) {
	o := turn.Output{ID: id}
	var created int64
	var expires sql.NullInt64
	err := s.read.QueryRowContext(ctx, sqlGetOutput, id, micros(time.Now())).Scan(
		&o.SessionID, &o.TurnID, &o.CallID, &o.ContentType, &o.Data, &created, &expires)
	if err != nil {
		return turn.Output{}, wrap("getting output "+id, err)
	}
	o.CreatedAt, o.ExpiresAt = fromMicros(created), fromNullMicros(expires)
	return o, nil
}

// DeleteExpiredOutputs removes the outputs whose ExpiresAt is before now and
// returns how many it removed.
func (s *Store) DeleteExpiredOutputs(ctx context.Context, now time.Time) (int64, error) {
	res, err := s.write.ExecContext(ctx, sqlDeleteExpiredOutputs, micros(now))
	if err != nil {
		return 0, wrap("deleting expired outputs", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, wrap("deleting expired outputs", err)
	}
	return n, nil
}
