package sqlstore

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/turnd/turnd/budget"
	"github.com/turnd/turnd/turn"
)

// RawJSON returns m as the value to store in a nullable JSON column: nil
// (NULL) when m is empty, else m's bytes unchanged so that they round-trip
// exactly. It rejects invalid JSON here rather than as a driver error
// half-way through a transaction.
func RawJSON(what string, m json.RawMessage) ([]byte, error) {
	return validJSON(m, func() string { return what })
}

// OutputJSON is RawJSON for the output of the result at index; the label
// of its error is only formatted for an error.
func OutputJSON(index int, m json.RawMessage) ([]byte, error) {
	return validJSON(m, func() string { return fmt.Sprintf("result %d output", index) })
}

// PayloadJSON is RawJSON for the payload of the completion keyed h; the
// label of its error is only formatted for an error.
func PayloadJSON(h [32]byte, m json.RawMessage) ([]byte, error) {
	return validJSON(m, func() string { return fmt.Sprintf("completion %s payload", Fingerprint(h)) })
}

// validJSON is RawJSON with its label made only when needed.
func validJSON(m json.RawMessage, what func() string) ([]byte, error) {
	if len(m) == 0 {
		return nil, nil
	}
	if !json.Valid(m) {
		return nil, fmt.Errorf("%s is not valid JSON", what())
	}
	return m, nil
}

// Tools encodes a session's granted tools: nil (NULL, every tool granted)
// stays distinct from an empty list (no tool granted).
func Tools(tools []string) ([]byte, error) {
	if tools == nil {
		return nil, nil
	}
	b, err := json.Marshal(tools)
	if err != nil {
		return nil, fmt.Errorf("encoding tools: %w", err)
	}
	return b, nil
}

// DecodeTools reverses Tools.
func DecodeTools(b []byte) ([]string, error) {
	if b == nil {
		return nil, nil
	}
	tools := []string{}
	if err := json.Unmarshal(b, &tools); err != nil {
		return nil, fmt.Errorf("decoding tools: %w", err)
	}
	return tools, nil
}

// Budget encodes a session's budget as the JSON of its struct, so the
// stores need not know its fields.
func Budget(c budget.Config) ([]byte, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encoding budget: %w", err)
	}
	return b, nil
}

// DecodeBudget reverses Budget.
func DecodeBudget(b []byte) (budget.Config, error) {
	var c budget.Config
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("decoding budget: %w", err)
	}
	return c, nil
}

// Calls encodes a turn's calls as a JSON array. It writes each call's
// arguments as given instead of going through json.Marshal, which would
// compact them and escape HTML characters: arguments round-trip byte for
// byte.
func Calls(calls []turn.Call) ([]byte, error) {
	n := 2
	for _, c := range calls {
		n += len(`{"id":"","name":"","arguments":},`) + len(c.ID) + len(c.Name) + len(c.Arguments)
	}
	b := make([]byte, 0, n)
	b = append(b, '[')
	for i, c := range calls {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":`...)
		b = appendString(b, c.ID)
		b = append(b, `,"name":`...)
		b = appendString(b, c.Name)
		if len(c.Arguments) > 0 {
			if !json.Valid(c.Arguments) {
				return nil, fmt.Errorf("call %d (%s) arguments are not valid JSON", i, c.ID)
			}
			b = append(b, `,"arguments":`...)
			b = append(b, c.Arguments...)
		}
		b = append(b, '}')
	}
	return append(b, ']'), nil
}

// DecodeCalls reverses Calls.
func DecodeCalls(b []byte) ([]turn.Call, error) {
	var calls []turn.Call
	if err := json.Unmarshal(b, &calls); err != nil {
		return nil, fmt.Errorf("decoding calls: %w", err)
	}
	return calls, nil
}

// ReleasesLease reports whether committing status s releases the turn's
// lease: a settled turn is done and a waiting turn has no wave running.
func ReleasesLease(s turn.Status) bool {
	return s.Settled() || s == turn.StatusWaiting
}

// Results returns rs with one entry per Index, the last one given winning
// (a commit may carry a call's started row and its outcome together; one
// statement cannot upsert the same row twice). Order is otherwise kept.
func Results(rs []turn.Result) []turn.Result {
	last := make(map[int]int, len(rs))
	for i, r := range rs {
		last[r.Index] = i
	}
	if len(last) == len(rs) {
		return rs
	}
	out := make([]turn.Result, 0, len(last))
	for i, r := range rs {
		if last[r.Index] == i {
			out = append(out, r)
		}
	}
	return out
}

// ErrKeyMismatch reports a record whose session id contradicts the key it
// is written under.
var ErrKeyMismatch = errors.New("session id does not match the turn key")

