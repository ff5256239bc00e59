package api

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/turnd/turnd/turn"
)

// The listings (GET /v1/sessions, /v1/sessions/{id}/turns, /v1/pending):
// pages newest first, each carrying next_after, the opaque cursor of the
// next page ("" when this page is the last).

type sessionSummaryWire struct {
	sessionWire
	Turns        int64     `json:"turns"`
	Pending      int64     `json:"pending"`
	LastActivity time.Time `json:"last_activity"`
}

type turnSummaryWire struct {
	ID        string     `json:"id"`
	Status    string     `json:"status"`
	Calls     int        `json:"calls"`
	Pending   int64      `json:"pending"`
	CreatedAt time.Time  `json:"created_at"`
	SettledAt *time.Time `json:"settled_at"`
}

// parkedCallWire is a parked call as listed: never its completion key.
type parkedCallWire struct {
	SessionID         string     `json:"session_id"`
	TurnID            string     `json:"turn_id"`
	CallIndex         int        `json:"call_index"`
	CallID            string     `json:"call_id"`
	Tool              string     `json:"tool"`
	ParkedAt          time.Time  `json:"parked_at"`
	Deadline          *time.Time `json:"deadline"`
	HeartbeatTimeout  string     `json:"heartbeat_timeout,omitempty"`
	HeartbeatDeadline *time.Time `json:"heartbeat_deadline"`
	OnTimeout         string     `json:"on_timeout"`
	OnCancel          string     `json:"on_cancel"`
	Reason            string     `json:"reason,omitempty"`
}

// The pages' bodies: the rows and the next page's cursor.
type (
	sessionPageWire struct {
		Sessions  []sessionSummaryWire `json:"sessions"`
		NextAfter string               `json:"next_after"`
	}
	turnPageWire struct {
		Turns     []turnSummaryWire `json:"turns"`
		NextAfter string            `json:"next_after"`
	}
	pendingPageWire struct {
		Pending   []parkedCallWire `json:"pending"`
		NextAfter string           `json:"next_after"`
	}
)

// listQuery reads a listing's after and limit (default 50, 1-500).
func listQuery(r *http.Request) (turn.Cursor, int, error) {
	q := r.URL.Query()
	limit := 50
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 500 {
			return turn.Cursor{}, 0, errHTTP(http.StatusBadRequest, "invalid_query", "limit must be an integer from 1 to 500")
		}
		limit = n
	}
	after, err := turn.ParseCursor(q.Get("after"))
	if err != nil {
		return turn.Cursor{}, 0, errHTTP(http.StatusBadRequest, "invalid_query", "after must be a next_after value of this listing")
	}
	return after, limit, nil
}

// listing is one listing endpoint: list reads a page (asked for one row
// more than it holds, so that the last page says it is the last), cursor
// is a row's position, wire its JSON form and body the page's JSON body.
type listing[T, W any] struct {
	list   func(ctx context.Context, after turn.Cursor, limit int) ([]T, error)
	cursor func(T) turn.Cursor
	wire   func(T) W
	body   func(rows []W, nextAfter string) any
}

