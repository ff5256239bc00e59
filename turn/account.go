package turn

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/turnd/turnd/budget"
	"github.com/turnd/turnd/dispatch"
	"github.com/turnd/turnd/tool"
)

// Account implements dispatch.Host: it turns the call's outcome into its
// result and ledger lines, in call order, into the commit buffer.
func (r *run) Account(_ context.Context, a dispatch.Accounted) error {
	i := a.Index
	var st *callState
	if i >= 0 && i < len(r.calls) {
		st = &r.calls[i]
	} else {
		st = &callState{}
	}
	if st.silent {
		// Accounted before a resume: its result and lines are recorded.
		res := r.recorded[i]
		r.spendRecorded(res)
		r.turn.Results = append(r.turn.Results, res)
		r.mu.Lock()
		r.accounted = i + 1
		r.mu.Unlock()
		if st.holds {
			// Calls after it may wait long for its completion: what the
			// resume wrote so far (turn_resumed) is recorded now.
			return r.commitBuffered(r.ctx)
		}
		return nil
	}
	if e := st.early; e != nil && a.Attempts > 0 {
		// Attempt 1 waited for the early run (stream.go), so e is done.
		a = e.startedFirst(a)
	}
	res := r.resultOf(a)
	res.ReplayedFrom = st.replayedFrom
	var out *Output
	if a.Verdict == dispatch.Run && a.Outcome.Status != dispatch.StatusRefused {
		out = r.projectCall(st.spec, &res, a.Outcome)
	} else {
		r.spendRecorded(res)
	}
	r.mu.Lock()
	if ap := r.approved[i]; ap != nil && res.Status != CallPending {
		// Its key is closed once its answer is stored (settled).
		r.closeAfter = append(r.closeAfter, ap)
		delete(r.keyed, i)
	}
	if kc, keyed := r.keyed[i]; keyed && a.Verdict == dispatch.Run && res.Status != CallPending {
		// Closing the key reads and writes the store: not under mu.
		r.mu.Unlock()
		res, out = r.closeKey(kc.KeyHash, res, out)
		r.mu.Lock()
	}
	defer r.observeAccounted(a, res.Status)
	if st.stash != nil {
		r.unstashLocked(i)
	}
	switch {
	case st.replayedFrom != "":
		r.bufferLocked(Line{CallID: res.CallID, Kind: LineCallReplayed, Data: mustJSON(map[string]any{
			"from_turn": st.replayedFrom, "status": res.Status,
		})})
	case res.Status == CallRefused:
		r.bufferLocked(Line{CallID: res.CallID, Kind: LineCallRefused, Data: mustJSON(res.Error)})
	case !a.Admitted:
		// Cancelled before admission: no call_admitted line.
		r.bufferLocked(Line{CallID: res.CallID, Kind: LineCallAnswered, Data: answeredData(res, nil)})
	default:
		if !st.admittedLine {
			st.admittedLine = true
			r.bufferLocked(admittedLine(a.Call, i, a.Effect, a.Resources))
		}
		if res.Status == CallPending {
			r.parked = true
			pk, data := r.svc.park(a.Outcome, r.svc.now())
			if st.approval != "" {
				data["reason"], data["rule"] = ReasonApproval, st.approval
				r.requestedLocked(i, a.Call, pk, a.Outcome.Pending.Key, st.approval)
			}
			r.pending.Parks = append(r.pending.Parks, pk)
			r.bufferLocked(Line{CallID: res.CallID, Kind: LineCallPending, Data: mustJSON(data)})
		} else {
			var times *answerTimes
			if a.Tries != nil || st.timed {
				times = &answerTimes{tries: a.Tries}
				if st.timed {
					times.admitted, times.ready, times.gated = a.AdmittedAt, a.ReadyAt, a.GatedAt
				}
			}
			data := answeredData(res, times)
			r.bufferLocked(Line{CallID: res.CallID, Kind: LineCallAnswered, Data: data})
		}
	}
	r.pending.Results = append(r.pending.Results, res)
	if out != nil {
		r.pending.Outputs = append(r.pending.Outputs, *out)
	}
	r.accounted = i + 1
	r.mu.Unlock()
	r.turn.Results = append(r.turn.Results, res)
	if res.Status == CallPending && a.Resources != nil && r.released != nil {
		// Calls after it may wait for its resources: record the park now.
		r.hold(i)
		return r.commitPark(r.ctx, i)
	}
	if res.Status == CallPending && st.approval != "" && i < len(r.calls)-1 {
		// Later calls may run long: the approval is listed, and can be
		// decided, now rather than when the wave ends.
		return r.commitPark(r.ctx, i)
	}
	return nil
}

// The data of call_admitted and call_answered lines, the lines of every
// call: structs rather than maps, whose encoding sorts keys at run time.
// Fields are in key order, so the bytes are those a map would give.
// The ledger lines' data are written by hand, as json.Marshal wrote them
// from structs before (the tests hold them to it): this runs for every call.

