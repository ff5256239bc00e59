package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/turnd/turnd/turn"
)

const (
	// Expiry is judged by the caller's clock (the service's), the same
	// clock DeleteExpiredOutputs is given, not the database's.
	sqlGetOutput = `SELECT session_id, turn_id, call_id, content_type, data, created_at, expires_at
FROM outputs WHERE id = $1 AND (expires_at IS NULL OR expires_at >= $2)`

	sqlDeleteExpiredOutputs = `DELETE FROM outputs WHERE expires_at < $1`
)

// GetOutput returns a kept output that has not expired, or turn.ErrNotFound.
// An output whose ExpiresAt is zero never expires.
func (s *Store) GetOutput(ctx context.Context, id string) (turn.Output, error) {
	o := turn.Output{ID: id}
	var created, expires pgtype.Timestamptz
	err := s.pool.QueryRow(ctx, sqlGetOutput, id, time.Now()).Scan(
		&o.SessionID, &o.TurnID, &o.CallID, &o.ContentType, &o.Data, &created, &expires)
	if err != nil {
		return turn.Output{}, wrap("getting output "+id, err)
	}
	o.CreatedAt, o.ExpiresAt = fromNullTime(created), fromNullTime(expires)
	return o, nil
}

// DeleteExpiredOutputs removes the outputs whose ExpiresAt is before now and
// returns how many it removed.
func (s *Store) DeleteExpiredOutputs(ctx context.Context, now time.Time) (int64, error) {
	tag, err := s.pool.Exec(ctx, sqlDeleteExpiredOutputs, now)
	if err != nil {
		return 0, wrap("deleting expired outputs", err)
	}
	return tag.RowsAffected(), nil
}
