package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/turnd/turnd/store/internal/codec"
	"github.com/turnd/turnd/turn"
)

// sqlLedger reads the ledger rows (batches of lines, see codec.LinesJSON)
// that hold a page of a session's lines and tells an unknown session from
// an empty page in the same round trip: the session row is always returned
// (with NULL batch columns when the page is empty) unless the session does
// not exist. Every row holds at least one line, so limit rows hold the page.
const sqlLedger = `SELECT b.first_seq, b.lines
FROM sessions s
LEFT JOIN LATERAL (
    SELECT first_seq, last_seq, lines FROM ledger_batches
    WHERE session_id = s.id AND last_seq > $2
    ORDER BY last_seq
    LIMIT $3
) b ON true
WHERE s.id = $1
ORDER BY b.last_seq`

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
		first pgtype.Int8
		batch []byte
	)
	_, err = pgx.ForEachRow(rows, []any{&first, &batch}, func() error {
		found = true
		if !first.Valid { // the session exists, the page is empty
			return nil
		}
		var derr error
		lines, derr = codec.DecodeLines(lines, sessionID, first.Int64, batch, after, limit)
		return derr
	})
	if err != nil {
		return nil, wrap(op, err)
	}
	if !found {
		return nil, fmt.Errorf("%s: %w", op, turn.ErrNotFound)
	}
	return lines, nil
}
