package api

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/turnd/turnd/api/provider"
	"github.com/turnd/turnd/turn"
)

// Problem is an RFC 9457 problem details body with a stable machine code.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	Code   string `json:"code"`
}

// problemFor maps an error to its status, stable code and the message that
// is safe to send. It is the only place domain errors become HTTP.
func problemFor(err error) (status int, code, detail string) {
	var inv *turn.InvalidError
	var he *httpError
	var decision *turn.DecisionError
	var badBody *provider.BodyError
	var badFormat *provider.UnknownFormatError
	var unsupported *provider.UnsupportedCallError
	var incomplete *provider.IncompleteError
	switch {
	case errors.As(err, &he):
		return he.status, he.code, he.detail
	case errors.As(err, &decision):
		return decisionStatus(decision.Code), decision.Code, decision.Message
	case errors.As(err, &incomplete):
		return http.StatusUnprocessableEntity, "stream_incomplete", incomplete.Error() + "; nothing of the turn was recorded: post it again, whole or streamed"
	case errors.As(err, &badBody):
		return http.StatusBadRequest, "format_mismatch", badBody.Error()
	case errors.As(err, &badFormat):
		return http.StatusBadRequest, "unknown_format", badFormat.Error()
	case errors.As(err, &unsupported):
		return http.StatusUnprocessableEntity, "unsupported_tool_call", unsupported.Error()
	case errors.Is(err, provider.ErrNoToolCalls):
		return http.StatusUnprocessableEntity, "no_tool_calls", "the message carries no tool calls: there is nothing to run"
	case errors.As(err, &inv):
		if inv.TooLarge {
			return http.StatusUnprocessableEntity, "too_many_calls", inv.Error()
		}
		return http.StatusUnprocessableEntity, "invalid_request", inv.Error()
	}
	for _, p := range sentinelProblems {
		if errors.Is(err, p.err) {
			return p.status, p.code, p.detail
		}
	}
	return http.StatusInternalServerError, "internal", "internal error"
}

// sentinelProblems are the domain's sentinel errors as HTTP, the first
// match winning (so the order is the precedence where an error wraps two).
var sentinelProblems = []struct {
	err          error
	status       int
	code, detail string
}{
	{turn.ErrCompletionConflict, http.StatusConflict, "completion_conflict", "the key was already completed with a different payload"},
	{turn.ErrCompletionGone, http.StatusGone, "completion_gone", "the call timed out or was cancelled before this result arrived; the result is recorded in the ledger as completion_late"},
	{turn.ErrCompletionsDisabled, http.StatusNotFound, "not_found", "no such resource"},
	{turn.ErrTurnConflict, http.StatusConflict, "turn_conflict", "the turn id is already recorded with different calls"},
	{turn.ErrSessionExists, http.StatusConflict, "session_exists", "a session with this id already exists"},
	{turn.ErrNotFound, http.StatusNotFound, "not_found", "no such resource"},
	{turn.ErrShuttingDown, http.StatusServiceUnavailable, "shutting_down", "the server is shutting down; retry on another replica"},
	{turn.ErrUnavailable, http.StatusServiceUnavailable, "store_unavailable", "the database is unavailable; retry later"},
}

// httpError is an error raised by the HTTP layer itself (bad JSON, body too
// large, auth), already carrying its status.
type httpError struct {
	status int
	code   string
	detail string
}

func (e *httpError) Error() string { return e.code + ": " + e.detail }

func errHTTP(status int, code, detail string) error {
	return &httpError{status: status, code: code, detail: detail}
}

// writeError sends err as problem+json; internal details go to the log
// only. A request whose client is gone gets no body.
func (s *server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil && errors.Is(err, context.Canceled) {
		s.log.DebugContext(r.Context(), "client gone before the response", "route", routeOf(r))
		return
	}
	status, code, detail := problemFor(err)
	level := slog.LevelDebug
	if status >= 500 {
		level = slog.LevelError
	}
	s.log.Log(r.Context(), level, "request failed", "method", r.Method, "route", routeOf(r), "status", status, "code", code, "err", err)
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", strconv.Itoa(s.cfg.RetryAfterSeconds))
	}
	if code == "unauthorized" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="turnd"`)
	}
	writeProblem(w, status, code, detail)
}

// writeProblemWith sends err's problem with extension members (which may
// also replace its detail).
func (s *server) writeProblemWith(w http.ResponseWriter, r *http.Request, err error, ext map[string]any) {
	status, code, detail := problemFor(err)
	s.log.DebugContext(r.Context(), "request refused", "method", r.Method, "route", routeOf(r), "status", status, "code", code)
	body := map[string]any{"type": "urn:turnd:problem:" + code, "title": http.StatusText(status), "status": status, "detail": detail, "code": code}
	for k, v := range ext {
		body[k] = v
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

func writeProblem(w http.ResponseWriter, status int, code, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(Problem{
		Type:   "urn:turnd:problem:" + code,
		Title:  http.StatusText(status),
		Status: status,
		Detail: detail,
		Code:   code,
	})
}
