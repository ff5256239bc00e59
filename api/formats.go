package api

import (
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/turnd/turnd/api/provider"
	"github.com/turnd/turnd/dispatch"
	"github.com/turnd/turnd/tool"
	"github.com/turnd/turnd/turn"
)

// Provider formats (?format=F): the turn handlers take and give the model
// providers' own JSON, translated by package provider; ?pending=placeholder
// and since=placeholder render a waiting turn's parked calls. See
// ARCHITECTURE.md, "Provider formats and parked calls".

// renderQuery is what the query asks of a provider rendering.
type renderQuery struct {
	format       provider.Format
	placeholders bool // pending=placeholder
	followUp     bool // since=placeholder
}

// wantsProvider reports whether a turn request names a provider format, or
// one of the parameters that only apply with one.
func wantsProvider(r *http.Request) bool {
	q := r.URL.Query()
	return q.Has("format") || q.Has("pending") || q.Has("since")
}

// providerQuery reads format, pending and (when since is allowed) since.
func providerQuery(r *http.Request, sinceAllowed bool) (renderQuery, error) {
	q := r.URL.Query()
	if !q.Has("format") {
		return renderQuery{}, errHTTP(http.StatusBadRequest, "invalid_query", "pending and since apply to a provider format only: add format (openai.chat, openai.responses or anthropic.messages)")
	}
	f, err := provider.ParseFormat(q.Get("format"))
	if err != nil {
		return renderQuery{}, err
	}
	rq := renderQuery{format: f}
	if q.Has("pending") {
		if q.Get("pending") != "placeholder" {
			return renderQuery{}, errHTTP(http.StatusBadRequest, "invalid_query", "pending must be placeholder")
		}
		rq.placeholders = true
	}
	if sinceAllowed && q.Has("since") {
		if q.Get("since") != "placeholder" {
			return renderQuery{}, errHTTP(http.StatusBadRequest, "invalid_query", "since must be placeholder")
		}
		rq.followUp = true
	}
	return rq, nil
}

func (s *server) postProviderTurn(w http.ResponseWriter, r *http.Request) {
	rq, err := providerQuery(r, false)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err == nil {
		err = checkUTF8(body)
	} else {
		err = readBodyError(err)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	p, err := rq.format.Parse(body)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	q := r.URL.Query()
	tr := turn.TurnRequest{
		ID:            p.ID,
		Calls:         p.Calls,
		Mode:          dispatch.Mode(q.Get("mode")),
		FailurePolicy: dispatch.FailurePolicy(q.Get("failure_policy")),
	}
	if id := q.Get("turn_id"); id != "" {
		tr.ID = id
	}
	s.submitTurn(w, r, tr, func(w http.ResponseWriter, r *http.Request, t turn.Turn) {
		s.writeRendered(w, r, rq, t)
	})
}

func (s *server) getProviderTurn(w http.ResponseWriter, r *http.Request) {
	rq, err := providerQuery(r, true)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	k := turn.TurnKey{SessionID: chi.URLParam(r, "session_id"), TurnID: chi.URLParam(r, "turn_id")}
	var t turn.Turn
	if wait, ok := s.waitPreference(w, preferences(r)); ok {
		t, err = s.waitSettled(r, k, wait)
	} else {
		t, err = s.svc.GetTurn(r.Context(), k)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeRendered(w, r, rq, t)
}

// writeRendered answers t in the query's format (see the comment at the
// top of this file): 200 with the rendering when the turn can be
// rendered, 202 with the turn when it cannot be yet, 409 no_placeholders
// for a follow-up of a turn that parked no call.
func (s *server) writeRendered(w http.ResponseWriter, r *http.Request, rq renderQuery, t turn.Turn) {
	var parked []int
	if rq.placeholders || rq.followUp {
		var err error
		if parked, err = s.parkedCalls(r, t); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	w.Header().Set("Turnd-Turn-Status", string(t.Status))
	if rq.followUp {
		if len(parked) == 0 {
			s.writeError(w, r, errHTTP(http.StatusConflict, "no_placeholders",
				"no call of this turn was pending, so no rendering had placeholders: its results are all in the turn's rendering"))
			return
		}
		if t.Status == turn.StatusRunning || !resolved(t, parked) {
			writeJSON(w, http.StatusAccepted, toTurnWire(t))
			return
		}
		writeJSON(w, http.StatusOK, rq.format.FollowUp(t, parked))
		return
	}
	if !t.Status.Settled() && !(t.Status == turn.StatusWaiting && rq.placeholders) {
		writeJSON(w, http.StatusAccepted, toTurnWire(t))
		return
	}
	var set map[int]bool
	if rq.placeholders && len(parked) > 0 {
		set = make(map[int]bool, len(parked))
		for _, i := range parked {
			set[i] = true
		}
		w.Header().Set("Turnd-Placeholders", strconv.Itoa(len(parked)))
		w.Header().Set("Turnd-Follow-Up", "/v1/sessions/"+t.SessionID+"/turns/"+t.ID+"?"+url.Values{
			"format": {string(rq.format)}, "since": {"placeholder"},
		}.Encode())
	}
	writeJSON(w, http.StatusOK, rq.format.Results(t, set))
}

// parkedCalls is the turn's parked calls, with any call still pending
// without a parked key of this turn (a replayed pending answer) added.
func (s *server) parkedCalls(r *http.Request, t turn.Turn) ([]int, error) {
	parked, err := s.svc.ParkedCalls(r.Context(), turn.TurnKey{SessionID: t.SessionID, TurnID: t.ID})
	if err != nil {
		return nil, err
	}
	in := make(map[int]bool, len(parked))
	for _, i := range parked {
		in[i] = true
	}
	for _, res := range t.Results {
		if res.Status == turn.CallPending && !in[res.Index] {
			in[res.Index] = true
			parked = append(parked, res.Index)
		}
	}
	return parked, nil
}

// resolved reports whether every call at the indexes has a final result
// that is not pending.
func resolved(t turn.Turn, indexes []int) bool {
	status := make(map[int]turn.CallStatus, len(t.Results))
	for _, res := range t.Results {
		status[res.Index] = res.Status
	}
	for _, i := range indexes {
		if st, ok := status[i]; !ok || st == turn.CallPending || !st.Final() {
			return false
		}
	}
	return true
}

// sessionTools lists the registered tools, only those granted to the
// session named by ?session_id when there is one.
func (s *server) sessionTools(r *http.Request) ([]*tool.Spec, error) {
	specs := s.svc.Tools().List()
	q := r.URL.Query()
	if !q.Has("session_id") {
		return specs, nil
	}
	sess, err := s.svc.GetSession(r.Context(), q.Get("session_id"))
	if err != nil {
		return nil, err
	}
	out := specs[:0:0]
	for _, t := range specs {
		if sess.Granted(t.Name) {
			out = append(out, t)
		}
	}
	return out, nil
}

func (s *server) writeProviderTools(w http.ResponseWriter, r *http.Request, specs []*tool.Spec) {
	f, err := provider.ParseFormat(r.URL.Query().Get("format"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	tools := make([]provider.Tool, len(specs))
	for i, t := range specs {
		tools[i] = provider.Tool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema}
	}
	writeJSON(w, http.StatusOK, f.Tools(tools))
}