func admittedLine(call dispatch.Call, index int, effect dispatch.Effect, res []string) Line {
	b := make([]byte, 0, 40+len(effect)+len(call.Name))
	b = append(b, `{"effect":`...)
	b = appendJSONString(b, string(effect))
	b = append(b, `,"index":`...)
	b = strconv.AppendInt(b, int64(index), 10)
	b = append(b, `,"name":`...)
	b = appendJSONString(b, call.Name)
	b = appendResources(b, res)
	return Line{CallID: call.ID, Kind: LineCallAdmitted, Data: append(b, '}')}
}

func answeredData(res Result, at *answerTimes) json.RawMessage {
	if at == nil {
		at = &noTimes
	}
	b := make([]byte, 0, 64+112*len(at.tries))
	b = append(b, '{')
	if !at.admitted.IsZero() {
		b = append(b, `"admitted_at":"`...)
		b = at.admitted.UTC().AppendFormat(b, time.RFC3339Nano)
		b = append(b, `",`...)
	}
	if at.tries != nil {
		b = appendTries(b, at.tries)
	}
	b = append(b, `"attempts":`...)
	b = strconv.AppendInt(b, int64(res.Attempts), 10)
	if res.Error != nil {
		b = append(b, `,"error":{"code":`...)
		b = appendJSONString(b, res.Error.Code)
		b = append(b, `,"message":`...)
		b = appendJSONString(b, res.Error.Message)
		b = append(b, '}')
	}
	b = appendStamp(b, "gated_at", at.gated)
	if res.Truncated {
		b = append(b, `,"original_bytes":`...)
		b = strconv.AppendInt(b, res.OriginalBytes, 10)
		b = append(b, `,"original_lines":`...)
		b = strconv.AppendInt(b, res.OriginalLines, 10)
	}
	if res.OutputID != "" {
		b = append(b, `,"output_id":`...)
		b = appendJSONString(b, res.OutputID)
	}
	if res.Repaired > 0 {
		b = append(b, `,"output_repaired":`...)
		b = strconv.AppendInt(b, int64(res.Repaired), 10)
	}
	if res.Projection != nil {
		b = appendProjection(b, res.Projection)
	}
	b = appendStamp(b, "ready_at", at.ready)
	b = append(b, `,"status":`...)
	b = appendJSONString(b, string(res.Status))
	if res.Truncated {
		b = append(b, `,"truncated":true`...)
	}
	return append(b, '}')
}

// answerTimes are what a call_answered line says of its call's times
// besides its result: a retried call's attempts (attempt_times: each
// attempt's finished_at, outcome and started_at; a call tried once has
// none, so its line is as it always was), and a keyed or capped call's
// waits (admitted_at, ready_at, gated_at; the zero ones left out).
type answerTimes struct {
	tries                  []dispatch.Try
	admitted, ready, gated time.Time
}

// noTimes is the answerTimes of a plain call, tried once.
var noTimes answerTimes

// appendTries writes a retried call's "attempt_times" member and a comma.
func appendTries(b []byte, tries []dispatch.Try) []byte {
	b = append(b, `"attempt_times":[`...)
	for i, t := range tries {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"finished_at":"`...)
		b = t.FinishedAt.UTC().AppendFormat(b, time.RFC3339Nano)
		b = append(b, `","outcome":`...)
		b = appendJSONString(b, tryOutcome(t))
		b = append(b, `,"started_at":"`...)
		b = t.StartedAt.UTC().AppendFormat(b, time.RFC3339Nano)
		b = append(b, `"}`...)
	}
	return append(b, "],"...)
}

