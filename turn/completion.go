package turn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/turnd/turnd/completion"
	"github.com/turnd/turnd/dispatch"
)

// Completion errors the api maps to status codes.
var (
	// ErrCompletionConflict: a different payload arrived for a key already
	// completed.
	ErrCompletionConflict = errors.New("completion key already completed with a different payload")
	// ErrCompletionGone: the key's call timed out or was cancelled before
	// the payload arrived; the payload is recorded as completion_late.
	ErrCompletionGone = errors.New("completion key no longer accepts results")
	// ErrCompletionsDisabled: the store keeps no completion keys.
	ErrCompletionsDisabled = errors.New("deferred completion is not available on this store")
)

// LineCompletionLate records a payload that arrived after its key was
// resolved by a timeout or a cancellation, for audit and compensation.
const LineCompletionLate LineKind = "completion_late"

// MaxLateLines is the most completion_late lines recorded for one key: one
// per distinct payload (a repeat records nothing); deliveries of further
// payloads are only counted (the store's late_dropped).
const MaxLateLines = 8

// Delivery is what an external system posts to a completion key: exactly
// one of Output (any JSON) and Error.
type Delivery struct {
	Output json.RawMessage
	Error  *CallError
}

// DeliveryResult tells the sender what happened to its delivery.
type DeliveryResult struct {
	// Status is "accepted" or "already_completed".
	Status string
	// Recorded is the key's status after the delivery.
	Recorded CompletionStatus
}

// CompletionInfo is what a sender may read about a key.
type CompletionInfo struct {
	Status            CompletionStatus
	Deadline          time.Time
	HeartbeatDeadline time.Time
}

// park turns a pending outcome into the Park that moves its key to
// pending, applying the service's bounds to the tool's options.
func (s *Service) park(o dispatch.Outcome, now time.Time) (Park, map[string]any) {
	p := o.Pending
	deadline := p.Deadline.UTC().Truncate(time.Microsecond)
	if deadline.IsZero() {
		deadline = now.Add(completion.DefaultDeadline)
	}
	if max := now.Add(completion.MaxDeadline); deadline.After(max) {
		deadline = max // never unbounded, never past 30 days
	}
	pk := Park{
		KeyHash:          completion.Key(p.Key).Hash(),
		Deadline:         deadline,
		HeartbeatTimeout: p.HeartbeatTimeout,
		OnTimeout:        p.OnTimeout,
		OnCancel:         p.OnCancel,
	}
	if pk.OnTimeout == "" {
		pk.OnTimeout = string(completion.OnTimeoutErrorAsResult)
	}
	if pk.OnCancel == "" {
		pk.OnCancel = string(completion.OnCancelExternalWork)
	}
	// Parking starts the heartbeat clock: its first deadline is a
	// heartbeat at now.
	pk.HeartbeatDeadline = completion.Resolved{Deadline: deadline, HeartbeatTimeout: pk.HeartbeatTimeout}.Heartbeat(now).HeartbeatDeadline
	data := map[string]any{
		"deadline":   pk.Deadline,
		"on_timeout": pk.OnTimeout,
		"on_cancel":  pk.OnCancel,
		"key":        completion.Hash(pk.KeyHash).Fingerprint(),
	}
	if !pk.HeartbeatDeadline.IsZero() {
		data["heartbeat_deadline"] = pk.HeartbeatDeadline
	}
	return pk, data
}

// resultAt returns the turn's recorded result for the completion's call, or
// a fresh one.
func resultAt(t Turn, c Completion) Result { return targetOf(t, c).base() }

func settledLine(k TurnKey, status Status, at time.Time) Line {
	return Line{SessionID: k.SessionID, TurnID: k.TurnID, Kind: LineTurnSettled, At: at, Data: settledData(status)}
}

// settledData is a turn_settled line's data, {"status":…}.
func settledData(status Status) json.RawMessage {
	return append(appendJSONString(append(make([]byte, 0, 24), `{"status":`...), string(status)), '}')
}

