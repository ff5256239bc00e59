package turn

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/turnd/turnd/budget"
	"github.com/turnd/turnd/completion"
	"github.com/turnd/turnd/dispatch"
)

// What a delivery names and carries: issuing a call's completion key,
// finding a completion by the key a delivery names (routed to its session,
// or a legacy key by its hash; see ARCHITECTURE.md, "Sharding by
// session"), and the delivered payload's identity.

// keyIssuer issues completion keys for one run's calls.
type keyIssuer struct{ r *run }

// IssueKey implements dispatch.KeyIssuer: the key is derived from the
// call's identity, so a retry or a resumed turn gets the same key; only its
// hash is recorded, before the tool can hand it to anyone.
func (k keyIssuer) IssueKey(ctx context.Context, call dispatch.Call) (string, error) {
	r := k.r
	s := r.svc
	if s.keys == nil || s.completions == nil {
		return "", ErrCompletionsDisabled
	}
	// The key's row refers to the turn: record it first (a no-op once it is).
	if err := r.ensureRecorded(context.WithoutCancel(ctx)); err != nil {
		return "", fmt.Errorf("recording turn before its completion key: %w", err)
	}
	key := s.keys.Key(r.key.SessionID, r.key.TurnID, call.ID)
	if r.resumed {
		key = s.resumedKey(context.WithoutCancel(ctx), r.key, call.ID, key)
	}
	c := Completion{
		KeyHash:   key.Hash(),
		SessionID: r.key.SessionID,
		TurnID:    r.key.TurnID,
		CallIndex: r.index[call.ID],
		CallID:    call.ID,
		CallName:  call.Name,
		Status:    CompletionIssued,
		Reason:    r.keyReason(call.ID),
		CreatedAt: s.now(),
	}
	r.mu.Lock()
	if r.keyed == nil {
		r.keyed = make(map[int]Completion)
	}
	r.keyed[c.CallIndex] = c
	r.mu.Unlock()
	err := s.completions.IssueCompletion(context.WithoutCancel(ctx), c)
	if err != nil {
		return "", fmt.Errorf("recording completion key: %w", err)
	}
	return string(key), nil
}

// resumedKey is the key of a call of a resumed turn: the call's legacy key
// when a release before routed keys issued it one (the row of its hash is
// the turn's), so that the key the call's earlier attempt may have handed
// out stays the call's; else key. Only resumed turns can hold such a row,
// and a failed read keeps key.
func (s *Service) resumedKey(ctx context.Context, k TurnKey, callID string, key completion.Key) completion.Key {
	legacy := s.keys.LegacyKey(k.SessionID, k.TurnID, callID)
	cs, err := s.completions.TurnCompletions(ctx, k)
	if err != nil {
		return key
	}
	for _, c := range cs {
		if c.CallID == callID && legacy.Hash().Equal(c.KeyHash) {
			return legacy
		}
	}
	return key
}

// lookupKey finds a completion by the raw key from a URL: in the session
// the key routes to, or by the hash alone for a legacy key (or a string
// with no valid route). Malformed, unknown and tampered keys — a changed
// route among them, which hashes to no key of the session it names — take
// the same path (hash, look up) and end in the same ErrNotFound.
func (s *Service) lookupKey(ctx context.Context, raw string) (Completion, error) {
	return lookupBy(s, raw, func(sid string, h [32]byte) (Completion, error) {
		return s.completions.GetCompletion(ctx, sid, h)
	})
}

// lookupDelivery is lookupKey reading what a delivery needs of the key's
// turn too (CompletionStore.GetDelivery).
func (s *Service) lookupDelivery(ctx context.Context, raw string) (DeliveryTarget, error) {
	return lookupBy(s, raw, func(sid string, h [32]byte) (DeliveryTarget, error) {
		return s.completions.GetDelivery(ctx, sid, h)
	})
}

// lookupBy is lookupKey's path, reading the key's row with get.
func lookupBy[T any](s *Service, raw string, get func(sid string, h [32]byte) (T, error)) (T, error) {
	var zero T
	if s.completions == nil {
		return zero, ErrNotFound
	}
	h := completion.HashOf(raw)
	sid, _ := completion.Route(raw)
	c, err := get(sid, h)
	_, perr := completion.ParseKey(raw)
	if err != nil {
		return zero, fmt.Errorf("reading completion: %w", err)
	}
	if perr != nil {
		return zero, ErrNotFound
	}
	return c, nil
}