// appendStamp writes `,"key":"time"`, nothing for a zero time.
func appendStamp(b []byte, key string, t time.Time) []byte {
	if t.IsZero() {
		return b
	}
	b = append(append(append(b, `,"`...), key...), `":"`...)
	b = t.UTC().AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// tryOutcome is how an attempt ended, as attempt_times says it: ok,
// pending, timed_out, cancelled, or its error's code.
func tryOutcome(t dispatch.Try) string {
	switch {
	case t.Status == dispatch.StatusOK:
		return "ok"
	case t.Status == dispatch.StatusPending:
		return "pending"
	case t.Err != nil && t.Err.TimedOut:
		return "timed_out"
	case t.Status == dispatch.StatusCancelled:
		return "cancelled"
	case t.Err != nil && t.Err.Code != "":
		code, _ := repairString(t.Err.Code) // a tool's text (repair.go)
		return code
	}
	return "error"
}

// resultOf maps an accounted outcome to a result (without its output).
func (r *run) resultOf(a dispatch.Accounted) Result {
	res := Result{
		Index:      a.Index,
		CallID:     a.Call.ID,
		Name:       a.Call.Name,
		Effect:     a.Effect,
		Attempts:   a.Attempts,
		StartedAt:  a.StartedAt.UTC(),
		FinishedAt: a.FinishedAt.UTC(),
	}
	if res.Effect == "" {
		res.Effect = dispatch.EffectWrite
	}
	o := a.Outcome
	switch o.Status {
	case dispatch.StatusOK:
		res.Status = CallOK
	case dispatch.StatusPending:
		res.Status = CallPending
	case dispatch.StatusRefused:
		res.Status = CallRefused
	case dispatch.StatusCancelled:
		res.Status = CallCancelled
	default:
		res.Status = CallFailed
	}
	if o.Err != nil {
		// A tool's error is text a store must hold too (repair.go).
		code, n1 := repairString(o.Err.Code)
		msg, n2 := repairString(o.Err.Message)
		res.Repaired += n1 + n2
		e := &CallError{Code: code, Message: msg}
		if o.Status == dispatch.StatusError && o.Err.Retryable {
			// The retry policy ran out on an error worth retrying.
			e.Code = "tool_unavailable"
			e.Message = fmt.Sprintf("%s (after %d attempts)", o.Err.Message, a.Attempts)
		}
		res.Error = e
	}
	if a.Verdict == dispatch.Replay {
		// A replayed outcome carries its recorded projection in Detail.
		if rec, ok := o.Detail.(Result); ok {
			res.Status = rec.Status
			res.Error = rec.Error
			res.Output = rec.Output
			res.Truncated = rec.Truncated
			res.OriginalBytes = rec.OriginalBytes
			res.OriginalLines = rec.OriginalLines
			res.OutputID = rec.OutputID
			res.Attempts = rec.Attempts
			res.StartedAt = rec.StartedAt
			res.FinishedAt = rec.FinishedAt
			if rec.Effect != "" {
				res.Effect = rec.Effect
			}
		}
	}
	if res.Status == CallRefused || res.Status == CallCancelled {
		if res.StartedAt.IsZero() {
			res.FinishedAt = time.Time{}
		}
	}
	return res
}

// project budgets the outcome's output into res with proj and returns the
// full output of turn k to keep when it was truncated (a prefix of it when
// it exceeded the keep cap).
func (s *Service) project(k TurnKey, proj *budget.Projector, res *Result, o dispatch.Outcome) *Output {
	var (
		pr    budget.Result
		full  []byte
		ctype string
	)
	switch d := o.Detail.(type) {
	case *tool.Projected:
		pr, full, ctype = d.Result, d.Full, d.ContentType
		if d.Stream != nil {
			pr = d.Stream.ResultWithin(proj.Config().Limit) // the turn budget's share
		}
		if ctype == "" {
			ctype = "text/plain; charset=utf-8"
		}
	default:
		if o.Output == nil {
			return nil
		}
		full = o.Output
		if o.JSON {
			ctype = "application/json"
			var err error
			pr, err = proj.ProjectJSON(o.Output)
			if err != nil {
				// Not JSON after all: budget it as text.
				pr = proj.Project(o.Output)
				ctype = "text/plain; charset=utf-8"
			}
		} else {
			ctype = "text/plain; charset=utf-8"
			pr = proj.Project(o.Output)
		}
	}
	// The tool boundary: nothing a store cannot hold goes further (repair.go).
	if pr.JSON {
		text, n := repairJSON(pr.Text)
		res.Output = json.RawMessage(text)
		res.Repaired += n
	} else {
		text, n := repairText(pr.Text)
		res.Output = mustJSON(string(text))
		res.Repaired += n
	}
	if n := res.Repaired; n > 0 {
		s.log.Warn("tool output repaired: invalid UTF-8 or NUL replaced by U+FFFD", "session_id", k.SessionID, "turn_id", k.TurnID, "call_id", res.CallID, "tool", res.Name, "replaced", n)
	}
	res.Truncated = pr.Truncated
	res.OriginalBytes = pr.OriginalBytes
	noteProjection(res, proj, pr)
	s.observeProjection(pr)
	res.OriginalLines = pr.OriginalLines
	if !pr.Truncated {
		return nil
	}
	if keep := s.cfg.OutputKeepCap; int64(len(full)) > keep {
		full = full[:keep]
	}
	now := s.now()
	id := outputID(k.SessionID)
	res.OutputID = id
	return &Output{
		ID: id, SessionID: k.SessionID, TurnID: k.TurnID, CallID: res.CallID,
		ContentType: ctype, Data: full, CreatedAt: now, ExpiresAt: now.Add(s.cfg.OutputRetention),
	}
}

// outcomeOf turns a recorded result back into an outcome for replay; the
// result itself rides in Detail so that Account copies its projection.
func outcomeOf(rec Result) dispatch.Outcome {
	o := dispatch.Outcome{Detail: rec}
	switch rec.Status {
	case CallOK:
		o.Status = dispatch.StatusOK
	case CallPending:
		o.Status = dispatch.StatusPending
	case CallRefused:
		o.Status = dispatch.StatusRefused
	case CallCancelled:
		o.Status = dispatch.StatusCancelled
	default:
		o.Status = dispatch.StatusError
	}
	if rec.Error != nil {
		o.Err = &dispatch.Error{Code: rec.Error.Code, Message: rec.Error.Message}
	}
	return o
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("turn: marshalling ledger data: %v", err))
	}
	return b
}
