package sqlstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/turnd/turnd/tool"
	"github.com/turnd/turnd/turn"
)

// SessionCols are a session's encoded JSON columns.
type SessionCols struct {
	Tools, Budget, Metadata []byte
	// Approval is the session's approval policy (nil for none), written
	// only when the session is created explicitly.
	Approval []byte
}

// SessionColumns encodes sess's tools, budget and metadata columns (Tools,
// Budget, RawJSON("metadata")), returning the first error unwrapped.
func SessionColumns(sess turn.Session) (SessionCols, error) {
	tools, err := Tools(sess.Tools)
	if err != nil {
		return SessionCols{}, err
	}
	budget, err := Budget(sess.Budget)
	if err != nil {
		return SessionCols{}, err
	}
	meta, err := RawJSON("metadata", sess.Metadata)
	if err != nil {
		return SessionCols{}, err
	}
	var approval []byte
	if sess.Approval != nil {
		if approval, err = json.Marshal(sess.Approval); err != nil {
			return SessionCols{}, fmt.Errorf("approval: %w", err)
		}
	}
	return SessionCols{Tools: tools, Budget: budget, Metadata: meta, Approval: approval}, nil
}

// SessionRow is a session's row as read, but for its creation time, which
// each store scans as its own type: the columns tools, budget, metadata
// (SessionColumns' encodings) and callback_url.
type SessionRow struct {
	Tools, Budget, Metadata, Approval []byte
	CallbackURL                       string
}

// Dest returns the scan destinations of the columns tools, budget,
// callback_url, metadata and created_at: r's fields and the store's
// destination of created_at.
func (r *SessionRow) Dest(created any) []any {
	return []any{&r.Tools, &r.Budget, &r.CallbackURL, &r.Metadata, created, &r.Approval}
}

// Session decodes r as the session id, created at createdAt.
func (r *SessionRow) Session(id string, createdAt time.Time) (turn.Session, error) {
	tools, err := DecodeTools(r.Tools)
	if err != nil {
		return turn.Session{}, err
	}
	budget, err := DecodeBudget(r.Budget)
	if err != nil {
		return turn.Session{}, err
	}
	sess := turn.Session{
		ID:          id,
		Tools:       tools,
		Budget:      budget,
		CallbackURL: r.CallbackURL,
		Metadata:    r.Metadata,
		CreatedAt:   createdAt,
	}
	if len(r.Approval) > 0 {
		a, err := tool.ParseApproval(r.Approval)
		if err != nil {
			return turn.Session{}, fmt.Errorf("session approval: %w", err)
		}
		sess.Approval = &a
	}
	return sess, nil
}

// ReceiveCols are the encoded parts of a turn.Receive.
type ReceiveCols struct {
	// Op names the operation in error messages: "receiving turn s/t".
	Op      string
	Calls   []byte
	Session SessionCols
	Line    []byte // the line as a ledger batch of one (LinesJSON)
}

// ReceiveColumns checks r (CheckReceive, filling in its empty ids) and
// encodes its turn's calls, its session's columns and its line. The
// errors are those of a store's ReceiveTurn.
func ReceiveColumns(r *turn.Receive) (ReceiveCols, error) {
	if err := CheckReceive(r); err != nil {
		return ReceiveCols{}, fmt.Errorf("receiving turn: %w", err)
	}
	op := fmt.Sprintf("receiving turn %s/%s", r.Turn.SessionID, r.Turn.ID)
	calls, err := Calls(r.Turn.Calls)
	if err != nil {
		return ReceiveCols{}, fmt.Errorf("%s: %w", op, err)
	}
	sess, err := SessionColumns(r.Session)
	if err != nil {
		return ReceiveCols{}, fmt.Errorf("%s: %w", op, err)
	}
	line, err := LinesJSON(turn.TurnKey{SessionID: r.Turn.SessionID, TurnID: r.Turn.ID}, []turn.Line{r.Line})
	if err != nil {
		return ReceiveCols{}, fmt.Errorf("%s: %w", op, err)
	}
	return ReceiveCols{Op: op, Calls: calls, Session: sess, Line: line}, nil
}

// TurnExists is ReceiveTurn's answer for a turn recorded before: the
// recorded turn, which get reads, with turn.ErrTurnExists.
func TurnExists(op string, get func() (turn.Turn, error)) (turn.ReceiveResult, error) {
	existing, err := get()
	if err != nil {
		return turn.ReceiveResult{}, fmt.Errorf("%s: turn exists, reading it: %w", op, err)
	}
	return turn.ReceiveResult{Existing: existing}, fmt.Errorf("%s: %w", op, turn.ErrTurnExists)
}

// CheckRecord checks a turn.Record before it is written: ids, a settled
// status with its time, at least the turn_received line first, lines and
// outputs of the turn's session, results of the turn's calls, a valid
// webhook. It does not modify r. The
// errors are those of a store's RecordTurn.
func CheckRecord(r *turn.Record) error {
	k := turn.TurnKey{SessionID: r.Turn.SessionID, TurnID: r.Turn.ID}
	if k.SessionID == "" || k.TurnID == "" {
		return errors.New("recording turn: session id and turn id are required")
	}
	var err error
	switch {
	case !r.Turn.Status.Settled():
		err = fmt.Errorf("status %q is not settled", r.Turn.Status)
	case r.Turn.SettledAt.IsZero():
		err = errors.New("no settlement time")
	case len(r.Lines) == 0 || r.Lines[0].Kind != turn.LineTurnReceived:
		err = fmt.Errorf("the first line must be %s", turn.LineTurnReceived)
	default:
		err = checkLines(k, r.Lines)
		if err == nil {
			err = turn.CheckResultCalls(r.Turn.Calls, r.Results)
		}
		if err == nil {
			err = checkOutputs(k, r.Outputs)
		}
		if err == nil && r.Webhook != nil {
			err = CheckWebhook(k, r.Webhook)
		}
	}
	if err != nil {
		// The label is formatted only on error: this runs on every turn.
		return fmt.Errorf("recording turn %s/%s: %w", k.SessionID, k.TurnID, err)
	}
	return nil
}