// applyEarly applies the early deliveries of a turn whose calls are parked
// (a delivery that raced its call's pending answer). It is called after a
// wave parks calls and after an early delivery; whichever comes second
// finds both the park and the payload. It reports whether a call of the
// turn was still pending when it looked (true too when it could not look).
func (s *Service) applyEarly(ctx context.Context, k TurnKey) (parked bool) {
	if s.completions == nil {
		return false
	}
	ctx = context.WithoutCancel(ctx)
	cs, err := s.completions.TurnCompletions(ctx, k)
	if err != nil {
		s.log.ErrorContext(ctx, "reading a turn's completions failed", "session_id", k.SessionID, "turn_id", k.TurnID, "err", err)
		return true
	}
	var t *Turn
	for _, c := range cs {
		if c.Status == CompletionPending {
			parked = true
		}
		if c.Status != CompletionEarly || c.Deadline.IsZero() {
			continue // not early, or its call is not parked yet
		}
		if t == nil {
			got, err := s.store.GetTurn(ctx, k)
			if err != nil {
				s.log.ErrorContext(ctx, "reading a turn with early completions failed", "session_id", k.SessionID, "turn_id", k.TurnID, "err", err)
				return true
			}
			t = &got
		}
		err := s.resolveDelivered(ctx, targetOf(*t, c), nil, c.Payload, c.PayloadHash, CompletionEarly)
		if err != nil && !errors.Is(err, ErrCompletionState) {
			s.log.ErrorContext(ctx, "applying an early completion failed", "key", completion.Hash(c.KeyHash).Fingerprint(), "err", err)
		}
	}
	return parked
}

// settleResolved settles a waiting turn none of whose calls is pending any
// more. A delivery to a call parked early in a wave resolves it while the
// wave still runs; that resolution cannot settle a running turn, and the
// wave, counting the call as pending when it parked, then leaves the turn
// waiting. Resolve locks the turn row before it decides, so one of the two
// (the delivery's Resolve, or this one after the waiting commit) always
// sees the turn waiting with nothing pending. The wave calls it only when
// applyEarly, reading after the waiting commit, found no call pending: a
// call pending then is resolved by a Resolve that sees the turn waiting.
func (s *Service) settleResolved(ctx context.Context, k TurnKey, callbackURL string, created time.Time) {
	if s.completions == nil {
		return
	}
	now := s.now()
	settled, err := s.completions.Resolve(ctx, ResolveBatch{
		Key:           k,
		SettleStatus:  StatusCompleted,
		SettleLines:   []Line{settledLine(k, StatusCompleted, now)},
		SettleWebhook: settledWebhook(callbackURL, k, StatusCompleted, now),
		Now:           now,
	})
	if err != nil {
		s.log.ErrorContext(ctx, "settling a turn whose parked calls were resolved failed", "session_id", k.SessionID, "turn_id", k.TurnID, "err", err)
		return
	}
	if settled {
		s.observeSettled(StatusCompleted, created)
	}
}

// Heartbeat extends a parked call's heartbeat clock.
func (s *Service) Heartbeat(ctx context.Context, rawKey string) (CompletionInfo, error) {
	c, err := s.lookupKey(ctx, rawKey)
	if err != nil {
		return CompletionInfo{}, err
	}
	c, err = s.completions.Heartbeat(ctx, c.SessionID, c.KeyHash, s.now())
	if errors.Is(err, ErrCompletionState) {
		if c.Status.Resolved() {
			return infoOf(c), ErrCompletionGone
		}
		return infoOf(c), nil // issued or early: nothing to extend yet
	}
	if err != nil {
		return CompletionInfo{}, fmt.Errorf("extending heartbeat: %w", err)
	}
	return infoOf(c), nil
}

// CompletionStatus reports a key's state to its sender.
func (s *Service) CompletionStatus(ctx context.Context, rawKey string) (CompletionInfo, error) {
	c, err := s.lookupKey(ctx, rawKey)
	if err != nil {
		return CompletionInfo{}, err
	}
	return infoOf(c), nil
}

func infoOf(c Completion) CompletionInfo {
	return CompletionInfo{Status: c.Status, Deadline: c.Deadline, HeartbeatDeadline: c.HeartbeatDeadline}
}

// expireDue resolves the parked calls whose deadline or heartbeat clock ran
// out: their result becomes the error completion_timeout, or with on_timeout
// fail_turn the turn fails and its other parked calls are cancelled. Racing
// deliveries and other replicas are settled by the store's row locks: the
// first writer wins and the others see ErrCompletionState.
func (s *Service) expireDue(ctx context.Context) {
	now := s.now()
	due, err := s.completions.DueCompletions(ctx, now, 256)
	if err != nil {
		s.log.Warn("reading due completions failed", "err", err)
		return
	}
	for _, c := range due {
		if err := s.expire(ctx, c, now); err != nil && !errors.Is(err, ErrCompletionState) {
			s.log.Error("timing out a completion failed", "key", completion.Hash(c.KeyHash).Fingerprint(), "err", err)
		}
	}
}