// payloadHash identifies a delivery regardless of its JSON formatting, to
// tell an identical repeat from a different payload.
func payloadHash(d Delivery) [32]byte {
	if d.Error == nil && len(d.Output) > 0 {
		// As encoding/json writes the struct below when the canonical
		// output needs nothing of it (plainJSON), without its reflection.
		if c := canonicalJSON(d.Output); plainJSON(c) {
			return sha256.Sum256(outputObject(c))
		}
	}
	v := struct {
		Output json.RawMessage `json:"output,omitempty"`
		Error  *CallError      `json:"error,omitempty"`
	}{Error: d.Error}
	if len(d.Output) > 0 {
		v.Output = canonicalJSON(d.Output)
	}
	b, _ := json.Marshal(v)
	return sha256.Sum256(b)
}

// deliveryPayload is the payload a delivery keeps: {"output": …} or
// {"error": …}, as encoding/json writes that map. An output that is
// already as encoding/json would write it (compact, nothing it escapes) is
// written as it is.
func deliveryPayload(d Delivery) json.RawMessage {
	if d.Error != nil {
		return mustJSON(map[string]any{"error": d.Error})
	}
	if !plainJSON(d.Output) {
		return mustJSON(map[string]any{"output": d.Output})
	}
	return outputObject(d.Output)
}

// outputObject is {"output": raw} for raw as encoding/json writes it
// (plainJSON), as encoding/json would write that object.
func outputObject(raw json.RawMessage) json.RawMessage {
	b := make([]byte, 0, len(`{"output":}`)+len(raw))
	b = append(b, `{"output":`...)
	b = append(b, raw...)
	return append(b, '}')
}

// plainJSON reports whether raw, valid JSON, is as encoding/json would
// write it: no whitespace, and none of the bytes it escapes in strings
// (<, >, &, and U+2028 and U+2029, which start with 0xE2).
func plainJSON(raw json.RawMessage) bool {
	for _, c := range raw {
		switch c {
		case ' ', '\t', '\n', '\r', '<', '>', '&', 0xE2:
			return false
		}
	}
	return len(raw) > 0
}

