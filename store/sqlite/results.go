package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/turnd/turnd/dispatch"
	"github.com/turnd/turnd/store/internal/sqlstore"
	"github.com/turnd/turnd/turn"
)

// resultColumns are the columns collectResults scans, in order.
const resultColumns = `turn_id, idx, call_id, name, effect, status, output, error_code, error_message,
    truncated, original_bytes, original_lines, output_id, attempts, started_at, finished_at, replayed_from`

// sqlAnswered picks, per call id, the earliest final result that is not
// itself a replay, with the same order as the PostgreSQL store: finish
// time, then start time, then turn id and index. ?2 is a JSON array of ids.
const sqlAnswered = `SELECT ` + resultColumns + ` FROM (
    SELECT *, row_number() OVER (
        PARTITION BY call_id
        ORDER BY finished_at NULLS LAST, started_at NULLS LAST, turn_id, idx
    ) AS rank
    FROM results
    WHERE session_id = ?1 AND call_id IN (SELECT value FROM json_each(?2))
        AND status <> 'started' AND status <> '' AND replayed_from = ''
)
WHERE rank = 1`

// Answered returns the earliest final, non-replayed result per call id; see
// turn.Store. Each result keeps the Index it had in its own turn, and
// ReplayedFrom names that turn.
func (s *Store) Answered(ctx context.Context, sessionID string, callIDs []string) (map[string]turn.Result, error) {
	return sqlstore.Answered(callIDs, func(each func(turnID string, r *turn.Result)) error {
		op := "reading answered calls of session " + sessionID
		ids, err := json.Marshal(callIDs)
		if err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		rows, err := s.read.QueryContext(ctx, sqlAnswered, sessionID, string(ids))
		if err != nil {
			return wrap(op, err)
		}
		_, err = collectResults(rows, each)
		return wrap(op, err)
	})
}

// collectResults scans rows of resultColumns and closes rows. With each
// non-nil, it hands every result to each (with its row's turn id) instead of
// collecting them.
func collectResults(rows *sql.Rows, each func(turnID string, r *turn.Result)) ([]turn.Result, error) {
	defer rows.Close()
	results := []turn.Result{}
	for rows.Next() {
		var (
			r                      turn.Result
			turnID, effect, status string
			output                 []byte
			errCode, errMsg        sql.NullString
			started, finished      sql.NullInt64
		)
		if err := rows.Scan(&turnID, &r.Index, &r.CallID, &r.Name, &effect, &status, &output, &errCode, &errMsg,
			&r.Truncated, &r.OriginalBytes, &r.OriginalLines, &r.OutputID, &r.Attempts, &started, &finished, &r.ReplayedFrom); err != nil {
			return nil, fmt.Errorf("reading results: %w", err)
		}
		r.Effect, r.Status = dispatch.Effect(effect), turn.CallStatus(status)
		r.Output = output
		if errCode.Valid {
			r.Error = &turn.CallError{Code: errCode.String, Message: errMsg.String}
		}
		r.StartedAt, r.FinishedAt = fromNullMicros(started), fromNullMicros(finished)
		if each != nil {
			each(turnID, &r)
			continue
		}
		results = append(results, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading results: %w", err)
	}
	return results, nil
}