func (s *Service) expire(ctx context.Context, c Completion, now time.Time) error {
	k := TurnKey{c.SessionID, c.TurnID}
	t, err := s.store.GetTurn(ctx, k)
	if err != nil {
		return err
	}
	reason := "the completion deadline passed"
	if !c.HeartbeatDeadline.IsZero() && !c.HeartbeatDeadline.After(now) && c.Deadline.After(now) {
		reason = "no heartbeat arrived within the heartbeat timeout"
	}
	res := resultAt(t, c)
	res.Status = CallTimedOut
	res.Output = nil
	res.FinishedAt = now
	res.Error = &CallError{Code: "completion_timeout", Message: reason}
	if c.Reason == ReasonApproval {
		res.Error = &CallError{Code: "approval_timeout", Message: "no decision arrived before the approval deadline; the call did not run"}
	}
	b := ResolveBatch{
		Key:          k,
		Items:        []Resolution{{KeyHash: c.KeyHash, Expect: CompletionPending, Status: CompletionTimedOut, Result: res}},
		Lines:        []Line{{SessionID: k.SessionID, TurnID: k.TurnID, CallID: c.CallID, Kind: LineCallAnswered, At: now, Data: mustJSON(map[string]any{"status": res.Status, "error": res.Error})}},
		SettleStatus: StatusCompleted,
		Now:          now,
	}
	var cancelled []Completion
	if c.OnTimeout == string(completion.OnTimeoutFailTurn) {
		b.SettleStatus = StatusFailed
		others, err := s.completions.TurnCompletions(ctx, k)
		if err != nil {
			return err
		}
		for _, o := range others {
			if o.KeyHash == c.KeyHash || (o.Status != CompletionPending && o.Status != CompletionEarly) {
				continue
			}
			b.Items = append(b.Items, s.cancellation(t, o, now, "turn_failed", "another call of this turn timed out with on_timeout fail_turn"))
			b.Lines = append(b.Lines, cancelLine(k, o, now, "turn_failed"))
			cancelled = append(cancelled, o)
		}
	}
	b.SettleLines = []Line{settledLine(k, b.SettleStatus, now)}
	cb, err := s.callbackURL(ctx, k.SessionID)
	if err != nil {
		return err
	}
	b.SettleWebhook = settledWebhook(cb, k, b.SettleStatus, now)
	settled, err := s.completions.Resolve(ctx, b)
	if err != nil {
		return err
	}
	s.log.Info("completion timed out", "session_id", k.SessionID, "turn_id", k.TurnID, "call_id", c.CallID, "on_timeout", c.OnTimeout)
	s.cancelExternal(cancelled)
	s.observeResolved(CompletionExpired, 1)
	s.observeResolved(CompletionAborted, len(cancelled))
	if settled {
		s.observeSettled(b.SettleStatus, t.CreatedAt)
	}
	return nil
}

func (s *Service) cancellation(t Turn, c Completion, now time.Time, code, msg string) Resolution {
	res := resultAt(t, c)
	res.Status = CallCancelled
	res.Output = nil
	res.FinishedAt = now
	res.Error = &CallError{Code: code, Message: msg}
	return Resolution{KeyHash: c.KeyHash, Expect: c.Status, Status: CompletionCancelled, Result: res}
}

// closeOpen adds to b how a turn that ends closes each of its open
// completions cs (see cancelOpen) and returns those whose parked call it
// cancels, for cancelExternal.
func (s *Service) closeOpen(b *ResolveBatch, t Turn, sess Session, cs []Completion, now time.Time, code, msg string) (cancelled []Completion) {
	for _, c := range cs {
		item, line, open, aborted := s.cancelOpen(t, sess, c, now, code, msg)
		if !open {
			continue
		}
		b.Items = append(b.Items, item)
		if line != nil {
			b.Lines = append(b.Lines, *line)
		}
		if aborted {
			cancelled = append(cancelled, c)
		}
	}
	return cancelled
}