// Complete delivers the one final result of a deferred call.
func (s *Service) Complete(ctx context.Context, rawKey string, in Delivery) (res DeliveryResult, err error) {
	defer func() { s.observeDelivery(res, err) }()
	if (len(in.Output) == 0) == (in.Error == nil) {
		return DeliveryResult{}, invalid("", "exactly one of output and error is required")
	}
	if in.Error != nil && in.Error.Code == "" {
		return DeliveryResult{}, invalid("error.code", "required")
	}
	if len(in.Output) > 0 && !json.Valid(in.Output) {
		return DeliveryResult{}, invalid("output", "not valid JSON")
	}
	if err := checkJSONText("output", in.Output); err != nil {
		return DeliveryResult{}, err
	}
	if in.Error != nil {
		if err := checkText("error.code", in.Error.Code); err != nil {
			return DeliveryResult{}, err
		}
		if err := checkText("error.message", in.Error.Message); err != nil {
			return DeliveryResult{}, err
		}
	}
	pk, ok := s.parked.take(completion.HashOf(rawKey))
	d, sess := pk.target, pk.session
	if !ok {
		if d, err = s.lookupDelivery(ctx, rawKey); err != nil {
			return DeliveryResult{}, err
		}
	}
	c := d.Completion
	defer s.delivering(ctx, c)(&res, &err)
	hash, payload := payloadHash(in), deliveryPayload(in)
	approved := false // the key was approved: its call's run is under way
	// reread reads the key again, with its call's result as it is now, after
	// a write found it changed (parked, resolved) meanwhile.
	reread := func() error {
		var err error
		if d, err = s.completions.GetDelivery(ctx, c.SessionID, c.KeyHash); err != nil {
			return fmt.Errorf("reading completion: %w", err)
		}
		c = d.Completion
		return nil
	}
	for range 3 {
		switch c.Status {
		case CompletionIssued:
			if c.Reason == ReasonApproval && !approved {
				return DeliveryResult{Recorded: c.Status}, &DecisionError{CodeAwaitingApproval, "the call waits for approval: post a decision, not a result"}
			}
			c, err = s.completions.DeliverEarly(ctx, c.SessionID, c.KeyHash, payload, hash, s.now())
			if errors.Is(err, ErrCompletionState) {
				if err := reread(); err != nil {
					return DeliveryResult{}, err
				}
				continue // parked or resolved meanwhile: decide again
			}
			if err != nil {
				return DeliveryResult{}, fmt.Errorf("keeping an early completion: %w", err)
			}
			if !approved {
				s.applyEarly(ctx, TurnKey{c.SessionID, c.TurnID})
			} // else the run of the approved call applies it once the call re-parks
			return DeliveryResult{Status: "accepted", Recorded: CompletionEarly}, nil
		case CompletionEarly, CompletionCompleted:
			if c.PayloadHash == hash {
				return DeliveryResult{Status: "already_completed", Recorded: c.Status}, nil
			}
			return DeliveryResult{Recorded: c.Status}, ErrCompletionConflict
		case CompletionTimedOut, CompletionCancelled:
			s.recordLate(ctx, c, in, hash)
			return DeliveryResult{Recorded: c.Status}, ErrCompletionGone
		case CompletionApproved:
			if spec, ok := s.cfg.Tools().Lookup(c.CallName); ok && spec.Deferred {
				// The approved call's tool handed out the key, and the
				// result came before its pending answer: kept as early.
				c.Status, approved = CompletionIssued, true
				continue
			}
			return DeliveryResult{Recorded: c.Status}, &DecisionError{CodeAlreadyDecided, "the call was approved and its tool is running: it delivers its result itself"}
		case CompletionPending:
			if c.Reason == ReasonApproval {
				return DeliveryResult{Recorded: c.Status}, &DecisionError{CodeAwaitingApproval, `the call waits for approval: post a decision ({"decision": "approve"} or {"decision": "reject", "message": ...}), not a result`}
			}
			d.Completion = c
			err = s.resolveDelivered(ctx, d, sess, payload, hash, CompletionPending)
			if errors.Is(err, ErrCompletionState) {
				if err := reread(); err != nil {
					return DeliveryResult{}, err
				}
				continue
			}
			if err != nil {
				return DeliveryResult{}, err
			}
			return DeliveryResult{Status: "accepted", Recorded: CompletionCompleted}, nil
		default:
			return DeliveryResult{}, fmt.Errorf("completion in unknown status %q", c.Status)
		}
	}
	return DeliveryResult{}, fmt.Errorf("completion kept changing state: %w", ErrUnavailable)
}

// recordLate records a delivery to a timed-out or cancelled key as a
// completion_late line, once per distinct payload (hash) and for at most
// MaxLateLines payloads of the key. The line holds the payload projected by
// the session's budget, as a call's output is, and the full payload is kept
// as an output when the projection cut it.
func (s *Service) recordLate(ctx context.Context, c Completion, d Delivery, hash [32]byte) {
	ctx = context.WithoutCancel(ctx)
	fp := completion.Hash(c.KeyHash).Fingerprint()
	k := TurnKey{c.SessionID, c.TurnID}
	sess, err := s.storedSession(ctx, k.SessionID)
	if err != nil {
		s.log.ErrorContext(ctx, "recording a late completion failed: reading its session", "key", fp, "err", err)
		return
	}
	res := Result{CallID: c.CallID}
	out := s.project(k, projectorFor(s, sess), &res, dispatch.OK(deliveryPayload(d), true))
	data := map[string]any{"status": c.Status, "key": fp, "payload": res.Output,
		"truncated": res.Truncated, "original_bytes": res.OriginalBytes}
	l := Late{KeyHash: c.KeyHash, PayloadHash: hash, Max: MaxLateLines}
	if out != nil {
		data["output_id"] = out.ID
		l.Outputs = []Output{*out}
	}
	l.Line = Line{SessionID: k.SessionID, TurnID: k.TurnID, CallID: c.CallID, Kind: LineCompletionLate, At: s.now(), Data: mustJSON(data)}
	outcome, err := s.completions.RecordLate(ctx, k, l)
	switch {
	case err != nil:
		s.log.ErrorContext(ctx, "recording a late completion failed", "key", fp, "err", err)
	case outcome == LateDropped:
		s.log.WarnContext(ctx, "late completion not recorded: its key has the most late payloads recorded", "key", fp, "max", MaxLateLines)
	case outcome == LateRepeated:
		s.log.DebugContext(ctx, "late completion already recorded", "key", fp)
	}
}

