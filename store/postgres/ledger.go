package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/turnd/turnd/store/internal/sqlstore"
	"github.com/turnd/turnd/turn"
)

// pageRows is the part of the ledger queries that bounds a page by bytes in
// the server: of the rows a page may need (limit rows; every row holds at
// least one line), only those after which fewer than maxBytes bytes of
// stored lines come before are sent. A row's stored bytes are at least its
// lines' turn.LineBytes, so every row sqlstore.Page would take from is sent;
// sqlstore.Page then cuts the page at a line.
const pageRows = `
        SELECT first_seq, last_seq, lines,
            coalesce(sum(octet_length(lines::text)) OVER (ORDER BY last_seq ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS before
        FROM ledger_batches`

// sqlLedger reads the ledger rows (batches of lines, see sqlstore.LinesJSON)
// that hold a page of a session's lines and tells an unknown session from
// an empty page in the same round trip: the session row is always returned
// (with NULL batch columns when the page is empty) unless the session does
// not exist.
const sqlLedger = `SELECT b.first_seq, b.lines
FROM sessions s
LEFT JOIN LATERAL (
    SELECT first_seq, last_seq, lines FROM (` + pageRows + `
        WHERE session_id = s.id AND last_seq > $2
        ORDER BY last_seq
        LIMIT $3
    ) w
    WHERE before < $4
) b ON true
WHERE s.id = $1
ORDER BY b.last_seq`

// sqlTurnLedger reads the rows of one turn's lines by ledger_batches_turn
// (session_id, turn_id, last_seq).
const sqlTurnLedger = `SELECT first_seq, lines FROM (` + pageRows + `
    WHERE session_id = $1 AND turn_id = $2 AND last_seq > $3
    ORDER BY last_seq
    LIMIT $4
) w
WHERE before < $5
ORDER BY last_seq`

// Ledger returns a page of the session's lines; see turn.Store. limit
// and maxBytes must be positive.
func (s *Store) Ledger(ctx context.Context, sessionID string, after int64, limit, maxBytes int) ([]turn.Line, error) {
	op := "reading ledger of session " + sessionID
	if limit <= 0 || maxBytes <= 0 {
		return nil, fmt.Errorf("%s: limit %d and maxBytes %d must be positive", op, limit, maxBytes)
	}
	rows, err := s.pool.Query(ctx, sqlLedger, sessionID, after, limit, maxBytes)
	if err != nil {
		return nil, wrap(op, err)
	}
	page := sqlstore.NewPage(after, limit, maxBytes)
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
		_, err := page.Add(sessionID, first.Int64, batch)
		return err
	})
	if err != nil {
		return nil, wrap(op, err)
	}
	if !found {
		return nil, fmt.Errorf("%s: %w", op, turn.ErrNotFound)
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
	rows, err := s.pool.Query(ctx, sqlTurnLedger, sessionID, turnID, after, limit, maxBytes)
	if err != nil {
		return nil, wrap(op, err)
	}
	page := sqlstore.NewPage(after, limit, maxBytes)
	var (
		first int64
		batch []byte
	)
	_, err = pgx.ForEachRow(rows, []any{&first, &batch}, func() error {
		_, err := page.Add(sessionID, first, batch)
		return err
	})
	if err != nil {
		return nil, wrap(op, err)
	}
	return page.Lines, nil
}
