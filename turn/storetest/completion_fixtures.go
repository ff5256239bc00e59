package storetest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/turnd/turnd/dispatch"
	"github.com/turnd/turnd/turn"
)

// keyHash is the key hash of call idx of turn sid/tid in these tests.
func keyHash(sid, tid string, idx int) [32]byte {
	return sha256.Sum256(fmt.Appendf(nil, "key/%s/%s/%d", sid, tid, idx))
}

// fingerprint is how the stores name a completion in their errors (as
// completion.Hash.Fingerprint does).
func fingerprint(h [32]byte) string { return hex.EncodeToString(h[:4]) }

// receiveCalls describes a new running turn like receive, with n calls.
func receiveCalls(sid, tid, owner string, n int) turn.Receive {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-c%d", tid, i)
	}
	r := receiveIDs(sid, tid, owner, ids...)
	for i := range r.Turn.Calls {
		r.Turn.Calls[i].Name = "approve"
	}
	return r
}

// completion is the issued completion of call idx of turn sid/tid.
func completion(sid, tid string, idx int) turn.Completion {
	return turn.Completion{
		KeyHash:   keyHash(sid, tid, idx),
		SessionID: sid,
		TurnID:    tid,
		CallIndex: idx,
		CallID:    fmt.Sprintf("%s-c%d", tid, idx),
		CallName:  "approve",
		Status:    turn.CompletionIssued,
		CreatedAt: base,
	}
}

// issue records the completion of call idx of turn sid/tid and returns it.
func issue(t *testing.T, s turn.Store, sid, tid string, idx int) turn.Completion {
	t.Helper()
	c := completion(sid, tid, idx)
	must(t, fmt.Sprintf("IssueCompletion %s/%s #%d", sid, tid, idx), s.IssueCompletion(ctx(t), c))
	return c
}

// parkOf returns a park of c with a deadline in an hour and a 30s
// heartbeat clock.
func parkOf(c turn.Completion) turn.Park {
	return turn.Park{
		KeyHash:           c.KeyHash,
		Deadline:          base.Add(time.Hour),
		HeartbeatTimeout:  30 * time.Second,
		HeartbeatDeadline: base.Add(30 * time.Second),
		OnTimeout:         "error_as_result",
		OnCancel:          "cancel_external_work",
		CancelURL:         "https://tool.test/cancel/" + c.CallID,
	}
}

// parked is what the store holds for c after p: an issued completion
// becomes pending, an early one stays early; both take p's clocks and
// options.
func parked(c turn.Completion, p turn.Park) turn.Completion {
	if c.Status == turn.CompletionIssued {
		c.Status = turn.CompletionPending
	}
	c.Deadline, c.HeartbeatTimeout, c.HeartbeatDeadline = p.Deadline, p.HeartbeatTimeout, p.HeartbeatDeadline
	c.OnTimeout, c.OnCancel, c.CancelURL = p.OnTimeout, p.OnCancel, p.CancelURL
	return c
}

func wantCompletion(c turn.Completion) turn.Completion {
	c.Deadline, c.HeartbeatDeadline = normTime(c.Deadline), normTime(c.HeartbeatDeadline)
	c.CreatedAt, c.ResolvedAt = normTime(c.CreatedAt), normTime(c.ResolvedAt)
	c.Payload = normJSON(c.Payload)
	return c
}

func getCompletion(t *testing.T, s turn.Store, h [32]byte) turn.Completion {
	t.Helper()
	c, err := s.GetCompletion(ctx(t), "s1", h)
	must(t, "GetCompletion "+fingerprint(h), err)
	return c
}

// checkCompletion fails unless the store holds want (normalised).
func checkCompletion(t *testing.T, s turn.Store, what string, want turn.Completion) {
	t.Helper()
	same(t, what, getCompletion(t, s, want.KeyHash), wantCompletion(want))
}

// pendingResult is the result of call idx of a turn parked on its key.
func pendingResult(tid string, idx int) turn.Result {
	r := result(tid, idx)
	r.CallID, r.Name = fmt.Sprintf("%s-c%d", tid, idx), "approve"
	r.Effect, r.Status, r.Output = dispatch.EffectWrite, turn.CallPending, nil
	r.OriginalBytes, r.OriginalLines, r.FinishedAt = 0, 0, time.Time{}
	return r
}

