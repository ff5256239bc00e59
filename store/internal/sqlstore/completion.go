package sqlstore

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/turnd/turnd/turn"
)

// CompletionColumns are the columns of a completion's row, in the order
// of CompletionRow.Dest.
const CompletionColumns = `key_hash, session_id, turn_id, call_idx, call_id, call_name, status, deadline,
    heartbeat_timeout, heartbeat_deadline, on_timeout, on_cancel, cancel_url, payload, payload_hash,
    created_at, resolved_at, reason`

// CompletionRow is a completion's row as read, but for its four times,
// which each store scans as its own type.
type CompletionRow struct {
	Key, Payload, PayloadHash           []byte
	SessionID, TurnID, CallID, CallName string
	Status                              string
	OnTimeout, OnCancel, CancelURL      string
	Reason                              string
	CallIndex                           int
	HeartbeatTimeout                    int64 // microseconds (Micros)
}

// Dest returns the scan destinations of CompletionColumns: r's fields and
// the store's destinations of deadline, heartbeat_deadline, created_at and
// resolved_at.
func (r *CompletionRow) Dest(deadline, heartbeatDeadline, created, resolved any) []any {
	return []any{&r.Key, &r.SessionID, &r.TurnID, &r.CallIndex, &r.CallID, &r.CallName, &r.Status, deadline,
		&r.HeartbeatTimeout, heartbeatDeadline, &r.OnTimeout, &r.OnCancel, &r.CancelURL, &r.Payload, &r.PayloadHash,
		created, resolved, &r.Reason}
}

// Completion decodes r; the store sets the times. The payload is copied
// (a driver may reuse r's buffers for the next row); nil stays nil (NULL).
func (r *CompletionRow) Completion() (turn.Completion, error) {
	key, err := DecodeHash(r.Key)
	if err != nil {
		return turn.Completion{}, fmt.Errorf("completion key: %w", err)
	}
	ph, err := DecodeHash(r.PayloadHash)
	if err != nil {
		return turn.Completion{}, fmt.Errorf("completion %s payload: %w", Fingerprint(key), err)
	}
	return turn.Completion{
		KeyHash:          key,
		SessionID:        r.SessionID,
		TurnID:           r.TurnID,
		CallIndex:        r.CallIndex,
		CallID:           r.CallID,
		CallName:         r.CallName,
		Status:           turn.CompletionStatus(r.Status),
		HeartbeatTimeout: FromMicros(r.HeartbeatTimeout),
		OnTimeout:        r.OnTimeout,
		OnCancel:         r.OnCancel,
		CancelURL:        r.CancelURL,
		Reason:           r.Reason,
		Payload:          json.RawMessage(bytes.Clone(r.Payload)),
		PayloadHash:      ph,
	}, nil
}

// SecretName is the settings row that holds the completion secret.
const SecretName = "completion_secret"

// Secret is turn.CompletionStore.Secret over a store's two statements: get
// reads the secret (an error wrapping turn.ErrNotFound when there is none),
// insert stores one unless one is already there; both return errors the
// store has already wrapped. A secret read is returned; otherwise
// generate's is inserted and the stored one read back, so that callers
// racing on an empty store all return the first committed.
func Secret(get func() (string, error), insert func(string) error, generate func() (string, error)) (string, error) {
	if v, err := get(); !errors.Is(err, turn.ErrNotFound) {
		return v, err
	}
	gen, err := generate()
	if err != nil {
		return "", fmt.Errorf("generating the completion secret: %w", err)
	}
	if gen == "" {
		return "", errors.New("generating the completion secret: generated an empty secret")
	}
	if err := insert(gen); err != nil {
		return "", err
	}
	v, err := get()
	if errors.Is(err, turn.ErrNotFound) {
		return "", errors.New("reading completion secret: the secret stored is gone")
	}
	return v, err
}

// Fingerprint names a completion in errors and logs: the first 4 bytes of
// its key hash in hex, the same string as completion.Hash.Fingerprint (which
// the service logs), so that a store error and a log line about one key
// match.
func Fingerprint(h [32]byte) string { return hex.EncodeToString(h[:4]) }

// Hash returns h as the value of a nullable hash column: nil (NULL) for the
// zero hash, which stands for "none".
func Hash(h [32]byte) []byte {
	if h == ([32]byte{}) {
		return nil
	}
	return h[:]
}

// DecodeHash reverses Hash: NULL is the zero hash; anything but 32 bytes
// is corrupt.
func DecodeHash(b []byte) ([32]byte, error) {
	var h [32]byte
	if b == nil {
		return h, nil
	}
	if len(b) != len(h) {
		return h, fmt.Errorf("hash of %d bytes, want %d", len(b), len(h))
	}
	copy(h[:], b)
	return h, nil
}

// Micros encodes a duration as whole microseconds, the unit of the
// heartbeat_timeout column (like times, truncated to the microsecond).
func Micros(d time.Duration) int64 { return d.Microseconds() }

// FromMicros reverses Micros.
func FromMicros(us int64) time.Duration { return time.Duration(us) * time.Microsecond }

