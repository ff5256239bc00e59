package sqlstore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/turnd/turnd/turn"
)

// CheckWebhook checks an outbox row before it is written under k (the turn
// it announces): an id, a URL, an event, a JSON body and a creation time,
// and ids that are k's or empty. It does not modify w.
func CheckWebhook(k turn.TurnKey, w *turn.Webhook) error {
	switch {
	case w.ID == "":
		return errors.New("webhook has no id")
	case w.URL == "":
		return fmt.Errorf("webhook %s has no URL", w.ID)
	case w.Event == "":
		return fmt.Errorf("webhook %s has no event", w.ID)
	case w.CreatedAt.IsZero():
		return fmt.Errorf("webhook %s has no creation time", w.ID)
	case w.SessionID != "" && w.SessionID != k.SessionID, w.TurnID != "" && w.TurnID != k.TurnID:
		return fmt.Errorf("webhook %s of turn %s/%s: %w %v", w.ID, w.SessionID, w.TurnID, ErrKeyMismatch, k)
	}
	if len(w.Body) == 0 || !json.Valid(w.Body) {
		return fmt.Errorf("webhook %s body is not a JSON value", w.ID)
	}
	return nil
}

// WebhookDue is when a new webhook is first due: its NextAttemptAt, or its
// CreatedAt when that is zero.
func WebhookDue(w *turn.Webhook) time.Time {
	if w.NextAttemptAt.IsZero() {
		return w.CreatedAt
	}
	return w.NextAttemptAt
}

// CheckWebhookMark checks a delivery outcome before it is recorded.
func CheckWebhookMark(id string, m turn.WebhookMark) error {
	if id == "" {
		return errors.New("webhook id is required")
	}
	switch m.Outcome {
	case turn.WebhookDelivered, turn.WebhookDead:
		if m.At.IsZero() {
			return fmt.Errorf("webhook %s %s: the time is required", id, m.Outcome)
		}
	case turn.WebhookRetry:
		if m.NextAttemptAt.IsZero() {
			return fmt.Errorf("webhook %s retry: the next attempt time is required", id)
		}
	default:
		return fmt.Errorf("webhook %s: unknown outcome %q", id, m.Outcome)
	}
	return nil
}

// WebhookColumns are the columns of an outbox row, in the order of
// WebhookRow.Dest.
const WebhookColumns = `id, session_id, turn_id, url, event, body, attempts, next_attempt_at, last_error,
    created_at, delivered_at, dead_at`

// WebhookRow is an outbox row as read, but for its four times, which each
// store scans as its own type.
type WebhookRow struct {
	ID, SessionID, TurnID, URL, Event string
	Body                              []byte
	Attempts                          int
	LastError                         string
}

// Dest returns the scan destinations of WebhookColumns: r's fields and the
// store's destinations of next_attempt_at, created_at, delivered_at and
// dead_at.
func (r *WebhookRow) Dest(next, created, delivered, dead any) []any {
	return []any{&r.ID, &r.SessionID, &r.TurnID, &r.URL, &r.Event, &r.Body, &r.Attempts,
		next, &r.LastError, created, delivered, dead}
}

// Webhook is r as a turn.Webhook; the store sets the times. The body is
// copied (a driver may reuse r's buffers for the next row).
func (r *WebhookRow) Webhook() turn.Webhook {
	return turn.Webhook{ID: r.ID, SessionID: r.SessionID, TurnID: r.TurnID, URL: r.URL, Event: r.Event,
		Body: bytes.Clone(r.Body), Attempts: r.Attempts, LastError: r.LastError}
}
