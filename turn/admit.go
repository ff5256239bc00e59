package turn

import (
	"context"
	"fmt"

	"github.com/turnd/turnd/dispatch"
)

// Admit implements dispatch.Host.
func (r *run) Admit(_ context.Context, call dispatch.Call) dispatch.Admission {
	adm := r.admit(call)
	if r.early != nil {
		adm = r.adoptEarly(call, adm)
	}
	return adm
}

func (r *run) admit(call dispatch.Call) dispatch.Admission {
	i, ok := r.index[call.ID]
	if !ok {
		return dispatch.Admission{Verdict: dispatch.Refuse, Outcome: dispatch.Refused("unknown_call", "call id not in this turn")}
	}
	st := &r.calls[i]
	if rec, ok := r.recorded[i]; ok {
		if rec.Status.Final() {
			st.silent = true
			adm := dispatch.Admission{Verdict: dispatch.Replay, Outcome: outcomeOf(rec)}
			r.replayHeld(i, call, rec, &adm)
			return adm
		}
	}
	if rec, ok := r.recorded[i]; ok && rec.Status == CallStarted {
		// A write attempt was journaled before its process stopped and never
		// answered: it may have taken effect. Only a tool still registered as
		// idempotent may run it again; anything else (the tool gone or
		// changed) is answered "interrupted", never refused as if unrun.
		// Its call_admitted line is in the ledger, or restored from its row:
		// whether or not it runs again, it is not written twice.
		r.restoreStartLines(i, call, rec)
		st.admittedLine = true
		spec, found := r.reg.Lookup(call.Name)
		if !found || !spec.Idempotent || !r.session.Granted(call.Name) || spec.Validate(call.Arguments) != nil {
			interrupted := Result{
				Status: CallFailed,
				Error: &CallError{Code: CodeInterrupted, Message: "the process running this call stopped during its attempt; " +
					"it was not run again because it may have taken effect and the tool is not idempotent"},
				Attempts:   rec.Attempts,
				StartedAt:  rec.StartedAt,
				FinishedAt: r.svc.now(),
				Effect:     rec.Effect,
			}
			return dispatch.Admission{Verdict: dispatch.Replay, Outcome: outcomeOf(interrupted)}
		}
	}
	if prev, ok := r.answered[call.ID]; ok {
		if prev.Status == CallPending {
			// Its result will arrive in the turn that parked it, not here:
			// replaying "pending" would leave this turn waiting on a
			// completion that settles the other one.
			return dispatch.Admission{Verdict: dispatch.Refuse, Outcome: dispatch.Refused("call_pending",
				fmt.Sprintf("call %q is waiting for its result in turn %q; read it there once it arrives", call.ID, prev.ReplayedFrom))}
		}
		st.replayedFrom = prev.ReplayedFrom
		return dispatch.Admission{Verdict: dispatch.Replay, Outcome: outcomeOf(prev)}
	}
	if msg, bad := unparsedArguments(call.Arguments); bad {
		return dispatch.Admission{Verdict: dispatch.Refuse, Outcome: dispatch.Refused("invalid_arguments", msg)}
	}
	spec, ok := r.reg.Lookup(call.Name)
	if !ok {
		return dispatch.Admission{Verdict: dispatch.Refuse, Outcome: dispatch.Refused("unknown_tool", fmt.Sprintf("no tool named %q is registered", call.Name))}
	}
	if !r.session.Granted(call.Name) {
		return dispatch.Admission{Verdict: dispatch.Refuse, Outcome: dispatch.Refused("tool_not_granted", fmt.Sprintf("tool %q is not granted to this session", call.Name))}
	}
	res, err := spec.Check(call.Arguments)
	if err != nil {
		return dispatch.Admission{Verdict: dispatch.Refuse, Outcome: dispatch.Refused("invalid_arguments", err.Error())}
	}
	if why, ok := r.approvalNeeded(i, spec, call.Arguments); ok {
		// It parks before its tool runs. As a write it ends the leading
		// reads, so nothing after it runs at once with it (a read that
		// needs approval included); it holds no resources while it waits.
		st.spec, st.admitted, st.approval = spec, true, why
		return dispatch.Admission{Verdict: dispatch.Run, Tool: approvalGate{svc: r.svc, pending: spec.Pending},
			Effect: dispatch.EffectWrite, Retry: dispatch.RetryPolicy{MaxAttempts: 1}}
	}
	adm := dispatch.Admission{Verdict: dispatch.Run, Tool: spec.Impl, Effect: spec.Effect, Retry: spec.Retry}
	if res != nil || spec.Limit != nil || spec.SessionLimit != nil {
		r.admitResources(i, spec, res, &adm)
	}
	st.spec = spec
	st.admitted = true
	return adm
}

// BeforeAttempt implements dispatch.AttemptHook: a write call's attempt is
// journaled and committed (with everything accounted before it) before the
// tool runs.
func (r *run) BeforeAttempt(ctx context.Context, call dispatch.Call, effect dispatch.Effect, attempt int) error {
	if effect == dispatch.EffectRead {
		return nil
	}
	if i, ok := r.index[call.ID]; ok && r.calls[i].approval != "" {
		return nil // the approval gate: nothing of the tool runs
	}
	// Write-ahead needs the turn in the store first (a no-op once it is).
	if err := r.ensureRecorded(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("journaling attempt %d of %s: %w", attempt, call.ID, err)
	}
	i := r.index[call.ID]
	started := Line{SessionID: r.key.SessionID, TurnID: r.key.TurnID, CallID: call.ID,
		Kind: LineAttemptStarted, At: r.svc.now(), Data: mustJSON(map[string]any{"attempt": attempt})}
	r.mu.Lock()
	st := &r.calls[i]
	inOrder := r.startsInOrderLocked(i)
	if !st.admittedLine {
		st.admittedLine = true
		l := admittedLine(call, i, effect, st.res)
		if inOrder {
			r.bufferLocked(l)
		} else {
			l.SessionID, l.TurnID, l.At = r.key.SessionID, r.key.TurnID, r.svc.now()
			st.stash = append(st.stash, l)
		}
	}
	held := r.takeLocked() // what was accounted before this attempt
	var lines []Line
	if inOrder {
		lines = []Line{started}
	} else {
		// Calls before this one are still unaccounted: its lines join the
		// ledger when it is accounted, its started result commits now.
		st.stash = append(st.stash, started)
	}
	b, lead, prev := r.joinLocked(held, lines, []Result{{
		Index: i, CallID: call.ID, Name: call.Name, Effect: effect, Status: CallStarted,
		Attempts: attempt, StartedAt: r.svc.now(),
	}})
	r.mu.Unlock()
	if err := r.await(ctx, b, lead, prev); err != nil {
		// The attempt is not journaled, so the tool does not run (await put
		// what was accounted before it back in the buffer).
		if !inOrder {
			r.mu.Lock()
			st.stash = st.stash[:len(st.stash)-1] // the attempt did not start
			r.mu.Unlock()
		}
		return fmt.Errorf("journaling attempt %d of %s: %w", attempt, call.ID, err)
	}
	return nil
}
