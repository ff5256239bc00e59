package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/turnd/turnd/store/internal/sqlstore"
	"github.com/turnd/turnd/turn"
)

// pageRows bounds a page by bytes in the query, as the PostgreSQL store's
// does: of the rows a page may need (limit rows, each of at least one
// line), only those with fewer than maxBytes bytes of stored lines before
// them are read; sqlstore.Page then cuts the page at a line. octet_length
// reads the size from the record header, not the value.
const pageRows = `SELECT first_seq, last_seq, lines,
    coalesce(sum(octet_length(lines)) OVER (ORDER BY last_seq ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS before
FROM ledger_batches`

const (
	// Rows are batches of lines (see sqlstore.LinesJSON).
	sqlLedger = `SELECT first_seq, lines FROM (` + pageRows + `
WHERE session_id = ? AND last_seq > ?
ORDER BY last_seq
LIMIT ?
) WHERE before < ?
ORDER BY last_seq`

	// A turn's rows, by ledger_batches_turn (session_id, turn_id, last_seq).
	sqlTurnLedger = `SELECT first_seq, lines FROM (` + pageRows + `
WHERE session_id = ? AND turn_id = ? AND last_seq > ?
ORDER BY last_seq
LIMIT ?
) WHERE before < ?
ORDER BY last_seq`

	sqlSessionExists = `SELECT count(*) FROM sessions WHERE id = ?`
)

// Ledger returns a page of the session's lines; see turn.Store. limit and
// maxBytes must be positive. An empty page costs a second query, in the
// same read transaction, to tell an unknown session.
func (s *Store) Ledger(ctx context.Context, sessionID string, after int64, limit, maxBytes int) ([]turn.Line, error) {
	op := "reading ledger of session " + sessionID
	if limit <= 0 || maxBytes <= 0 {
		return nil, fmt.Errorf("%s: limit %d and maxBytes %d must be positive", op, limit, maxBytes)
	}
	lines, err := s.ledger(ctx, sessionID, after, limit, maxBytes)
	if err != nil {
		return nil, wrap(op, err)
	}
	return lines, nil
}

func (s *Store) ledger(ctx context.Context, sessionID string, after int64, limit, maxBytes int) ([]turn.Line, error) {
	tx, err := s.read.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	page := sqlstore.NewPage(after, limit, maxBytes)
	if err := readPage(ctx, tx, page, sessionID, sqlLedger, sessionID, after, limit, maxBytes); err != nil {
		return nil, err
	}
	if len(page.Lines) > 0 {
		return page.Lines, nil
	}
	var n int
	if err := tx.QueryRowContext(ctx, sqlSessionExists, sessionID).Scan(&n); err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, sql.ErrNoRows // wrap makes it turn.ErrNotFound
	}
	return page.Lines, nil
}

// TurnLedger returns a page of one turn's lines; see turn.Store. limit and
// maxBytes must be positive.
func (s *Store) TurnLedger(ctx context.Context, sessionID, turnID string, after int64, limit, maxBytes int) ([]turn.Line, error) {
	op := fmt.Sprintf("reading ledger of turn %s/%s", sessionID, turnID)
	if limit <= 0 || maxBytes <= 0 {
		return nil, fmt.Errorf("%s: limit %d and maxBytes %d must be positive", op, limit, maxBytes)
	}
	page := sqlstore.NewPage(after, limit, maxBytes)
	if err := readPage(ctx, s.read, page, sessionID, sqlTurnLedger, sessionID, turnID, after, limit, maxBytes); err != nil {
		return nil, wrap(op, err)
	}
	return page.Lines, nil
}

type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// readPage adds the batches query returns to page, and stops reading them
// once the page is full.
func readPage(ctx context.Context, q querier, page *sqlstore.Page, sessionID, query string, args ...any) error {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var first int64
		var batch []byte
		if err := rows.Scan(&first, &batch); err != nil {
			return err
		}
		full, err := page.Add(sessionID, first, batch)
		if err != nil {
			return err
		}
		if full {
			break
		}
	}
	return rows.Err()
}
