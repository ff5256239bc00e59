package codec

import (
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
	if _, err := RawJSON(fmt.Sprintf("webhook %s body", w.ID), w.Body); err != nil || len(w.Body) == 0 {
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
