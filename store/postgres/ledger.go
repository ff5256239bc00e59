package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/turnd/turnd/turn"
)

// sqlLedger reads a page of a session's lines and tells an unknown session
// from an empty page in the same round trip: the session row is always
// returned (with NULL line columns when the page is empty) unless the
// session does not exist.
const sqlLedger = `SELECT l.seq, l.turn_id, l.call_id, l.kind, l.at, l.data
FROM sessions s
LEFT JOIN LATERAL (
    SELECT seq, turn_id, call_id, kind, at, data FROM ledger
    WHERE session_id = s.id AND seq > $2
    ORDER BY seq
    LIMIT $3
) l ON true
WHERE s.id = $1
ORDER BY l.seq`

// Ledger returns up to limit lines of the session with seq > after, in seq
// order; see turn.Store. limit must be positive.
func (s *Store) Ledger(ctx context.Context, sessionID string, after int64, limit int) ([]turn.Line, error) {
	op := "reading ledger of session " + sessionID
	if limit <= 0 {
		return nil, fmt.Errorf("%s: limit %d must be positive", op, limit)
	}
	rows, err := s.pool.Query(ctx, sqlLedger, sessionID, after, limit)
	if err != nil {
		return nil, wrap(op, err)
	}
	lines := []turn.Line{}
	found := false
	var (
		seq                  pgtype.Int8
		turnID, callID, kind pgtype.Text
		at                   pgtype.Timestamptz
		data                 []byte
	)
	_, err = pgx.ForEachRow(rows, []any{&seq, &turnID, &callID, &kind, &at, &data}, func() error {
		found = true
		if !seq.Valid { // the session exists, the page is empty
			return nil
		}
		lines = append(lines, turn.Line{
			Seq:       seq.Int64,
			SessionID: sessionID,
			TurnID:    turnID.String,
			CallID:    callID.String,
			Kind:      turn.LineKind(kind.String),
			At:        fromNullTime(at),
			Data:      data,
		})
		return nil
	})
	if err != nil {
		return nil, wrap(op, err)
	}
	if !found {
		return nil, fmt.Errorf("%s: %w", op, turn.ErrNotFound)
	}
	return lines, nil
}
