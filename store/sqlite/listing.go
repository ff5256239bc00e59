package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/turnd/turnd/store/internal/sqlstore"
	"github.com/turnd/turnd/turn"
)

// The listings read one index each (migration 11), backwards from the
// cursor; the first page starts from a cursor after every row. A listed
// session's counts and last activity are probes of the turns' primary key,
// completions_turn and the ledger's primary key.
const (
	sqlListSessions = `SELECT s.id, s.tools, s.budget, s.callback_url, s.metadata, s.created_at, s.approval,
    (SELECT count(*) FROM turns t WHERE t.session_id = s.id),
    (SELECT count(*) FROM completions c WHERE c.session_id = s.id AND c.status = 'pending'),
    (SELECT json_extract(b.lines, '$[#-1].a') FROM ledger_batches b WHERE b.session_id = s.id ORDER BY b.last_seq DESC LIMIT 1)
FROM sessions s
WHERE (s.created_at, s.id) < (?, ?)
ORDER BY s.created_at DESC, s.id DESC
LIMIT ?`

	sqlListTurns = `SELECT t.id, t.status, json_array_length(t.calls), t.created_at, t.settled_at,
    (SELECT count(*) FROM completions c WHERE c.session_id = t.session_id AND c.turn_id = t.id AND c.status = 'pending')
FROM turns t
WHERE t.session_id = ?1 AND (t.created_at, t.id) < (?2, ?3) AND (?4 = '' OR t.status = ?4)
ORDER BY t.created_at DESC, t.id DESC
LIMIT ?5`

	sqlListParked = `SELECT session_id, turn_id, call_idx, call_id, call_name, deadline, heartbeat_timeout,
    heartbeat_deadline, on_timeout, on_cancel, created_at, reason
FROM completions
WHERE status = 'pending' AND (created_at, session_id, turn_id, call_idx) < (?, ?, ?, ?)
ORDER BY created_at DESC, session_id DESC, turn_id DESC, call_idx DESC
LIMIT ?`
)

// ListSessions returns a page of sessions; see turn.Lister.
func (s *Store) ListSessions(ctx context.Context, after turn.Cursor, limit int) ([]turn.SessionSummary, error) {
	return queryAll(ctx, s.read, "listing sessions", collectRows(scanSessionSummary),
		sqlListSessions, micros(sqlstore.CursorTime(after)), after.ID, limit)
}

func scanSessionSummary(rows scanner) (turn.SessionSummary, error) {
	var id string
	var row sessionRow
	var sum turn.SessionSummary
	var last sql.NullInt64
	if err := rows.Scan(append([]any{&id}, append(row.dest(), &sum.Turns, &sum.Pending, &last)...)...); err != nil {
		return sum, err
	}
	sess, err := row.session(id)
	sum.Session = sess
	sum.LastActivity = sqlstore.LastActivity(sess.CreatedAt, last.Int64, last.Valid)
	return sum, err
}

// ListTurns returns a page of a session's turns; see turn.Lister.
func (s *Store) ListTurns(ctx context.Context, sessionID string, after turn.Cursor, limit int, status turn.Status) ([]turn.TurnSummary, error) {
	scan := func(rows scanner) (turn.TurnSummary, error) {
		t := turn.TurnSummary{SessionID: sessionID}
		var st string
		var created int64
		var settled sql.NullInt64
		err := rows.Scan(&t.ID, &st, &t.Calls, &created, &settled, &t.Pending)
		t.Status, t.CreatedAt, t.SettledAt = turn.Status(st), fromMicros(created), fromNullMicros(settled)
		return t, err
	}
	return queryAll(ctx, s.read, "listing turns of session "+sessionID, collectRows(scan),
		sqlListTurns, sessionID, micros(sqlstore.CursorTime(after)), after.ID, string(status), limit)
}

// ListParked returns a page of the pending completions; see turn.Lister.
func (s *Store) ListParked(ctx context.Context, after turn.Cursor, limit int) ([]turn.ParkedCall, error) {
	const op = "listing parked calls"
	at, sid, tid, idx, err := sqlstore.ParkedCursor(after)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return queryAll(ctx, s.read, op, collectRows(scanParked), sqlListParked, micros(at), sid, tid, idx, limit)
}

func scanParked(rows scanner) (turn.ParkedCall, error) { return scanParkedWith(rows) }

// scanParkedWith scans a row of the pending listing's columns, then extra.
func scanParkedWith(rows scanner, extra ...any) (turn.ParkedCall, error) {
	var p turn.ParkedCall
	var deadline, hbDeadline sql.NullInt64
	var created, hbTimeout int64
	err := rows.Scan(append([]any{&p.SessionID, &p.TurnID, &p.CallIndex, &p.CallID, &p.CallName, &deadline, &hbTimeout,
		&hbDeadline, &p.OnTimeout, &p.OnCancel, &created, &p.Reason}, extra...)...)
	p.Deadline, p.HeartbeatDeadline, p.CreatedAt = fromNullMicros(deadline), fromNullMicros(hbDeadline), fromMicros(created)
	p.HeartbeatTimeout = sqlstore.FromMicros(hbTimeout)
	return p, err
}