// CheckReceive checks that r's ids agree and fills in the empty ones (r is
// the store method's own copy): the store keys everything by r.Turn.SessionID
// and r.Turn.ID; r.Session.ID and r.Line.SessionID may be empty or equal,
// and an empty r.Line.TurnID becomes r.Turn.ID.
func CheckReceive(r *turn.Receive) error {
	k := turn.TurnKey{SessionID: r.Turn.SessionID, TurnID: r.Turn.ID}
	if k.SessionID == "" || k.TurnID == "" {
		return errors.New("session id and turn id are required")
	}
	if r.Session.ID != "" && r.Session.ID != k.SessionID {
		return fmt.Errorf("session %q: %w %v", r.Session.ID, ErrKeyMismatch, k)
	}
	if err := checkLines(k, []turn.Line{r.Line}); err != nil {
		return err
	}
	r.Session.ID = k.SessionID
	r.Line.SessionID = k.SessionID
	r.Line.TurnID = LineTurn(r.Line, k)
	return nil
}

// CheckCommit checks that c's lines and outputs belong to c.Key's session
// and that every output has an id. It does not modify c: its slices are the
// caller's. Empty ids are filled in when encoding (LineTurn, OutputKey).
func CheckCommit(c turn.Commit) error {
	if c.Key.SessionID == "" || c.Key.TurnID == "" {
		return errors.New("session id and turn id are required")
	}
	if err := checkLines(c.Key, c.Lines); err != nil {
		return err
	}
	return checkOutputs(c.Key, c.Outputs)
}

// checkLines checks that lines, written under k, are of k's session and
// turn: a ledger row holds the lines of one turn (its turn_id column).
func checkLines(k turn.TurnKey, lines []turn.Line) error {
	for i, l := range lines {
		if l.SessionID != "" && l.SessionID != k.SessionID {
			return fmt.Errorf("line %d of session %q: %w %v", i, l.SessionID, ErrKeyMismatch, k)
		}
		if l.TurnID != "" && l.TurnID != k.TurnID {
			return fmt.Errorf("line %d of turn %q: %w %v", i, l.TurnID, ErrKeyMismatch, k)
		}
	}
	return nil
}

func checkOutputs(k turn.TurnKey, outputs []turn.Output) error {
	for i, o := range outputs {
		if o.ID == "" {
			return fmt.Errorf("output %d has no id", i)
		}
		if o.SessionID != "" && o.SessionID != k.SessionID {
			return fmt.Errorf("output %s of session %q: %w %v", o.ID, o.SessionID, ErrKeyMismatch, k)
		}
	}
	return nil
}

// CheckLine checks that l, written under k, belongs to k's session and turn.
func CheckLine(k turn.TurnKey, l turn.Line) error {
	if k.SessionID == "" || k.TurnID == "" {
		return errors.New("session id and turn id are required")
	}
	return checkLines(k, []turn.Line{l})
}

// LineTurn is the turn id stored for l written under k: k's (a line names
// its own turn or none; see checkLines).
func LineTurn(l turn.Line, k turn.TurnKey) string {
	if l.TurnID == "" {
		return k.TurnID
	}
	return l.TurnID
}

// OutputTurn is the turn id stored for o written under k: its own, or k's
// when empty.
func OutputTurn(o turn.Output, k turn.TurnKey) string {
	if o.TurnID == "" {
		return k.TurnID
	}
	return o.TurnID
}

// Lost returns the keys, in their order, whose lease renewal did not renew
// them (absent from renewed): turns another owner has taken over.
func Lost(keys, renewed []turn.TurnKey) []turn.TurnKey {
	held := make(map[turn.TurnKey]bool, len(renewed))
	for _, k := range renewed {
		held[k] = true
	}
	var lost []turn.TurnKey
	for _, k := range keys {
		if !held[k] {
			lost = append(lost, k)
		}
	}
	return lost
}

// InOrder returns the keys of found in the order of keys, each once: a
// store's answer to a question about keys, in the order it was asked.
func InOrder(keys, found []turn.TurnKey) []turn.TurnKey {
	set := make(map[turn.TurnKey]bool, len(found))
	for _, k := range found {
		set[k] = true
	}
	out := []turn.TurnKey{}
	for _, k := range keys {
		if set[k] {
			out = append(out, k)
			delete(set, k)
		}
	}
	return out
}

// Answered is turn.Store.Answered's map of the earliest final, non-replayed
// result per call id: read hands each such result to each, with the turn it
// was recorded in (ReplayedFrom). Nothing is read for no call ids.
func Answered(callIDs []string, read func(each func(turnID string, r *turn.Result)) error) (map[string]turn.Result, error) {
	answered := make(map[string]turn.Result)
	if len(callIDs) == 0 {
		return answered, nil
	}
	err := read(func(turnID string, r *turn.Result) {
		r.ReplayedFrom = turnID
		answered[r.CallID] = *r
	})
	if err != nil {
		return nil, err
	}
	return answered, nil
}
