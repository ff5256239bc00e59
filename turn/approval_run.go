package turn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/turnd/turnd/completion"
	"github.com/turnd/turnd/dispatch"
	"github.com/turnd/turnd/tool"
)

// The run's side of approvals (see approval.go): the gate that parks a
// call for approval, the approved calls a resumed run executes, and the
// approval.requested webhook of the parks a commit stores.

// closeApproved resolves the keys of the approved calls the wave answered
// (they did not park again), now that their answers are stored: each key
// keeps its decision as its payload. A crash before this leaves the key
// approved, and the turn's next resume closes it (takeApproved).
func (r *run) closeApproved(ctx context.Context) {
	r.mu.Lock()
	aps := r.closeAfter
	r.closeAfter = nil
	r.mu.Unlock()
	for _, ap := range aps {
		r.svc.closeApprovedKey(ctx, r.key, ap)
	}
}

func (s *Service) closeApprovedKey(ctx context.Context, k TurnKey, ap *approvedCall) {
	b := ResolveBatch{Key: k, SettleStatus: StatusCompleted, Now: s.now(), Items: []Resolution{
		{KeyHash: ap.key, Expect: CompletionApproved, Status: CompletionCompleted, Payload: ap.payload, PayloadHash: ap.hash, KeepResult: true},
	}}
	_, err := s.completions.Resolve(ctx, b)
	if errors.Is(err, ErrCompletionState) {
		// A delivery reached the key (early) while the tool ran, and the
		// tool answered without parking: its answer stands, and the key
		// takes no more deliveries.
		b.Items[0].Expect = CompletionEarly
		_, err = s.completions.Resolve(ctx, b)
	}
	if err != nil && !errors.Is(err, ErrCompletionState) {
		s.log.ErrorContext(ctx, "closing the key of an approved call failed; the turn's next resume closes it", "session_id", k.SessionID, "turn_id", k.TurnID, "err", err)
	}
}

// approvedCall is a call of a resumed turn that a person approved: its
// key, and the decision (whose edited arguments the call runs with).
type approvedCall struct {
	key     [32]byte
	payload json.RawMessage
	hash    [32]byte
	args    json.RawMessage // nil: as posted
}

// takeApproved finds the turn's approved calls for a run that resumes it:
// their pending results are dropped from recorded, so that they run.
func (s *Service) takeApproved(ctx context.Context, r *run) error {
	if s.completions == nil {
		return nil
	}
	cs, err := s.completions.TurnCompletions(ctx, r.key)
	if err != nil {
		return fmt.Errorf("reading the turn's completions: %w", err)
	}
	for _, c := range cs {
		if c.Status != CompletionApproved {
			continue
		}
		rec, ok := r.recorded[c.CallIndex]
		var d decided
		if ok && rec.Status.Final() && rec.Status != CallPending {
			// Answered, and stopped before its key was closed.
			s.closeApprovedKey(ctx, r.key, &approvedCall{key: c.KeyHash, payload: c.Payload, hash: c.PayloadHash})
			continue
		}
		if err := json.Unmarshal(c.Payload, &d); err != nil {
			return fmt.Errorf("reading the decision of call %s: %w", c.CallID, err)
		}
		if r.approved == nil {
			r.approved = make(map[int]*approvedCall)
		}
		r.approved[c.CallIndex] = &approvedCall{key: c.KeyHash, payload: c.Payload, hash: c.PayloadHash, args: d.Arguments}
		if !ok || rec.Status == CallPending {
			delete(r.recorded, c.CallIndex) // it runs; a started one is answered as after any crash
		}
		if c.CallIndex >= 0 && c.CallIndex < len(r.calls) {
			r.calls[c.CallIndex].admittedLine = true // written when it parked
		}
	}
	return nil
}

// approvalGate is the tool of a call admitted to wait for approval: it
// takes the call's completion key and parks the call on it, under the
// tool's pending options. Nothing of the call's own tool runs.
type approvalGate struct {
	svc     *Service
	pending completion.Options
}

func (g approvalGate) Invoke(ctx context.Context, call dispatch.Call, at *dispatch.Attempt) dispatch.Outcome {
	if _, err := at.CompletionKey(ctx); err != nil {
		return dispatch.Fail("approval_unavailable", "the call needs approval, but turnd could not park it: "+err.Error())
	}
	r, err := completion.Resolve(g.svc.now(), g.pending, completion.Options{})
	if err != nil {
		return dispatch.Fail("approval_unavailable", "the tool's pending options are invalid: "+err.Error())
	}
	return dispatch.Defer(tool.PendingOf(r)) // dispatch fills in the key it took
}