// answer is the result of call idx once delivered.
func answer(tid string, idx int, output string) turn.Result {
	r := pendingResult(tid, idx)
	r.Status, r.Output, r.FinishedAt = turn.CallOK, json.RawMessage(output), base.Add(time.Minute)
	return r
}

// parkCommit is the commit that parks calls of turn sid/tid with their
// call_pending lines and pending results, setting status (empty: the turn
// keeps running).
func parkCommit(sid, tid, owner string, status turn.Status, cs ...turn.Completion) turn.Commit {
	c := commit(sid, tid, owner)
	c.Status = status
	for _, x := range cs {
		c.Parks = append(c.Parks, parkOf(x))
		c.Lines = append(c.Lines, line(tid, x.CallID, turn.LineCallPending, fmt.Sprintf(`{"idx":%d}`, x.CallIndex)))
		c.Results = append(c.Results, pendingResult(tid, x.CallIndex))
	}
	return c
}

// waitingTurn records turn sid/tid with n calls, issues a key for each and
// commits the turn waiting with every call parked. It returns the
// completions as stored (pending).
func waitingTurn(t *testing.T, s turn.Store, sid, tid string, n int) []turn.Completion {
	t.Helper()
	mustReceive(t, s, receiveCalls(sid, tid, "owner-a", n))
	var cs []turn.Completion
	for i := range n {
		cs = append(cs, issue(t, s, sid, tid, i))
	}
	must(t, "Commit waiting "+tid, s.Commit(ctx(t), parkCommit(sid, tid, "owner-a", turn.StatusWaiting, cs...)))
	for i, c := range cs {
		cs[i] = parked(c, parkOf(c))
	}
	return cs
}

// resolution resolves c (expected pending) as completed with output.
func resolution(c turn.Completion, output string) turn.Resolution {
	payload := json.RawMessage(`{"output":` + output + `}`)
	return turn.Resolution{
		KeyHash:     c.KeyHash,
		Expect:      turn.CompletionPending,
		Status:      turn.CompletionCompleted,
		Payload:     payload,
		PayloadHash: sha256.Sum256(payload),
		Result:      answer(c.TurnID, c.CallIndex, output),
	}
}

// batch resolves items of turn sid/tid with one call_answered line per item
// and, should the turn settle, one turn_settled line.
func batch(sid, tid string, now time.Time, items ...turn.Resolution) turn.ResolveBatch {
	b := turn.ResolveBatch{
		Key:          turn.TurnKey{SessionID: sid, TurnID: tid},
		Items:        items,
		SettleStatus: turn.StatusCompleted,
		SettleLines:  []turn.Line{line(tid, "", turn.LineTurnSettled, `{"status":"completed"}`)},
		Now:          now,
	}
	for _, it := range items {
		b.Lines = append(b.Lines, line(tid, it.Result.CallID, turn.LineCallAnswered, fmt.Sprintf(`{"status":%q}`, it.Status)))
	}
	return b
}

// resolved is what the store holds for c after item of a batch at now.
func resolved(c turn.Completion, item turn.Resolution, now time.Time) turn.Completion {
	c.Status, c.Payload, c.PayloadHash, c.ResolvedAt = item.Status, item.Payload, item.PayloadHash, now
	return c
}

func getTurn(t *testing.T, s turn.Store, sid, tid string) turn.Turn {
	t.Helper()
	tu, err := s.GetTurn(ctx(t), turn.TurnKey{SessionID: sid, TurnID: tid})
	must(t, "GetTurn "+sid+"/"+tid, err)
	return tu
}

// WaitingTurn records turn sid/tid with n calls, each parked on a key of
// its own, waiting, and returns the completions as stored (pending): the
// fixture of a store's own resolution tests.
func WaitingTurn(t *testing.T, s turn.Store, sid, tid string, n int) []turn.Completion {
	t.Helper()
	return waitingTurn(t, s, sid, tid, n)
}

// Delivered is the batch that delivers output to c at now (expected
// pending), with its lines, settling the turn when nothing else of it is
// pending.
func Delivered(c turn.Completion, output string, now time.Time) turn.ResolveBatch {
	return batch(c.SessionID, c.TurnID, now, resolution(c, output))
}
