package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/turnd/turnd/tool"
	"github.com/turnd/turnd/turn"
)

// progressWire is a call_progress event's data, and (without call_id and
// at) the body of POST /v1/complete/{key}/progress.
type progressWire struct {
	CallID   string    `json:"call_id,omitempty"`
	Progress *float64  `json:"progress"`
	Total    float64   `json:"total,omitempty"`
	Message  string    `json:"message,omitempty"`
	At       time.Time `json:"at,omitzero"`
}

// writeProgress writes a call_progress event for each call of turn k whose
// progress changed since sent (call id → Seq shown), updating sent. The
// events carry no id: they are not ledger lines, and a client resuming
// with Last-Event-ID gets the latest progress again with the next change.
func (s *server) writeProgress(w http.ResponseWriter, k turn.TurnKey, sent map[string]uint64) error {
	for _, p := range s.svc.Progress(k) {
		if p.Seq <= sent[p.CallID] {
			continue
		}
		sent[p.CallID] = p.Seq
		data, _ := json.Marshal(progressWire{CallID: p.CallID, Progress: &p.Progress, Total: p.Total, Message: p.Message, At: p.At})
		if _, err := fmt.Fprintf(w, "event: call_progress\ndata: %s\n\n", data); err != nil {
			return err
		}
	}
	return nil
}

// progressQuery reads the event stream's progress query: call_progress
// events are sent only to a client that asks for them, so that one that
// reads every event as a ledger line is not surprised.
func progressQuery(r *http.Request) (bool, error) {
	switch v := r.URL.Query().Get("progress"); v {
	case "", "false":
		return false, nil
	case "true":
		return true, nil
	}
	return false, errHTTP(http.StatusBadRequest, "invalid_query", "progress must be true or false")
}

// completeProgress takes a deferred call's progress from the system doing
// its work: it shows on the turn's event stream, and is never journaled.
func (s *server) completeProgress(w http.ResponseWriter, r *http.Request) {
	var p progressWire
	if err := s.readSignedJSON(r, &p); err != nil {
		s.writeError(w, r, err)
		return
	}
	if p.Progress == nil {
		s.writeError(w, r, errHTTP(http.StatusUnprocessableEntity, "invalid_request", "progress is required"))
		return
	}
	info, err := s.svc.ReportProgress(r.Context(), chi.URLParam(r, "key"), tool.Progress{Progress: *p.Progress, Total: p.Total, Message: p.Message})
	if err != nil {
		if errors.Is(err, turn.ErrCompletionGone) {
			s.writeProblemWith(w, r, err, map[string]any{
				"recorded_status": info.Status,
				"detail":          "the key takes no more progress: its call is " + string(info.Status),
			})
			return
		}
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toCompletionInfo(info))
}