// approvalNeeded says why call i (of spec, arguments args) must wait for
// approval, or false: its tool's policy or its session's asks, and no
// decision approved it yet.
func (r *run) approvalNeeded(i int, spec *tool.Spec, args json.RawMessage) (string, bool) {
	if _, ok := r.approved[i]; ok {
		return "", false
	}
	return approvalRule(spec, r.session.Approval, args)
}

// approvalRule says why a call of spec with arguments args needs approval,
// or false: the tool's policy asks, or else the session's (nil: none).
func approvalRule(spec *tool.Spec, session *tool.Approval, args json.RawMessage) (string, bool) {
	if why, ok := spec.NeedsApproval(args); ok {
		return why, true
	}
	if session != nil {
		return session.Needs(spec, args)
	}
	return "", false
}

// keyReason is the reason of the key call callID takes: ReasonApproval
// for a call parking for approval.
func (r *run) keyReason(callID string) string {
	if i, ok := r.index[callID]; ok && r.calls[i].approval != "" {
		return ReasonApproval
	}
	return ""
}

// approvalRequest is a call parked for approval, for its webhook.
type approvalRequest struct {
	CallID    string    `json:"call_id"`
	CallIndex int       `json:"call_index"`
	Tool      string    `json:"tool"`
	Deadline  time.Time `json:"deadline"`
	Rule      string    `json:"rule"`
	// CompleteURL is where an approver holding no API token posts the
	// decision: it carries the call's completion key, a credential, sent
	// only to the session's own signed callback.
	CompleteURL string `json:"complete_url"`
}

// EventApprovalRequested is the webhook event of calls parked for
// approval.
const EventApprovalRequested = "approval.requested"

// requestedLocked notes call i, parked for approval on pk, for the
// approval.requested webhook of the commit that stores the park (r.mu
// held).
func (r *run) requestedLocked(i int, call dispatch.Call, pk Park, key, why string) {
	r.approvalParked = true
	if r.session.CallbackURL == "" {
		return
	}
	if r.requested == nil {
		r.requested = make(map[[32]byte]approvalRequest)
	}
	r.requested[pk.KeyHash] = approvalRequest{CallID: call.ID, CallIndex: i, Tool: call.Name, Deadline: pk.Deadline, Rule: why,
		CompleteURL: r.svc.cfg.CompleteURL(key)}
}

// approvalWebhook is the approval.requested webhook of the approvals among
// parks, to the session's callback URL; nil when there are none.
func (r *run) approvalWebhook(parks []Park) *Webhook {
	r.mu.Lock()
	var calls []approvalRequest
	for _, p := range parks {
		if q, ok := r.requested[p.KeyHash]; ok {
			calls = append(calls, q)
		}
	}
	r.mu.Unlock()
	if len(calls) == 0 {
		return nil
	}
	at := r.svc.now().UTC()
	type data struct {
		SessionID string            `json:"session_id"`
		TurnID    string            `json:"turn_id"`
		Approvals []approvalRequest `json:"approvals"`
	}
	return newWebhook(r.key, r.session.CallbackURL, EventApprovalRequested, at, data{r.key.SessionID, r.key.TurnID, calls})
}

// runApproved resumes turn k, claimed at epoch, to run its approved calls;
// a failure leaves it to recovery once its lease expires.
func (s *Service) runApproved(k TurnKey, epoch int) {
	ctx := context.WithoutCancel(s.base)
	if err := s.resume(ctx, k, epoch); err != nil {
		s.log.Error("running an approved call failed; recovery runs it once the turn's lease expires", "session_id", k.SessionID, "turn_id", k.TurnID, "err", err)
	}
}

// continueApproved claims turn k, whose wave just ended waiting, when a
// decision approved one of its calls while the wave ran, and runs it.
func (s *Service) continueApproved(ctx context.Context, k TurnKey) {
	epoch, claimed, err := s.store.ClaimApproved(ctx, k, s.cfg.Owner, s.now().Add(s.cfg.LeaseTTL))
	if err != nil {
		s.log.Error("claiming a turn with approved calls failed; recovery runs them", "session_id", k.SessionID, "turn_id", k.TurnID, "err", err)
		return
	}
	if claimed {
		s.runApproved(k, epoch)
	}
}
