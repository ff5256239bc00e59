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
FROM outputs WHERE session_id = ? AND id = ? AND (expires_at IS NULL OR expires_at >= ?)`

	// sqlLegacyOutput finds the session of an output id issued before ids
	// were routed (migration 12).
	sqlLegacyOutput = `SELECT session_id FROM legacy_outputs WHERE id = ?`

	sqlDeleteExpiredOutputs = `DELETE FROM outputs WHERE expires_at < ?`
)

// GetOutput returns a kept output of the session that has not expired, or
// turn.ErrNotFound; an empty sessionID finds a legacy id's session in
// legacy_outputs first. An output whose ExpiresAt is zero never expires.
func (s *Store) GetOutput(ctx context.Context, sessionID, id string) (turn.Output, error) {
	o := turn.Output{ID: id}
	if sessionID == "" {
		if err := s.read.QueryRowContext(ctx, sqlLegacyOutput, id).Scan(&sessionID); err != nil {
			return turn.Output{}, wrap("getting output "+id, err)
		}
	}
	var created int64
	var expires sql.NullInt64
	err := s.read.QueryRowContext(ctx, sqlGetOutput, sessionID, id, micros(time.Now())).Scan(
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
