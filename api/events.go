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

// eventPage is how many lines the event stream reads at a time (pages are
// bounded by bytes too: turn.MaxPageBytes).
const eventPage = 500

// turnEvents streams a turn's ledger lines as Server-Sent Events while they
// are written: the event id is the line's seq (resume with Last-Event-ID),
// the event name its kind, the data the line. The stream ends after the
// turn_settled line. It reads the turn's lines alone (Service.TurnLedger)
// and leaves out completion_late lines: a late delivery changes nothing
// of the turn, and mostly comes after its settlement; the session's
// ledger has them.
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
	withProgress, err := progressQuery(r)
	if err != nil {
		s.writeError(w, r, err)
		return
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
	var sent map[string]uint64 // progress shown, by call (progress.go)
	if withProgress {
		sent = map[string]uint64{}
	}
	for {
		lines, err := s.svc.TurnLedger(r.Context(), k, after, eventPage)
		if err != nil {
			s.log.WarnContext(r.Context(), "event stream: reading the ledger failed", "err", err)
			return
		}
		for _, l := range lines {
			after = l.Seq
			if l.Kind == turn.LineCompletionLate {
				continue
			}
			data, _ := json.Marshal(toLineWire(l))
			if _, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", l.Seq, l.Kind, data); err != nil {
				return
			}
			if l.Kind == turn.LineTurnSettled {
				_ = rc.Flush()
				return // the turn's last line
			}
		}
		if sent != nil && s.writeProgress(w, k, sent) != nil {
			return
		}
		_ = rc.Flush()
		if len(lines) > 0 {
			continue // a page may end at its line or byte bound: read on to an empty one
		}
		if settled {
			// Up to date with a settled turn whose settlement the client
			// has seen (it resumed after it).
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
