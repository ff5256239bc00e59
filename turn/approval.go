package turn

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/turnd/turnd/completion"
	"github.com/turnd/turnd/dispatch"
	"github.com/turnd/turnd/tool"
)

// Human approval: a call whose tool's policy (or its session's) asks for
// approval is admitted and then parks before its tool runs, on a key
// whose reason is ReasonApproval (the approval gate below). A decision
// resolves it: a rejection answers the call {"rejected": true, "message":
// …}; an approval moves the key to approved and runs the call, with the
// edited arguments if any, in a run of the turn that the deciding process
// claims (or the turn's running wave, once it ends, claims; or recovery,
// after a crash: see resume). See ARCHITECTURE.md, "Approvals".

// Ledger lines of decisions.
const (
	// LineCallDecided records a decision: approved or rejected, by whom,
	// the message, and for edited arguments both the original and the
	// edited ones.
	LineCallDecided LineKind = "call_decided"
	// LineDecisionLate records a decision that arrived after its call's
	// deadline passed or its turn was cancelled.
	LineDecisionLate LineKind = "decision_late"
)

// CallRejected is the status of a call a person rejected: its output is
// {"rejected": true, "message": …}, which the model reads.
const CallRejected CallStatus = "rejected"

// Decisions.
const (
	DecisionApprove = "approve"
	DecisionReject  = "reject"
)

// Bounds of a decision's texts.
const (
	MaxDecisionMessage = 4096
	MaxDecisionBy      = 200
)

// Decision is a person's answer to a call waiting for approval.
type Decision struct {
	// Decision is DecisionApprove or DecisionReject.
	Decision string
	// Arguments, for an approval, replace the call's arguments (they are
	// validated against the tool's schema again); nil runs the call as
	// the model wrote it.
	Arguments json.RawMessage
	// Message is what the model reads of a rejection.
	Message string
	// By names who decided (free text, for the ledger).
	By string
}

// DecisionResult tells the decider what happened.
type DecisionResult struct {
	// Decision is "approved" or "rejected".
	Decision string
	// Status is "accepted", or "already_decided" for a repeat of the
	// decision that won.
	Status string
	Edited bool
	Key    TurnKey
	CallID string
}

// DecisionError is a decision that cannot be taken; Code is stable:
// not_awaiting_approval, already_decided, approval_expired,
// invalid_arguments.
type DecisionError struct {
	Code, Message string
}

func (e *DecisionError) Error() string { return e.Code + ": " + e.Message }

// Decision error codes.
const (
	CodeNotAwaitingApproval = "not_awaiting_approval"
	CodeAlreadyDecided      = "already_decided"
	CodeApprovalExpired     = "approval_expired"
	CodeAwaitingApproval    = "awaiting_approval"
)

// DecideByKey takes a decision delivered to the call's completion key
// (POST /v1/complete/{key} with a decision body), for approvers that hold
// the key rather than the API token.
func (s *Service) DecideByKey(ctx context.Context, rawKey string, d Decision) (DecisionResult, error) {
	if err := checkDecision(d); err != nil {
		return DecisionResult{}, err
	}
	if s.completions == nil {
		return DecisionResult{}, ErrNotFound
	}
	c, err := s.lookupKey(ctx, rawKey)
	if err != nil {
		return DecisionResult{}, err
	}
	return s.decide(ctx, c, d)
}

// decided is a decision as stored: the key's payload.
type decided struct {
	Decision  string          `json:"decision"` // approved or rejected
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Message   string          `json:"message,omitempty"`
	By        string          `json:"by,omitempty"`
}

// checkDecision checks a decision's shape (not yet its arguments against
// the tool).
func checkDecision(d Decision) error {
	switch d.Decision {
	case DecisionApprove:
	case DecisionReject:
		if d.Arguments != nil {
			return invalid("arguments", "go with approve only: a rejected call does not run")
		}
	case "":
		return invalid("decision", "required: approve or reject")
	default:
		return invalid("decision", "%q is not approve or reject", d.Decision)
	}
	if d.Arguments != nil {
		if !json.Valid(d.Arguments) || !isJSONObject(d.Arguments) {
			return invalid("arguments", "must be a JSON object")
		}
		if err := checkJSONText("arguments", d.Arguments); err != nil {
			return err
		}
	}
	if len(d.Message) > MaxDecisionMessage {
		return invalid("message", "%d bytes, more than %d", len(d.Message), MaxDecisionMessage)
	}
	if len(d.By) > MaxDecisionBy {
		return invalid("by", "%d bytes, more than %d", len(d.By), MaxDecisionBy)
	}
	if !utf8.ValidString(d.Message) || !utf8.ValidString(d.By) {
		return invalid("message", "must be valid UTF-8")
	}
	if err := checkText("message", d.Message); err != nil {
		return err
	}
	return checkText("by", d.By)
}

