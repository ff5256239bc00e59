package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/turnd/turnd/store/internal/sqlstore"
	"github.com/turnd/turnd/turn"
)

// The listings read one index each (migration 11), backwards from the
// cursor; the first page starts from a cursor after every row (sqlstore.ListStart).
// A listed session's counts and last activity are probes of the turns'
// primary key, completions_turn and the ledger's primary key: a page of n
// sessions costs n of each, whatever the number of sessions.
const (
	// ListSessionsSQL is exported for the plan tests.
	ListSessionsSQL = `SELECT s.id, s.tools, s.budget, s.callback_url, s.metadata, s.created_at, s.approval,
    (SELECT count(*) FROM turns t WHERE t.session_id = s.id),
    (SELECT count(*) FROM completions c WHERE c.session_id = s.id AND c.status = 'pending'),
    (SELECT (b.lines->-1->>'a')::bigint FROM ledger_batches b WHERE b.session_id = s.id ORDER BY b.last_seq DESC LIMIT 1)
FROM sessions s
WHERE (s.created_at, s.id) < ($1::timestamptz, $2::text)
ORDER BY s.created_at DESC, s.id DESC
LIMIT $3`

	// ListTurnsSQL is exported for the plan tests.
	ListTurnsSQL = `SELECT t.id, t.status, json_array_length(t.calls), t.created_at, t.settled_at,
    (SELECT count(*) FROM completions c WHERE c.session_id = t.session_id AND c.turn_id = t.id AND c.status = 'pending')
FROM turns t
WHERE t.session_id = $1 AND (t.created_at, t.id) < ($2::timestamptz, $3::text) AND ($4::text = '' OR t.status = $4::text)
ORDER BY t.created_at DESC, t.id DESC
LIMIT $5`

	// ListParkedSQL is exported for the plan tests.
	ListParkedSQL = `SELECT session_id, turn_id, call_idx, call_id, call_name, deadline, heartbeat_timeout,
    heartbeat_deadline, on_timeout, on_cancel, created_at, reason
FROM completions
WHERE status = 'pending' AND (created_at, session_id, turn_id, call_idx) < ($1::timestamptz, $2::text, $3::text, $4::integer)
ORDER BY created_at DESC, session_id DESC, turn_id DESC, call_idx DESC
LIMIT $5`
)

// ListSessions returns a page of sessions; see turn.Lister.
func (s *Store) ListSessions(ctx context.Context, after turn.Cursor, limit int) ([]turn.SessionSummary, error) {
	return queryAll(ctx, s.pool, "listing sessions", collectSessionSummaries,
		ListSessionsSQL, sqlstore.CursorTime(after), after.ID, limit)
}

func collectSessionSummaries(rows pgx.Rows) ([]turn.SessionSummary, error) {
	var (
		id             string
		row            sessionRow
		turns, pending int64
		last           pgtype.Int8
	)
	return forEach(rows, append([]any{&id}, append(row.dest(), &turns, &pending, &last)...), func() (turn.SessionSummary, error) {
		sess, err := row.session(id)
		return turn.SessionSummary{Session: sess, Turns: turns, Pending: pending,
			LastActivity: sqlstore.LastActivity(sess.CreatedAt, last.Int64, last.Valid)}, err
	})
}

// ListTurns returns a page of a session's turns; see turn.Lister.
func (s *Store) ListTurns(ctx context.Context, sessionID string, after turn.Cursor, limit int, status turn.Status) ([]turn.TurnSummary, error) {
	collect := func(rows pgx.Rows) ([]turn.TurnSummary, error) {
		var (
			t                turn.TurnSummary
			st               string
			created, settled pgtype.Timestamptz
		)
		return forEach(rows, []any{&t.ID, &st, &t.Calls, &created, &settled, &t.Pending}, func() (turn.TurnSummary, error) {
			x := t
			x.SessionID, x.Status, x.CreatedAt, x.SettledAt = sessionID, turn.Status(st), fromNullTime(created), fromNullTime(settled)
			return x, nil
		})
	}
	return queryAll(ctx, s.pool, "listing turns of session "+sessionID, collect,
		ListTurnsSQL, sessionID, sqlstore.CursorTime(after), after.ID, string(status), limit)
}

// ListParked returns a page of the pending completions; see turn.Lister.
func (s *Store) ListParked(ctx context.Context, after turn.Cursor, limit int) ([]turn.ParkedCall, error) {
	const op = "listing parked calls"
	at, sid, tid, idx, err := sqlstore.ParkedCursor(after)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return queryAll(ctx, s.pool, op, collectParked, ListParkedSQL, at, sid, tid, idx, limit)
}

func collectParked(rows pgx.Rows) ([]turn.ParkedCall, error) {
	var r parkedRow
	return forEach(rows, r.dest(), func() (turn.ParkedCall, error) { return r.parked(), nil })
}

// parkedRow scans the pending listing's columns.
type parkedRow struct {
	p                             turn.ParkedCall
	deadline, hbDeadline, created pgtype.Timestamptz
	hbTimeout                     int64
}

func (r *parkedRow) dest() []any {
	return []any{&r.p.SessionID, &r.p.TurnID, &r.p.CallIndex, &r.p.CallID, &r.p.CallName, &r.deadline, &r.hbTimeout,
		&r.hbDeadline, &r.p.OnTimeout, &r.p.OnCancel, &r.created, &r.p.Reason}
}

func (r *parkedRow) parked() turn.ParkedCall {
	x := r.p
	x.Deadline, x.HeartbeatDeadline, x.CreatedAt = fromNullTime(r.deadline), fromNullTime(r.hbDeadline), fromNullTime(r.created)
	x.HeartbeatTimeout = sqlstore.FromMicros(r.hbTimeout)
	return x
}
