package api

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/turnd/turnd/turn"
)

type deliveryWire struct {
	Output json.RawMessage `json:"output"`
	Error  *turn.CallError `json:"error"`
	// Decision, when present, makes the body a decision on a call waiting
	// for approval (completeDecision), not a result.
	Decision json.RawMessage `json:"decision"`
}

type completionInfoWire struct {
	Status            string     `json:"status"`
	Deadline          *time.Time `json:"deadline"`
	HeartbeatDeadline *time.Time `json:"heartbeat_deadline"`
}

func toCompletionInfo(i turn.CompletionInfo) completionInfoWire {
	return completionInfoWire{Status: string(i.Status), Deadline: timePtr(i.Deadline), HeartbeatDeadline: timePtr(i.HeartbeatDeadline)}
}

// readSigned reads the body and, when a signing secret is configured,
// verifies its Standard Webhooks signature before anything else happens.
func (s *server) readSigned(r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, readBodyError(err)
	}
	if s.cfg.CompletionSigner != nil {
		if err := s.cfg.CompletionSigner.Verify(r.Header, body, time.Now(), s.cfg.SignatureTolerance); err != nil {
			return nil, errHTTP(http.StatusUnauthorized, "bad_signature", "a valid Standard Webhooks signature (webhook-id, webhook-timestamp, webhook-signature) is required")
		}
	}
	return body, nil
}

// readSignedJSON reads a signed body (readSigned), valid UTF-8, into v.
func (s *server) readSignedJSON(r *http.Request, v any) error {
	body, err := s.readSigned(r)
	if err != nil {
		return err
	}
	if err := checkUTF8(body); err != nil {
		return err
	}
	if err := json.Unmarshal(body, v); err != nil {
		return errHTTP(http.StatusBadRequest, "malformed_json", "the request body is not a JSON object: "+err.Error())
	}
	return nil
}

func (s *server) complete(w http.ResponseWriter, r *http.Request) {
	body, err := s.readSigned(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var d deliveryWire
	if err := checkUTF8(body); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := json.Unmarshal(body, &d); err != nil {
		s.writeError(w, r, errHTTP(http.StatusBadRequest, "malformed_json", "the request body is not a JSON object: "+err.Error()))
		return
	}
	if d.Decision != nil {
		s.completeDecision(w, r, body)
		return
	}
	res, err := s.svc.Complete(r.Context(), chi.URLParam(r, "key"), turn.Delivery{Output: d.Output, Error: d.Error})
	if err != nil {
		if errors.Is(err, turn.ErrCompletionConflict) || errors.Is(err, turn.ErrCompletionGone) {
			s.writeProblemWith(w, r, err, map[string]any{"recorded_status": res.Recorded})
			return
		}
		s.writeError(w, r, err)
		return
	}
	writeDelivered(w, res.Status)
}

// deliveredAnswers are the answers to a delivery, by status, as writeJSON
// would write {"status": status}: every delivery is answered one of them,
// so they are written as they are, not encoded each time.
var deliveredAnswers = map[string][]byte{
	"accepted":          []byte(`{"status":"accepted"}` + "\n"),
	"already_completed": []byte(`{"status":"already_completed"}` + "\n"),
}

// writeDelivered answers 200 {"status": status}.
func writeDelivered(w http.ResponseWriter, status string) {
	body, ok := deliveredAnswers[status]
	if !ok {
		writeJSON(w, http.StatusOK, map[string]string{"status": status})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

func (s *server) completionStatus(w http.ResponseWriter, r *http.Request) {
	info, err := s.svc.CompletionStatus(r.Context(), chi.URLParam(r, "key"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toCompletionInfo(info))
}

func (s *server) heartbeat(w http.ResponseWriter, r *http.Request) {
	if _, err := s.readSigned(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	info, err := s.svc.Heartbeat(r.Context(), chi.URLParam(r, "key"))
	if err != nil {
		if errors.Is(err, turn.ErrCompletionGone) {
			s.writeProblemWith(w, r, err, map[string]any{
				"recorded_status": info.Status,
				"detail":          "the key takes no more heartbeats: its call is " + string(info.Status),
			})
			return
		}
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toCompletionInfo(info))
}

func (s *server) cancelTurn(w http.ResponseWriter, r *http.Request) {
	k := turn.TurnKey{SessionID: chi.URLParam(r, "session_id"), TurnID: chi.URLParam(r, "turn_id")}
	t, err := s.svc.Cancel(r.Context(), k)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toTurnWire(t))
}