func isJSONObject(b json.RawMessage) bool {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return c == '{'
	}
	return false
}

// stored is the decision as the key keeps it, and its hash: the hash
// leaves out who decided, so that two people taking the same decision are
// one decision.
func (d Decision) stored() (json.RawMessage, [32]byte) {
	st := decided{Decision: d.past(), Message: d.Message}
	if d.Arguments != nil {
		st.Arguments = canonicalJSON(d.Arguments)
	}
	h := sha256.Sum256(mustJSON(st))
	st.By, st.Arguments = d.By, d.Arguments // the tool gets the arguments as the approver wrote them
	return mustJSON(st), h
}

func (d Decision) past() string {
	if d.Decision == DecisionApprove {
		return "approved"
	}
	return "rejected"
}

// Decide takes a decision on call callID of turn k, which must be waiting
// for approval.
func (s *Service) Decide(ctx context.Context, k TurnKey, callID string, d Decision) (DecisionResult, error) {
	if err := checkDecision(d); err != nil {
		return DecisionResult{}, err
	}
	if !validPathID(k.SessionID) || !validPathID(k.TurnID) || s.completions == nil {
		return DecisionResult{}, ErrNotFound
	}
	cs, err := s.completions.TurnCompletions(ctx, k)
	if err != nil {
		return DecisionResult{}, fmt.Errorf("reading the turn's completions: %w", err)
	}
	var found *Completion
	for i := range cs {
		if cs[i].CallID == callID && cs[i].Reason == ReasonApproval {
			found = &cs[i]
		}
	}
	if found == nil {
		t, err := s.store.GetTurn(ctx, k)
		if err != nil {
			return DecisionResult{}, err
		}
		for _, c := range t.Calls {
			if c.ID == callID {
				return DecisionResult{}, &DecisionError{CodeNotAwaitingApproval, fmt.Sprintf("call %q is not waiting for approval", callID)}
			}
		}
		return DecisionResult{}, fmt.Errorf("call %q: %w", callID, ErrNotFound)
	}
	return s.decide(ctx, *found, d)
}

// decide takes decision d, checked (checkDecision), on completion c.
func (s *Service) decide(ctx context.Context, c Completion, d Decision) (DecisionResult, error) {
	k := TurnKey{c.SessionID, c.TurnID}
	payload, hash := d.stored()
	res := DecisionResult{Decision: d.past(), Status: "accepted", Edited: d.Arguments != nil, Key: k, CallID: c.CallID}
	for range 3 {
		switch {
		case c.Reason != ReasonApproval && c.Status != CompletionApproved:
			return DecisionResult{}, &DecisionError{CodeNotAwaitingApproval, fmt.Sprintf("call %q is waiting for its tool's result, not for approval", c.CallID)}
		case c.Status == CompletionIssued:
			return DecisionResult{}, &DecisionError{CodeNotAwaitingApproval, fmt.Sprintf("call %q is being parked for approval; decide again in a moment", c.CallID)}
		case c.Status == CompletionEarly:
			return DecisionResult{}, &DecisionError{CodeNotAwaitingApproval, fmt.Sprintf("call %q was approved and its tool's result has arrived: it waits for no decision", c.CallID)}
		case c.Status == CompletionTimedOut || c.Status == CompletionCancelled:
			s.recordLateDecision(ctx, c, payload, hash)
			return DecisionResult{}, &DecisionError{CodeApprovalExpired, fmt.Sprintf("call %q no longer waits for a decision: it %s; the decision is recorded in the ledger as decision_late", c.CallID, expiredWhy(c.Status))}
		case c.Status == CompletionApproved || c.Status == CompletionCompleted:
			var won decided
			_ = json.Unmarshal(c.Payload, &won)
			if c.PayloadHash == hash {
				res.Status = "already_decided"
				return res, nil
			}
			what := won.Decision
			if what == "" {
				what = "decided"
			}
			return DecisionResult{}, &DecisionError{CodeAlreadyDecided, fmt.Sprintf("call %q was already %s by another decision", c.CallID, what)}
		}
		// Pending for approval.
		if now := s.now(); overdue(c, now) {
			// Its deadline passed before the sweep came by: apply it now.
			if err := s.expire(ctx, c, now); err != nil && !errors.Is(err, ErrCompletionState) {
				s.log.ErrorContext(ctx, "timing out an approval failed", "key", completion.Hash(c.KeyHash).Fingerprint(), "err", err)
			}
			s.recordLateDecision(ctx, c, payload, hash)
			return DecisionResult{}, &DecisionError{CodeApprovalExpired, fmt.Sprintf("call %q no longer waits for a decision: its deadline passed; the decision is recorded in the ledger as decision_late", c.CallID)}
		}
		var err error
		if d.Decision == DecisionApprove {
			err = s.approve(ctx, c, d, payload, hash)
		} else {
			err = s.reject(ctx, c, d, payload, hash)
		}
		if !errors.Is(err, ErrCompletionState) {
			if err != nil {
				return DecisionResult{}, err
			}
			return res, nil
		}
		// Decided, expired or cancelled meanwhile: look again.
		if c, err = s.completions.GetCompletion(ctx, c.SessionID, c.KeyHash); err != nil {
			return DecisionResult{}, fmt.Errorf("reading completion: %w", err)
		}
	}
	return DecisionResult{}, fmt.Errorf("the approval kept changing state: %w", ErrUnavailable)
}

