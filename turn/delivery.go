package turn

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"

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
	r.mu.Lock()
	if r.keyed == nil {
		r.keyed = make(map[int][32]byte)
	}
	r.keyed[r.index[call.ID]] = key.Hash()
	r.mu.Unlock()
	err := s.completions.IssueCompletion(context.WithoutCancel(ctx), Completion{
		KeyHash:   key.Hash(),
		SessionID: r.key.SessionID,
		TurnID:    r.key.TurnID,
		CallIndex: r.index[call.ID],
		CallID:    call.ID,
		CallName:  call.Name,
		Status:    CompletionIssued,
		Reason:    r.keyReason(call.ID),
		CreatedAt: s.now(),
	})
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
	if s.completions == nil {
		return Completion{}, ErrNotFound
	}
	h := completion.HashOf(raw)
	sid, _ := completion.Route(raw)
	c, err := s.completions.GetCompletion(ctx, sid, h)
	_, perr := completion.ParseKey(raw)
	if err != nil {
		return Completion{}, fmt.Errorf("reading completion: %w", err)
	}
	if perr != nil {
		return Completion{}, ErrNotFound
	}
	return c, nil
}

// payloadHash identifies a delivery regardless of its JSON formatting, to
// tell an identical repeat from a different payload.
func payloadHash(d Delivery) [32]byte {
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

func deliveryPayload(d Delivery) json.RawMessage {
	if d.Error != nil {
		return mustJSON(map[string]any{"error": d.Error})
	}
	return mustJSON(map[string]any{"output": d.Output})
}
