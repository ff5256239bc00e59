package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/turnd/turnd/turn"
)

// keepAlive is how often an idle event stream gets a comment line, so that
// proxies and clients do not take it for dead.
const keepAlive = 15 * time.Second

// turnEvents streams a turn's ledger lines as Server-Sent Events while they
// are written: the event id is the line's seq (resume with Last-Event-ID),
// the event name its kind, the data the line. The stream ends after the
// turn_settled line.
func (s *server) turnEvents(w http.ResponseWriter, r *http.Request) {
	k := turn.TurnKey{SessionID: chi.URLParam(r, "session_id"), TurnID: chi.URLParam(r, "turn_id")}
	t, err := s.svc.GetTurn(r.Context(), k)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	after := int64(0)
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			s.writeError(w, r, errHTTP(http.StatusBadRequest, "invalid_query", "Last-Event-ID must be a ledger seq"))
			return
		}
		after = n
	}
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{}) // a stream outlives the server's write timeout
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	_ = rc.Flush()

	changed, stop := s.svc.Watch(k)
	defer stop()
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	settled := t.Status.Settled()
	for {
		lines, err := s.svc.Ledger(r.Context(), k.SessionID, after, 500)
		if err != nil {
			s.log.WarnContext(r.Context(), "event stream: reading the ledger failed", "err", err)
			return
		}
		for _, l := range lines {
			after = l.Seq
			if l.TurnID != k.TurnID {
				continue
			}
			data, _ := json.Marshal(toLineWire(l))
			if _, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", l.Seq, l.Kind, data); err != nil {
				return
			}
			if l.Kind == turn.LineTurnSettled {
				settled = true
			}
		}
		_ = rc.Flush()
		if len(lines) == 500 {
			continue // more to read
		}
		if settled {
			// Everything up to the settlement is sent; a settled turn
			// writes no more lines (a late completion aside, which belongs
			// to the ledger, not the turn's stream).
			if cur, err := s.svc.GetTurn(r.Context(), k); err != nil || cur.Status.Settled() {
				return
			}
			settled = false
		}
		select {
		case <-r.Context().Done():
			return
		case <-changed:
		case <-tick.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
			_ = rc.Flush()
			if cur, err := s.svc.GetTurn(r.Context(), k); err == nil && cur.Status.Settled() {
				settled = true
			}
		}
	}
}