// overdue reports whether one of c's clocks ran out by now.
func overdue(c Completion, now time.Time) bool {
	return (!c.Deadline.IsZero() && !now.Before(c.Deadline)) || (!c.HeartbeatDeadline.IsZero() && !now.Before(c.HeartbeatDeadline))
}

func expiredWhy(st CompletionStatus) string {
	if st == CompletionTimedOut {
		return "timed out"
	}
	return "was cancelled"
}

// decidedLine is the call_decided line, at at, of d on c's call, whose
// arguments as posted are original.
func decidedLine(c Completion, d Decision, original json.RawMessage, at time.Time) Line {
	data := map[string]any{"decision": d.past(), "edited": d.Arguments != nil}
	if d.By != "" {
		data["by"] = d.By
	}
	if d.Message != "" {
		data["message"] = d.Message
	}
	if d.Arguments != nil {
		data["arguments"] = d.Arguments
		if len(original) == 0 {
			original = json.RawMessage(`{}`)
		}
		data["original_arguments"] = original
	}
	return Line{SessionID: c.SessionID, TurnID: c.TurnID, CallID: c.CallID, Kind: LineCallDecided, At: at, Data: mustJSON(data)}
}

// postedArguments reads the arguments of the call c decides, as posted.
func (s *Service) postedArguments(ctx context.Context, c Completion) (json.RawMessage, error) {
	t, err := s.store.GetTurn(ctx, TurnKey{c.SessionID, c.TurnID})
	if err != nil {
		return nil, fmt.Errorf("reading turn: %w", err)
	}
	if c.CallIndex < 0 || c.CallIndex >= len(t.Calls) {
		return nil, fmt.Errorf("completion of call %d of a turn of %d calls: %w", c.CallIndex, len(t.Calls), ErrNotFound)
	}
	return t.Calls[c.CallIndex].Arguments, nil
}

// approve validates d's edited arguments against the tool, stores the
// approval and runs the call (see Approve): at once when the turn was
// waiting, else once its wave ends.
func (s *Service) approve(ctx context.Context, c Completion, d Decision, payload json.RawMessage, hash [32]byte) error {
	k := TurnKey{c.SessionID, c.TurnID}
	var original json.RawMessage // read only for edited arguments, which the line shows beside them
	if d.Arguments != nil {
		spec, ok := s.cfg.Tools().Lookup(c.CallName)
		if !ok {
			return &DecisionError{dispatch.CodeInvalidArguments, fmt.Sprintf("tool %q is no longer registered: its arguments cannot be checked", c.CallName)}
		}
		if _, err := spec.Check(d.Arguments); err != nil {
			return &DecisionError{dispatch.CodeInvalidArguments, err.Error()}
		}
		var err error
		if original, err = s.postedArguments(ctx, c); err != nil {
			return err
		}
	}
	st := s.store
	now := s.now()
	line := decidedLine(c, d, original, now)
	got, err := st.Approve(ctx, Approve{Key: k, KeyHash: c.KeyHash, Decision: payload, DecisionHash: hash,
		Lines: []Line{line}, Owner: s.cfg.Owner, LeaseUntil: now.Add(s.cfg.LeaseTTL)})
	if err != nil {
		return err
	}
	s.log.InfoContext(ctx, "call approved", "session_id", k.SessionID, "turn_id", k.TurnID, "call_id", c.CallID, "edited", d.Arguments != nil, "by", d.By)
	if got.Claimed {
		s.runApproved(k, got.Epoch)
	}
	return nil
}

