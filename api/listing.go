package api

import (
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
}

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

// Each listing reads one row more than the page holds: the page's
// next_after is set only when that row exists, so that the last page says
// it is the last.

// nextAfter is a page's next_after: the last row's cursor when more rows
// follow (n, the rows read, exceeds limit), else "".
func nextAfter(n, limit int, last func() turn.Cursor) string {
	if n <= limit {
		return ""
	}
	return last().String()
}

func (s *server) listSessions(w http.ResponseWriter, r *http.Request) {
	after, limit, err := listQuery(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	page, err := s.svc.ListSessions(r.Context(), after, limit+1)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	n := len(page)
	page = page[:min(n, limit)]
	out := struct {
		Sessions  []sessionSummaryWire `json:"sessions"`
		NextAfter string               `json:"next_after"`
	}{Sessions: make([]sessionSummaryWire, len(page))}
	for i, sum := range page {
		out.Sessions[i] = sessionSummaryWire{toSessionWire(sum.Session), sum.Turns, sum.Pending, sum.LastActivity.UTC()}
	}
	out.NextAfter = nextAfter(n, limit, func() turn.Cursor {
		l := page[len(page)-1]
		return turn.Cursor{At: l.CreatedAt, ID: l.ID}
	})
	writeJSON(w, http.StatusOK, out)
}

func (s *server) listTurns(w http.ResponseWriter, r *http.Request) {
	after, limit, err := listQuery(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	status := turn.Status(r.URL.Query().Get("status"))
	switch status {
	case "", turn.StatusRunning, turn.StatusWaiting, turn.StatusCompleted, turn.StatusFailed, turn.StatusCancelled:
	default:
		s.writeError(w, r, errHTTP(http.StatusBadRequest, "invalid_query", "status must be running, waiting, completed, failed or cancelled"))
		return
	}
	page, err := s.svc.ListTurns(r.Context(), chi.URLParam(r, "session_id"), after, limit+1, status)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	n := len(page)
	page = page[:min(n, limit)]
	out := struct {
		Turns     []turnSummaryWire `json:"turns"`
		NextAfter string            `json:"next_after"`
	}{Turns: make([]turnSummaryWire, len(page))}
	for i, t := range page {
		out.Turns[i] = turnSummaryWire{ID: t.ID, Status: string(t.Status), Calls: t.Calls, Pending: t.Pending,
			CreatedAt: t.CreatedAt.UTC(), SettledAt: timePtr(t.SettledAt)}
	}
	out.NextAfter = nextAfter(n, limit, func() turn.Cursor {
		l := page[len(page)-1]
		return turn.Cursor{At: l.CreatedAt, ID: l.ID}
	})
	writeJSON(w, http.StatusOK, out)
}

func (s *server) listPending(w http.ResponseWriter, r *http.Request) {
	after, limit, err := listQuery(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if _, _, _, ok := turn.SplitParkedID(after.ID); !after.IsZero() && !ok {
		s.writeError(w, r, errHTTP(http.StatusBadRequest, "invalid_query", "after must be a next_after value of this listing"))
		return
	}
	page, err := s.svc.ListParked(r.Context(), after, limit+1)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	n := len(page)
	page = page[:min(n, limit)]
	out := struct {
		Pending   []parkedCallWire `json:"pending"`
		NextAfter string           `json:"next_after"`
	}{Pending: make([]parkedCallWire, len(page))}
	for i, p := range page {
		pw := parkedCallWire{SessionID: p.SessionID, TurnID: p.TurnID, CallIndex: p.CallIndex, CallID: p.CallID, Tool: p.CallName,
			ParkedAt: p.CreatedAt.UTC(), Deadline: timePtr(p.Deadline), HeartbeatDeadline: timePtr(p.HeartbeatDeadline),
			OnTimeout: p.OnTimeout, OnCancel: p.OnCancel}
		if p.HeartbeatTimeout > 0 {
			pw.HeartbeatTimeout = p.HeartbeatTimeout.String()
		}
		out.Pending[i] = pw
	}
	out.NextAfter = nextAfter(n, limit, func() turn.Cursor { return page[len(page)-1].Cursor() })
	writeJSON(w, http.StatusOK, out)
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
