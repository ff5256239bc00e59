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
FROM outputs WHERE session_id = $1 AND id = $2 AND (expires_at IS NULL OR expires_at >= $3)`

	// sqlLegacyOutput finds the session of an output id issued before ids
	// were routed (migration 12); see sqlLegacyKey.
	sqlLegacyOutput = `SELECT session_id FROM legacy_outputs WHERE id = $1`

	sqlDeleteExpiredOutputs = `DELETE FROM outputs WHERE expires_at < $1`
)

// GetOutput returns a kept output of the session that has not expired, or
// turn.ErrNotFound; an empty sessionID finds a legacy id's session in
// legacy_outputs first. An output whose ExpiresAt is zero never expires.
func (s *Store) GetOutput(ctx context.Context, sessionID, id string) (turn.Output, error) {
	o := turn.Output{ID: id}
	if sessionID == "" {
		if err := s.pool.QueryRow(ctx, sqlLegacyOutput, id).Scan(&sessionID); err != nil {
			return turn.Output{}, wrap("getting output "+id, err)
		}
	}
	var created, expires pgtype.Timestamptz
	err := s.pool.QueryRow(ctx, sqlGetOutput, sessionID, id, time.Now()).Scan(
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
