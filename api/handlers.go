package api

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/turnd/turnd/dispatch"
	"github.com/turnd/turnd/turn"
)

func (s *server) createSession(w http.ResponseWriter, r *http.Request) {
	var req sessionRequest
	if err := decodeJSON(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	spec := turn.SessionSpec{Tools: req.Tools, CallbackURL: req.CallbackURL, Metadata: req.Metadata, Approval: req.Approval}
	if req.ID != nil {
		if *req.ID == "" {
			s.writeError(w, r, &turn.InvalidError{Field: "id", Reason: "must not be empty"})
			return
		}
		spec.ID = *req.ID
	}
	if req.Budget != nil {
		c := req.Budget.config(s.svc.DefaultBudget())
		spec.Budget = &c
	}
	sess, err := s.svc.CreateSession(r.Context(), spec)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/sessions/"+sess.ID)
	writeJSON(w, http.StatusCreated, toSessionWire(sess))
}

func (s *server) getSession(w http.ResponseWriter, r *http.Request) {
	sess, err := s.svc.GetSession(r.Context(), chi.URLParam(r, "session_id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toSessionWire(sess))
}

func (s *server) postTurn(w http.ResponseWriter, r *http.Request) {
	if mt, ok := streamedType(r); ok {
		s.postStreamTurn(w, r, mt)
		return
	}
	if wantsProvider(r) {
		s.postProviderTurn(w, r)
		return
	}
	var req turnRequest
	if err := decodeTurnRequest(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.Calls == nil {
		s.writeError(w, r, &turn.InvalidError{Field: "calls", Reason: "required (an array of {id, name, arguments})"})
		return
	}
	tr := turn.TurnRequest{
		ID:            req.ID,
		Mode:          dispatch.Mode(req.Mode),
		FailurePolicy: dispatch.FailurePolicy(req.FailurePolicy),
		Calls:         make([]turn.Call, len(req.Calls)),
	}
	for i, c := range req.Calls {
		tr.Calls[i] = turn.Call{ID: c.ID, Name: c.Name, Arguments: c.Arguments}
	}
	s.submitTurn(w, r, tr, s.writeTurn)
}

// submitTurn submits tr and answers with write once the turn has left
// status running (or at once for respond-async, or after a Prefer wait);
// write gets the turn as it then is, settled or not.
func (s *server) submitTurn(w http.ResponseWriter, r *http.Request, tr turn.TurnRequest, write func(http.ResponseWriter, *http.Request, turn.Turn)) {
	sessionID := chi.URLParam(r, "session_id")
	prefs := preferences(r)
	_, async := prefs["respond-async"]
	tr.Async = async
	sub, err := s.svc.Submit(r.Context(), sessionID, tr)
	s.answerSubmitted(w, r, sessionID, prefs, sub, err, write)
}

// answerSubmitted answers a turn submitted with the request's preferences
// (see submitTurn): sub and err are what the submission returned.
func (s *server) answerSubmitted(w http.ResponseWriter, r *http.Request, sessionID string, prefs map[string]string, sub turn.Submitted, err error, write func(http.ResponseWriter, *http.Request, turn.Turn)) {
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	_, async := prefs["respond-async"]
	if sub.Replayed {
		w.Header().Set("Turnd-Replayed", "true")
	}
	if async {
		w.Header().Set("Preference-Applied", "respond-async")
		w.Header().Set("Location", "/v1/sessions/"+sessionID+"/turns/"+sub.Turn.ID)
		if sub.Turn.Status.Settled() {
			// A replayed, settled turn: nothing runs, answer it whole.
			write(w, r, sub.Turn)
			return
		}
		writeTurnJSON(w, http.StatusAccepted, sub.Turn)
		return
	}
	w.Header().Set("Location", "/v1/sessions/"+sessionID+"/turns/"+sub.Turn.ID)
	t := sub.Turn
	k := turn.TurnKey{SessionID: sessionID, TurnID: sub.Turn.ID}
	if wait, ok := s.waitPreference(w, prefs); ok && !t.Status.Settled() {
		t, err = s.waitSettled(r, k, wait)
	} else if t.Status == turn.StatusRunning {
		t, err = s.await(r, k, s.cfg.MaxWait)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	write(w, r, t)
}

// await holds the request until the turn leaves status running or max
// passes, then reads its state.
func (s *server) await(r *http.Request, k turn.TurnKey, max time.Duration) (turn.Turn, error) {
	ctx, cancel := context.WithTimeout(r.Context(), max)
	defer cancel()
	t, err := s.svc.Await(ctx, k)
	if err != nil && errors.Is(err, context.DeadlineExceeded) && r.Context().Err() == nil {
		return s.svc.GetTurn(r.Context(), k)
	}
	return t, err
}

// writeTurn answers 200 for a settled turn and 202 for one still running
// or waiting on pending calls.
func (s *server) writeTurn(w http.ResponseWriter, _ *http.Request, t turn.Turn) {
	status := http.StatusOK
	if !t.Status.Settled() {
		status = http.StatusAccepted
	}
	writeTurnJSON(w, status, t)
}

// waitPreference reads RFC 7240 `Prefer: wait=N` (seconds), capped at
// MaxWait, and announces it in Preference-Applied.
func (s *server) waitPreference(w http.ResponseWriter, prefs map[string]string) (time.Duration, bool) {
	v, ok := prefs["wait"]
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, false
	}
	d := time.Duration(n) * time.Second
	if d > s.cfg.MaxWait {
		d = s.cfg.MaxWait
	}
	w.Header().Set("Preference-Applied", "wait="+strconv.Itoa(int(d/time.Second)))
	return d, true
}

// waitSettled holds the request until the turn settles or wait passes.
func (s *server) waitSettled(r *http.Request, k turn.TurnKey, wait time.Duration) (turn.Turn, error) {
	ctx, cancel := context.WithTimeout(r.Context(), wait)
	defer cancel()
	t, err := s.svc.WaitSettled(ctx, k)
	if err != nil && r.Context().Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		return s.svc.GetTurn(r.Context(), k)
	}
	return t, err
}

func (s *server) getTurn(w http.ResponseWriter, r *http.Request) {
	if wantsProvider(r) {
		s.getProviderTurn(w, r)
		return
	}
	k := turn.TurnKey{SessionID: chi.URLParam(r, "session_id"), TurnID: chi.URLParam(r, "turn_id")}
	if wait, ok := s.waitPreference(w, preferences(r)); ok {
		t, err := s.waitSettled(r, k, wait)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		writeTurnJSON(w, http.StatusOK, t)
		return
	}
	t, err := s.svc.GetTurn(r.Context(), k)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeTurnJSON(w, http.StatusOK, t)
}

func (s *server) getLedger(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	after, limit := int64(0), 100
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			s.writeError(w, r, errHTTP(http.StatusBadRequest, "invalid_query", "after must be a non-negative integer"))
			return
		}
		after = n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			s.writeError(w, r, errHTTP(http.StatusBadRequest, "invalid_query", "limit must be an integer from 1 to 1000"))
			return
		}
		limit = n
	}
	lines, err := s.svc.Ledger(r.Context(), chi.URLParam(r, "session_id"), after, limit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := struct {
		Lines     []lineWire `json:"lines"`
		NextAfter int64      `json:"next_after"`
	}{Lines: make([]lineWire, len(lines)), NextAfter: after}
	for i, l := range lines {
		out.Lines[i] = toLineWire(l)
		out.NextAfter = l.Seq
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *server) getOutput(w http.ResponseWriter, r *http.Request) {
	o, err := s.svc.GetOutput(r.Context(), chi.URLParam(r, "output_id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", o.ContentType)
	w.Header().Set("Cache-Control", "private, max-age=3600")
	// ServeContent answers Range requests (206, and 416 as a problem).
	http.ServeContent(&rangeProblems{ResponseWriter: w}, r, "", o.CreatedAt, bytes.NewReader(o.Data))
}

// rangeProblems turns the plain-text 416 that http.ServeContent writes for
// a range it cannot satisfy into a problem, keeping its Content-Range.
type rangeProblems struct {
	http.ResponseWriter
	swallow bool // the plain-text body that follows is dropped
}

func (w *rangeProblems) WriteHeader(status int) {
	if status != http.StatusRequestedRangeNotSatisfiable {
		w.ResponseWriter.WriteHeader(status)
		return
	}
	w.swallow = true
	w.Header().Del("X-Content-Type-Options")
	writeProblem(w.ResponseWriter, status, "range_not_satisfiable", "the requested range lies outside the output; Content-Range gives its size")
}

func (w *rangeProblems) Write(b []byte) (int, error) {
	if w.swallow {
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

func (s *server) getTools(w http.ResponseWriter, r *http.Request) {
	specs, err := s.sessionTools(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if r.URL.Query().Has("format") {
		s.writeProviderTools(w, r, specs)
		return
	}
	out := struct {
		Tools []toolWire `json:"tools"`
	}{Tools: make([]toolWire, 0, len(specs))}
	for _, t := range specs {
		tw := toolWire{
			Name: t.Name, Description: t.Description, Effect: string(t.Effect), Idempotent: t.Idempotent,
			InputSchema: rawOr(t.InputSchema, `{"type":"object"}`),
		}
		for _, r := range t.ResourceTemplates {
			tw.Resources = append(tw.Resources, r.String())
		}
		if t.Limit != nil {
			tw.MaxConcurrency = t.Limit.Cap()
		}
		if t.SessionLimit != nil {
			tw.MaxConcurrencyPerSession = t.SessionLimit.Cap()
		}
		if t.Approval != nil && !t.Approval.IsZero() {
			tw.Approval = t.Approval
		}
		out.Tools = append(out.Tools, tw)
	}
	writeJSON(w, http.StatusOK, out)
}