// resolveDelivered applies a delivered payload to a parked (or early)
// completion d: the output is budgeted by the session's projector, the
// result row replaced, and the turn settled when it was its last pending
// call. known is d's session when the caller has it (nil: read it).
func (s *Service) resolveDelivered(ctx context.Context, d DeliveryTarget, known *Session, payload json.RawMessage, hash [32]byte, expect CompletionStatus) error {
	c := d.Completion
	k := TurnKey{c.SessionID, c.TurnID}
	var sess Session
	if known != nil {
		sess = *known
	} else {
		var err error
		if sess, err = s.storedSession(ctx, k.SessionID); err != nil {
			return fmt.Errorf("reading session: %w", err)
		}
	}
	now := s.now()
	res, outs, line, err := s.deliveredResult(d, sess, payload, now)
	if err != nil {
		return err
	}
	settled, err := s.completions.Resolve(ctx, ResolveBatch{
		Key:           k,
		Items:         []Resolution{{KeyHash: c.KeyHash, Expect: expect, Status: CompletionCompleted, Payload: payload, PayloadHash: hash, Result: res, Outputs: outs}},
		Lines:         []Line{line},
		SettleStatus:  StatusCompleted,
		SettleLines:   []Line{settledLine(k, StatusCompleted, now)},
		SettleWebhook: settledWebhook(sess.CallbackURL, k, StatusCompleted, now),
		Now:           now,
	})
	if err != nil {
		return fmt.Errorf("resolving completion: %w", err)
	}
	if settled {
		s.observeSettled(StatusCompleted, d.TurnCreatedAt)
	}
	return nil
}

// deliveredResult is the result a delivered payload ({output} or {error})
// gives the call of completion d, its kept outputs, and its call_answered
// line.
func (s *Service) deliveredResult(d DeliveryTarget, sess Session, payload json.RawMessage, now time.Time) (Result, []Output, Line, error) {
	c := d.Completion
	k := TurnKey{c.SessionID, c.TurnID}
	base := d.base()
	base.FinishedAt = now
	res, out, err := s.applyPayload(k, s.completionProjector(sess, d.Calls, base.Name), base, payload)
	if err != nil {
		return Result{}, nil, Line{}, err
	}
	var outs []Output
	if out != nil {
		outs = append(outs, *out)
	}
	line := Line{SessionID: k.SessionID, TurnID: k.TurnID, CallID: c.CallID, Kind: LineCallAnswered, At: now,
		Data: answeredByKey(res, completion.Hash(c.KeyHash).Fingerprint())}
	return res, outs, line, nil
}

// answeredByKey is the data of the call_answered line of res, delivered to
// the key of fingerprint fp: {"completed_by", "error", "key", "status",
// "truncated"}, as encoding/json writes that map. Written as it is when the
// call has no error (every delivered output), encoded otherwise.
func answeredByKey(res Result, fp string) json.RawMessage {
	if res.Error != nil {
		return mustJSON(map[string]any{"status": res.Status, "completed_by": "key", "key": fp,
			"truncated": res.Truncated, "error": res.Error})
	}
	b := make([]byte, 0, 96)
	b = append(b, `{"completed_by":"key","error":null,"key":`...)
	b = appendJSONString(b, fp)
	b = append(b, `,"status":`...)
	b = appendJSONString(b, string(res.Status))
	b = append(b, `,"truncated":`...)
	b = strconv.AppendBool(b, res.Truncated)
	return append(b, '}')
}

// applyPayload returns base answered by a delivered payload ({output} or
// {error}): the output projected by proj (with the full output to keep
// when it was cut), or the error.
func (s *Service) applyPayload(k TurnKey, proj *budget.Projector, base Result, payload json.RawMessage) (Result, *Output, error) {
	var d struct {
		Output json.RawMessage `json:"output"`
		Error  *CallError      `json:"error"`
	}
	if err := json.Unmarshal(payload, &d); err != nil {
		return Result{}, nil, fmt.Errorf("decoding completion payload: %w", err)
	}
	res := base
	res.Output, res.Error, res.Truncated, res.OriginalBytes, res.OriginalLines, res.OutputID, res.Repaired = nil, nil, false, 0, 0, "", 0
	if d.Error != nil {
		res.Status, res.Error = CallFailed, d.Error
		return res, nil, nil
	}
	res.Status = CallOK
	return res, s.project(k, proj, &res, dispatch.OK(d.Output, true)), nil
}
