package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/turnd/turnd/store/internal/codec"
	"github.com/turnd/turnd/turn"
)

const (
	// Rows are batches of lines (see codec.LinesJSON), each of at least
	// one line: limit rows hold the page.
	sqlLedger = `SELECT first_seq, lines FROM ledger_batches
WHERE session_id = ? AND last_seq > ?
ORDER BY last_seq
LIMIT ?`

	sqlSessionExists = `SELECT count(*) FROM sessions WHERE id = ?`
)

// Ledger returns up to limit lines of the session with seq > after, in seq
// order; see turn.Store. limit must be positive. An empty page costs a
// second query, in the same read transaction, to tell an unknown session.
func (s *Store) Ledger(ctx context.Context, sessionID string, after int64, limit int) ([]turn.Line, error) {
	op := "reading ledger of session " + sessionID
	if limit <= 0 {
		return nil, fmt.Errorf("%s: limit %d must be positive", op, limit)
	}
	lines, err := s.ledger(ctx, sessionID, after, limit)
	if err != nil {
		return nil, wrap(op, err)
	}
	return lines, nil
}

func (s *Store) ledger(ctx context.Context, sessionID string, after int64, limit int) ([]turn.Line, error) {
	tx, err := s.read.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, sqlLedger, sessionID, after, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	lines := []turn.Line{}
	for rows.Next() {
		var first int64
		var batch []byte
		if err := rows.Scan(&first, &batch); err != nil {
			return nil, err
		}
		if lines, err = codec.DecodeLines(lines, sessionID, first, batch, after, limit); err != nil {
			return nil, err
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(lines) > 0 {
		return lines, nil
	}
	var n int
	if err := tx.QueryRowContext(ctx, sqlSessionExists, sessionID).Scan(&n); err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, sql.ErrNoRows // wrap makes it turn.ErrNotFound
	}
	return lines, nil
}