// serve answers a listing request: the page after the query's cursor, and
// as its next_after the last row's cursor when more rows follow, else "".
func (l listing[T, W]) serve(s *server, w http.ResponseWriter, r *http.Request) {
	after, limit, err := listQuery(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	page, err := l.list(r.Context(), after, limit+1)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	n := len(page)
	page = page[:min(n, limit)]
	rows := make([]W, len(page))
	for i, row := range page {
		rows[i] = l.wire(row)
	}
	next := ""
	if n > limit {
		next = l.cursor(page[len(page)-1]).String()
	}
	writeJSON(w, http.StatusOK, l.body(rows, next))
}

func (s *server) listSessions(w http.ResponseWriter, r *http.Request) {
	listing[turn.SessionSummary, sessionSummaryWire]{
		list: s.svc.ListSessions,
		cursor: func(sum turn.SessionSummary) turn.Cursor {
			return turn.Cursor{At: sum.CreatedAt, ID: sum.ID}
		},
		wire: func(sum turn.SessionSummary) sessionSummaryWire {
			return sessionSummaryWire{toSessionWire(sum.Session), sum.Turns, sum.Pending, sum.LastActivity.UTC()}
		},
		body: func(rows []sessionSummaryWire, next string) any { return sessionPageWire{rows, next} },
	}.serve(s, w, r)
}

func (s *server) listTurns(w http.ResponseWriter, r *http.Request) {
	sessionID, status := chi.URLParam(r, "session_id"), turn.Status(r.URL.Query().Get("status"))
	listing[turn.TurnSummary, turnSummaryWire]{
		list: func(ctx context.Context, after turn.Cursor, limit int) ([]turn.TurnSummary, error) {
			switch status {
			case "", turn.StatusRunning, turn.StatusWaiting, turn.StatusCompleted, turn.StatusFailed, turn.StatusCancelled:
			default:
				return nil, errHTTP(http.StatusBadRequest, "invalid_query", "status must be running, waiting, completed, failed or cancelled")
			}
			return s.svc.ListTurns(ctx, sessionID, after, limit, status)
		},
		cursor: func(t turn.TurnSummary) turn.Cursor { return turn.Cursor{At: t.CreatedAt, ID: t.ID} },
		wire: func(t turn.TurnSummary) turnSummaryWire {
			return turnSummaryWire{ID: t.ID, Status: string(t.Status), Calls: t.Calls, Pending: t.Pending,
				CreatedAt: t.CreatedAt.UTC(), SettledAt: timePtr(t.SettledAt)}
		},
		body: func(rows []turnSummaryWire, next string) any { return turnPageWire{rows, next} },
	}.serve(s, w, r)
}

func (s *server) listPending(w http.ResponseWriter, r *http.Request) {
	listing[turn.ParkedCall, parkedCallWire]{
		list: func(ctx context.Context, after turn.Cursor, limit int) ([]turn.ParkedCall, error) {
			if _, _, _, ok := turn.SplitParkedID(after.ID); !after.IsZero() && !ok {
				return nil, errHTTP(http.StatusBadRequest, "invalid_query", "after must be a next_after value of this listing")
			}
			return s.svc.ListParked(ctx, after, limit)
		},
		cursor: turn.ParkedCall.Cursor,
		wire: func(p turn.ParkedCall) parkedCallWire {
			pw := parkedCallWire{SessionID: p.SessionID, TurnID: p.TurnID, CallIndex: p.CallIndex, CallID: p.CallID, Tool: p.CallName,
				ParkedAt: p.CreatedAt.UTC(), Deadline: timePtr(p.Deadline), HeartbeatDeadline: timePtr(p.HeartbeatDeadline),
				OnTimeout: p.OnTimeout, OnCancel: p.OnCancel, Reason: p.Reason}
			if p.HeartbeatTimeout > 0 {
				pw.HeartbeatTimeout = p.HeartbeatTimeout.String()
			}
			return pw
		},
		body: func(rows []parkedCallWire, next string) any { return pendingPageWire{rows, next} },
	}.serve(s, w, r)
}

// turnCalls answers a turn's calls as posted (ids, tools, arguments), in
// call order: what the turn's results and ledger lines refer to.
func (s *server) turnCalls(w http.ResponseWriter, r *http.Request) {
	t, err := s.svc.GetTurn(r.Context(), turn.TurnKey{SessionID: chi.URLParam(r, "session_id"), TurnID: chi.URLParam(r, "turn_id")})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := struct {
		Calls []turn.Call `json:"calls"`
	}{Calls: t.Calls}
	if out.Calls == nil {
		out.Calls = []turn.Call{}
	}
	writeJSON(w, http.StatusOK, out)
}