// cancelOpen is how a turn that ends cancels completion c, when c is still
// open (issued, early or pending; open false otherwise). A parked call
// (its result pending) is answered cancelled, with a line. The key of a
// call whose result is already final (it answered, or its wave accounted
// it without parking) is only closed: its result and lines stay as they
// are, so no call is answered twice.
func (s *Service) cancelOpen(t Turn, sess Session, c Completion, now time.Time, code, msg string) (item Resolution, line *Line, open, aborted bool) {
	switch c.Status {
	case CompletionIssued, CompletionEarly, CompletionPending:
	default:
		return Resolution{}, nil, false, false
	}
	if res, ok := findResult(t, c); !ok || res.Status != CallPending {
		return Resolution{KeyHash: c.KeyHash, Expect: c.Status, Status: CompletionCancelled, KeepResult: true}, nil, true, false
	}
	if c.Status == CompletionEarly {
		// A parked call whose delivery arrived before it parked (and was
		// accepted): that delivery is its result, whatever ends the turn.
		if res, outs, l, err := s.deliveredResult(targetOf(t, c), sess, c.Payload, now); err == nil {
			return Resolution{KeyHash: c.KeyHash, Expect: CompletionEarly, Status: CompletionCompleted, Payload: c.Payload,
				PayloadHash: c.PayloadHash, Result: res, Outputs: outs}, &l, true, false
		}
	}
	l := cancelLine(TurnKey{t.SessionID, t.ID}, c, now, code)
	return s.cancellation(t, c, now, code, msg), &l, true, true
}

// findResult returns the turn's recorded result for the completion's call.
func findResult(t Turn, c Completion) (Result, bool) {
	for _, r := range t.Results {
		if r.Index == c.CallIndex {
			return r, true
		}
	}
	return Result{}, false
}

func cancelLine(k TurnKey, c Completion, now time.Time, code string) Line {
	return Line{SessionID: k.SessionID, TurnID: k.TurnID, CallID: c.CallID, Kind: LineCallAnswered, At: now,
		Data: mustJSON(map[string]any{"status": CallCancelled, "error": map[string]string{"code": code}})}
}

// cancelExternal tells the tools of cancelled parked calls whose on_cancel
// is cancel_external_work (see Config.CancelHook).
func (s *Service) cancelExternal(cs []Completion) {
	if s.cfg.CancelHook == nil {
		return
	}
	for _, c := range cs {
		if c.OnCancel == string(completion.OnCancelExternalWork) {
			// The key the tool was given: a call parked before keys were
			// routed has its legacy key.
			key := s.keys.KeyOf(c.KeyHash, c.SessionID, c.TurnID, c.CallID)
			s.cfg.CancelHook(c, string(key))
		}
	}
}

// Cancel cancels a running or waiting turn: running tools are cancelled,
// parked calls become cancelled (their on_cancel applied), and the turn ends
// cancelled. A settled turn is returned as it is. A turn running on another
// replica is cancelled there, and Cancel waits for it (cancelElsewhere).
func (s *Service) Cancel(ctx context.Context, k TurnKey) (Turn, error) {
	t, err := s.GetTurn(ctx, k)
	if err != nil {
		return Turn{}, err
	}
	if t.Status.Settled() {
		return t, nil
	}
	r := s.activeRun(k)
	if r != nil {
		r.cancelRequested.Store(true)
		r.cancel()
		t, err := s.Await(ctx, k)
		if errors.Is(err, ErrLeaseLost) {
			// Another replica took the turn over (this process stalled
			// past its lease): the cancel is for the replica running it.
			return s.cancelElsewhere(ctx, k)
		}
		return t, err
	}
	if t.Status != StatusWaiting {
		// Running on another replica, or on none (its owner died).
		return s.cancelElsewhere(ctx, k)
	}
	if s.completions == nil {
		return Turn{}, ErrCompletionsDisabled
	}
	cs, err := s.completions.TurnCompletions(ctx, k)
	if err != nil {
		return Turn{}, fmt.Errorf("reading completions: %w", err)
	}
	sess, err := s.storedSession(ctx, k.SessionID)
	if err != nil {
		return Turn{}, fmt.Errorf("reading session: %w", err)
	}
	cb := sess.CallbackURL
	now := s.now()
	b := ResolveBatch{Key: k, SettleStatus: StatusCancelled, SettleLines: []Line{settledLine(k, StatusCancelled, now)},
		SettleWebhook: settledWebhook(cb, k, StatusCancelled, now), Now: now}
	cancelled := s.closeOpen(&b, t, sess, cs, now, "cancelled", "the turn was cancelled")
	settled, err := s.completions.Resolve(ctx, b)
	if err != nil {
		if errors.Is(err, ErrCompletionState) {
			return s.GetTurn(ctx, k) // resolved meanwhile
		}
		return Turn{}, fmt.Errorf("cancelling turn: %w", err)
	}
	s.cancelExternal(cancelled)
	s.observeResolved(CompletionAborted, len(cancelled))
	if settled {
		s.observeSettled(StatusCancelled, t.CreatedAt)
	}
	return s.GetTurn(ctx, k)
}