// reject answers the call {"rejected": true, "message": …} and settles the
// turn when nothing else of it is pending.
func (s *Service) reject(ctx context.Context, c Completion, d Decision, payload json.RawMessage, hash [32]byte) error {
	k := TurnKey{c.SessionID, c.TurnID}
	dt, err := s.completions.GetDelivery(ctx, c.SessionID, c.KeyHash)
	if err != nil {
		return fmt.Errorf("reading completion: %w", err)
	}
	sess, err := s.storedSession(ctx, k.SessionID)
	if err != nil {
		return fmt.Errorf("reading session: %w", err)
	}
	now := s.now()
	res := dt.base()
	res.Status, res.Error, res.FinishedAt = CallRejected, nil, now
	res.Output = mustJSON(map[string]any{"rejected": true, "message": d.Message})
	res.Truncated, res.OriginalBytes, res.OriginalLines, res.OutputID = false, 0, 0, ""
	lines := []Line{
		decidedLine(c, d, nil, now), // a reject carries no arguments
		{SessionID: k.SessionID, TurnID: k.TurnID, CallID: c.CallID, Kind: LineCallAnswered, At: now,
			Data: mustJSON(map[string]any{"status": CallRejected, "completed_by": "decision", "key": completion.Hash(c.KeyHash).Fingerprint()})},
	}
	settled, err := s.completions.Resolve(ctx, ResolveBatch{
		Key:           k,
		Items:         []Resolution{{KeyHash: c.KeyHash, Expect: CompletionPending, Status: CompletionCompleted, Payload: payload, PayloadHash: hash, Result: res}},
		Lines:         lines,
		SettleStatus:  StatusCompleted,
		SettleLines:   []Line{settledLine(k, StatusCompleted, now)},
		SettleWebhook: settledWebhook(sess.CallbackURL, k, StatusCompleted, now),
		Now:           now,
	})
	if err != nil {
		return err
	}
	s.log.InfoContext(ctx, "call rejected", "session_id", k.SessionID, "turn_id", k.TurnID, "call_id", c.CallID, "by", d.By)
	if settled {
		s.observeSettled(StatusCompleted, dt.TurnCreatedAt)
	}
	return nil
}

// recordLateDecision records a decision that came too late as a
// decision_late line, once per distinct decision.
func (s *Service) recordLateDecision(ctx context.Context, c Completion, payload json.RawMessage, hash [32]byte) {
	ctx = context.WithoutCancel(ctx)
	k := TurnKey{c.SessionID, c.TurnID}
	fp := completion.Hash(c.KeyHash).Fingerprint()
	l := Late{KeyHash: c.KeyHash, PayloadHash: hash, Max: MaxLateLines,
		Line: Line{SessionID: k.SessionID, TurnID: k.TurnID, CallID: c.CallID, Kind: LineDecisionLate, At: s.now(),
			Data: mustJSON(map[string]any{"status": c.Status, "key": fp, "decision": payload})}}
	if _, err := s.completions.RecordLate(ctx, k, l); err != nil {
		s.log.ErrorContext(ctx, "recording a late decision failed", "key", fp, "err", err)
	}
}

// Approval is a call waiting for a decision, as listed: its parked key's
// row, the call's arguments as posted, and the rule of the current policy
// that asks for it ("" when the policy no longer does).
type Approval struct {
	ParkedCall
	Arguments json.RawMessage
	Rule      string
}

// ListApprovals returns a page of the calls waiting for approval across
// sessions, newest first.
func (s *Service) ListApprovals(ctx context.Context, after Cursor, limit int) ([]Approval, error) {
	if err := checkList(limit); err != nil {
		return nil, err
	}
	if _, _, _, ok := SplitParkedID(after.ID); !after.IsZero() && !ok {
		return nil, invalid("after", "is not a cursor of the approvals listing")
	}
	rows, err := s.store.ListApprovals(ctx, after, limit)
	if err != nil {
		return nil, fmt.Errorf("listing approvals: %w", err)
	}
	reg := s.cfg.Tools()
	for i := range rows {
		a := &rows[i]
		spec, ok := reg.Lookup(a.CallName)
		if !ok {
			continue
		}
		var policy *tool.Approval // the session's own (its row is cached)
		if sess, err := s.storedSession(ctx, a.SessionID); err == nil {
			policy = sess.Approval
		}
		a.Rule, _ = approvalRule(spec, policy, a.Arguments)
	}
	return rows, nil
}

// sessionApproval reads a session's approval policy: nil for none (or
// "never"); a tool it names must be registered.
func sessionApproval(reg *tool.Registry, raw json.RawMessage) (*tool.Approval, error) {
	a, err := tool.ParseApproval(raw)
	if err != nil {
		return nil, invalid("approval", "%v", err)
	}
	if a.IsZero() {
		return nil, nil
	}
	for i, name := range a.Tools {
		if _, ok := reg.Lookup(name); !ok {
			return nil, invalid(fmt.Sprintf("approval.tools[%d]", i), "unknown tool %q", name)
		}
	}
	return &a, nil
}
