package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/turnd/turnd/dispatch"
	"github.com/turnd/turnd/turn"
)

// decisionWire is a decision's body, on the decision route and on a
// completion key.
type decisionWire struct {
	Decision  string          `json:"decision"`
	Arguments json.RawMessage `json:"arguments"`
	Message   string          `json:"message"`
	By        string          `json:"by"`
}

func (d decisionWire) decision() turn.Decision {
	args := d.Arguments
	if len(bytes.TrimSpace(args)) == 0 || string(bytes.TrimSpace(args)) == "null" {
		args = nil
	}
	return turn.Decision{Decision: d.Decision, Arguments: args, Message: d.Message, By: d.By}
}

type decisionResultWire struct {
	Decision  string `json:"decision"`
	Status    string `json:"status"`
	SessionID string `json:"session_id"`
	TurnID    string `json:"turn_id"`
	CallID    string `json:"call_id"`
	Edited    bool   `json:"edited"`
}

func toDecisionResult(res turn.DecisionResult) decisionResultWire {
	return decisionResultWire{Decision: res.Decision, Status: res.Status, SessionID: res.Key.SessionID,
		TurnID: res.Key.TurnID, CallID: res.CallID, Edited: res.Edited}
}

// decide answers POST /v1/sessions/{s}/turns/{t}/calls/{c}/decision.
func (s *server) decide(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		s.writeError(w, r, readBodyError(err))
		return
	}
	var d decisionWire
	if err := decodeStrict(body, &d); err != nil {
		s.writeError(w, r, err)
		return
	}
	k := turn.TurnKey{SessionID: chi.URLParam(r, "session_id"), TurnID: chi.URLParam(r, "turn_id")}
	res, err := s.svc.Decide(r.Context(), k, chi.URLParam(r, "call_id"), d.decision())
	s.answerDecision(w, r, res, err)
}

func (s *server) answerDecision(w http.ResponseWriter, r *http.Request, res turn.DecisionResult, err error) {
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toDecisionResult(res))
}

// completeDecision takes a decision posted to a completion key.
func (s *server) completeDecision(w http.ResponseWriter, r *http.Request, body []byte) {
	var d decisionWire
	if err := decodeStrict(body, &d); err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := s.svc.DecideByKey(r.Context(), chi.URLParam(r, "key"), d.decision())
	s.answerDecision(w, r, res, err)
}

// approvalWire is a call waiting for approval, as listed: never its key.
type approvalWire struct {
	SessionID   string          `json:"session_id"`
	TurnID      string          `json:"turn_id"`
	CallIndex   int             `json:"call_index"`
	CallID      string          `json:"call_id"`
	Tool        string          `json:"tool"`
	Arguments   json.RawMessage `json:"arguments"`
	RequestedAt time.Time       `json:"requested_at"`
	Deadline    *time.Time      `json:"deadline"`
	OnTimeout   string          `json:"on_timeout"`
	Rule        string          `json:"rule"`
}

type approvalsPageWire struct {
	Approvals []approvalWire `json:"approvals"`
	NextAfter string         `json:"next_after"`
}

// listApprovals answers GET /v1/approvals: the calls waiting for a
// decision across sessions, newest first, with their arguments.
func (s *server) listApprovals(w http.ResponseWriter, r *http.Request) {
	listing[turn.Approval, approvalWire]{
		list: func(ctx context.Context, after turn.Cursor, limit int) ([]turn.Approval, error) {
			if _, _, _, ok := turn.SplitParkedID(after.ID); !after.IsZero() && !ok {
				return nil, errHTTP(http.StatusBadRequest, "invalid_query", "after must be a next_after value of this listing")
			}
			return s.svc.ListApprovals(ctx, after, limit)
		},
		cursor: func(a turn.Approval) turn.Cursor { return a.Cursor() },
		wire: func(a turn.Approval) approvalWire {
			return approvalWire{SessionID: a.SessionID, TurnID: a.TurnID, CallIndex: a.CallIndex, CallID: a.CallID, Tool: a.CallName,
				Arguments: rawOr(a.Arguments, `{}`), RequestedAt: a.CreatedAt.UTC(), Deadline: timePtr(a.Deadline), OnTimeout: a.OnTimeout, Rule: a.Rule}
		},
		body: func(rows []approvalWire, next string) any { return approvalsPageWire{rows, next} },
	}.serve(s, w, r)
}

// decisionStatus is the HTTP status of a decision error's code.
func decisionStatus(code string) int {
	switch code {
	case turn.CodeApprovalExpired:
		return http.StatusGone
	case dispatch.CodeInvalidArguments:
		return http.StatusUnprocessableEntity
	}
	return http.StatusConflict // not_awaiting_approval, already_decided, awaiting_approval
}