// StateError reports a completion found in status actual where want was
// expected: it wraps turn.ErrCompletionState and names the completion.
func StateError(h [32]byte, actual, want turn.CompletionStatus) error {
	return fmt.Errorf("completion %s is %s, want %s: %w", Fingerprint(h), actual, want, turn.ErrCompletionState)
}

// CheckExpected checks the items of a resolution against the statuses
// their completions have now (statuses holds those of the batch's turn),
// in item order: a key the turn does not have is turn.ErrNotFound, one in
// another status than its Expect a StateError.
func CheckExpected(items []turn.Resolution, statuses map[[32]byte]turn.CompletionStatus) error {
	for _, it := range items {
		st, ok := statuses[it.KeyHash]
		if !ok {
			return fmt.Errorf("completion %s: %w", Fingerprint(it.KeyHash), turn.ErrNotFound)
		}
		if st != it.Expect {
			return StateError(it.KeyHash, st, it.Expect)
		}
	}
	return nil
}

// CheckResolve checks a batch before anything is written: a turn key,
// distinct keys, every item going from an unresolved status (Expect) to a
// final one (Status) — a resolved completion is never resolved again —, a
// SettleStatus and a Now, and lines and outputs of the batch's session. A
// batch without items is valid: it settles a waiting turn none of whose
// completions is open. Like CheckCommit it does not modify b.
func CheckResolve(b turn.ResolveBatch) error {
	if b.Key.SessionID == "" || b.Key.TurnID == "" {
		return errors.New("session id and turn id are required")
	}
	if b.SettleStatus == "" {
		return errors.New("settle status is required")
	}
	if b.Now.IsZero() {
		return errors.New("resolution time is required")
	}
	seen := make(map[[32]byte]bool, len(b.Items))
	for i, it := range b.Items {
		fp := Fingerprint(it.KeyHash)
		if !it.Status.Resolved() {
			return fmt.Errorf("resolution %d (completion %s): status %q is not a final status", i, fp, it.Status)
		}
		if it.Expect == "" || it.Expect.Resolved() {
			return fmt.Errorf("resolution %d (completion %s): expected status %q is not an unresolved status", i, fp, it.Expect)
		}
		if seen[it.KeyHash] {
			return fmt.Errorf("resolution %d: completion %s appears twice", i, fp)
		}
		seen[it.KeyHash] = true
		if err := checkOutputs(b.Key, it.Outputs); err != nil {
			return fmt.Errorf("resolution %d (completion %s): %w", i, fp, err)
		}
	}
	if err := checkLines(b.Key, b.Lines); err != nil {
		return err
	}
	if err := checkLines(b.Key, b.SettleLines); err != nil {
		return fmt.Errorf("settle %w", err)
	}
	return nil
}

// ResolveWrites returns what b writes besides the completions themselves:
// the items' results (one per Index, as Commit's Results) and outputs.
func ResolveWrites(b turn.ResolveBatch) ([]turn.Result, []turn.Output) {
	results := make([]turn.Result, 0, len(b.Items))
	var outputs []turn.Output
	for _, it := range b.Items {
		if it.KeepResult {
			continue
		}
		results = append(results, it.Result)
		outputs = append(outputs, it.Outputs...)
	}
	return Results(results), outputs
}

// CheckLate checks a late delivery written under k: its line of k's
// session and turn, its outputs of k's session with ids, a positive Max.
func CheckLate(k turn.TurnKey, l turn.Late) error {
	if err := CheckLine(k, l.Line); err != nil {
		return err
	}
	if l.Max <= 0 {
		return fmt.Errorf("late payloads cap %d must be positive", l.Max)
	}
	return checkOutputs(k, l.Outputs)
}

// LateDecision is what RecordLate does with l, given the late payload
// hashes the key keeps (concatenated, 32 bytes each).
func LateDecision(hashes []byte, l turn.Late) turn.LateOutcome {
	n := 0
	for len(hashes) >= len(l.PayloadHash) {
		if [32]byte(hashes[:32]) == l.PayloadHash {
			return turn.LateRepeated
		}
		hashes = hashes[32:]
		n++
	}
	if n >= l.Max {
		return turn.LateDropped
	}
	return turn.LateRecorded
}

// CheckApprove checks an approve decision before anything is written: a
// turn key, a decision, an owner and a lease, and lines of the turn's
// session.
func CheckApprove(a turn.Approve) error {
	switch {
	case a.Key.SessionID == "" || a.Key.TurnID == "":
		return errors.New("session id and turn id are required")
	case len(a.Decision) == 0 || !json.Valid(a.Decision):
		return errors.New("the decision must be JSON")
	case a.Owner == "" || a.LeaseUntil.IsZero():
		return errors.New("an owner and a lease are required")
	}
	return checkLines(a.Key, a.Lines)
}

// CheckApprovable reports, as a state error naming the key, a completion
// (status, reason) that is not pending for approval.
func CheckApprovable(key [32]byte, status, reason string) error {
	if status != string(turn.CompletionPending) || reason != turn.ReasonApproval {
		return StateError(key, turn.CompletionStatus(status), turn.CompletionPending)
	}
	return nil
}
