package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/turnd/turnd/dispatch"
	"github.com/turnd/turnd/store/internal/sqlstore"
	"github.com/turnd/turnd/turn"
)

// resultColumns are the columns collectResults scans, in order.
const resultColumns = `turn_id, idx, call_id, name, effect, status, output, error_code, error_message,
    truncated, original_bytes, original_lines, output_id, attempts, started_at, finished_at, replayed_from`

// sqlAnswered picks, per call id, the earliest final result that is not
// itself a replay: ordered by finish time, then start time, then turn id and
// index so that ties resolve the same way every time (and in both stores).
const sqlAnswered = `SELECT DISTINCT ON (call_id) ` + resultColumns + `
FROM results
WHERE session_id = $1 AND call_id = ANY($2::text[])
    AND status <> 'started' AND status <> '' AND replayed_from = ''
ORDER BY call_id, finished_at NULLS LAST, started_at NULLS LAST, turn_id, idx`

// Answered returns the earliest final, non-replayed result per call id; see
// turn.Store. Each result keeps the Index it had in its own turn, and
// ReplayedFrom names that turn.
func (s *Store) Answered(ctx context.Context, sessionID string, callIDs []string) (map[string]turn.Result, error) {
	return sqlstore.Answered(callIDs, func(each func(turnID string, r *turn.Result)) error {
		op := "reading answered calls of session " + sessionID
		rows, err := s.pool.Query(ctx, sqlAnswered, sessionID, callIDs)
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
func collectResults(rows pgx.Rows, each func(turnID string, r *turn.Result)) ([]turn.Result, error) {
	results := []turn.Result{}
	var (
		turnID, effect, status string
		idx, attempts          int32
		output                 []byte
		errCode, errMsg        *string
		started, finished      pgtype.Timestamptz
		r                      turn.Result
	)
	_, err := pgx.ForEachRow(rows, []any{
		&turnID, &idx, &r.CallID, &r.Name, &effect, &status, &output, &errCode, &errMsg,
		&r.Truncated, &r.OriginalBytes, &r.OriginalLines, &r.OutputID, &attempts, &started, &finished, &r.ReplayedFrom,
	}, func() error {
		res := r
		res.Index, res.Attempts = int(idx), int(attempts)
		res.Effect, res.Status = dispatch.Effect(effect), turn.CallStatus(status)
		res.Output = output
		if errCode != nil {
			res.Error = &turn.CallError{Code: *errCode}
			if errMsg != nil {
				res.Error.Message = *errMsg
			}
		}
		res.StartedAt, res.FinishedAt = fromNullTime(started), fromNullTime(finished)
		if each != nil {
			each(turnID, &res)
			return nil
		}
		results = append(results, res)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading results: %w", err)
	}
	return results, nil
}