// cancelParked cancels the parked calls of a turn that ended cancelled or
// failed while some of its calls were parked.
func (s *Service) cancelParked(ctx context.Context, k TurnKey, status Status) {
	if s.completions == nil {
		return
	}
	cs, err := s.completions.TurnCompletions(ctx, k)
	if err != nil {
		s.log.Error("reading a turn's completions failed", "session_id", k.SessionID, "turn_id", k.TurnID, "err", err)
		return
	}
	t, err := s.store.GetTurn(ctx, k)
	if err != nil {
		s.log.Error("reading turn failed", "session_id", k.SessionID, "turn_id", k.TurnID, "err", err)
		return
	}
	sess, err := s.storedSession(ctx, k.SessionID)
	if err != nil {
		s.log.Error("reading session failed", "session_id", k.SessionID, "err", err)
		return
	}
	now := s.now()
	code := "cancelled"
	if status == StatusFailed {
		code = "turn_failed"
	}
	b := ResolveBatch{Key: k, SettleStatus: status, Now: now}
	cancelled := s.closeOpen(&b, t, sess, cs, now, code, "the turn ended "+string(status))
	if len(b.Items) == 0 {
		return
	}
	if _, err := s.completions.Resolve(ctx, b); err != nil {
		s.log.Error("cancelling parked calls failed", "session_id", k.SessionID, "turn_id", k.TurnID, "err", err)
		return
	}
	s.cancelExternal(cancelled)
	s.observeResolved(CompletionAborted, len(cancelled))
}

// closeKey settles the completion key of a call that took one but did not
// park (it answered, failed, or was cancelled first), so that no delivery
// to the key is accepted after its call ended: an issued key is cancelled
// (a delivery then gets 410 and is recorded late). When a delivery reached
// the key first (early: the external work finished before the tool
// answered), that delivery was accepted, and it is the call's result:
// closeKey returns it in place of res. Either way the call's result row is
// left to the wave's commit.
func (r *run) closeKey(h [32]byte, res Result, out *Output) (Result, *Output) {
	s := r.svc
	ctx := context.WithoutCancel(r.ctx)
	now := s.now()
	b := ResolveBatch{Key: r.key, SettleStatus: StatusCompleted, Now: now, Items: []Resolution{
		{KeyHash: h, Expect: CompletionIssued, Status: CompletionCancelled, KeepResult: true},
	}}
	_, err := s.completions.Resolve(ctx, b)
	if err == nil {
		return res, out
	}
	if !errors.Is(err, ErrCompletionState) {
		s.log.ErrorContext(r.logCtx, "closing the completion key of a call that did not park failed", "session_id", r.key.SessionID, "turn_id", r.key.TurnID, "call_id", res.CallID, "err", err)
		return res, out
	}
	c, err := s.completions.GetCompletion(ctx, r.key.SessionID, h)
	if err != nil || c.Status != CompletionEarly {
		return res, out
	}
	delivered, dout, err := s.applyPayload(r.key, s.completionProjector(r.session, len(r.turn.Calls), res.Name), res, c.Payload)
	if err != nil {
		return res, out
	}
	b.Items[0] = Resolution{KeyHash: h, Expect: CompletionEarly, Status: CompletionCompleted, Payload: c.Payload, PayloadHash: c.PayloadHash, KeepResult: true}
	if _, err := s.completions.Resolve(ctx, b); err != nil {
		s.log.ErrorContext(r.logCtx, "taking an early delivery as the result of a call that did not park failed", "session_id", r.key.SessionID, "turn_id", r.key.TurnID, "call_id", res.CallID, "err", err)
		return res, out
	}
	s.log.InfoContext(r.logCtx, "a delivery that arrived before the call's tool answered is its result", "session_id", r.key.SessionID, "turn_id", r.key.TurnID, "call_id", res.CallID, "tool_status", res.Status)
	return delivered, dout
}
