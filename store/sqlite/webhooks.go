package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/turnd/turnd/store/internal/sqlstore"
	"github.com/turnd/turnd/turn"
)

// webhookColumns are the columns collectWebhooks reads, in order.
const webhookColumns = sqlstore.WebhookColumns

const (
	sqlInsertWebhook = `INSERT INTO webhooks (id, session_id, turn_id, url, event, body, next_attempt_at, created_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)`

	// sqlClaimWebhooks leases due open webhooks in one statement. Writes
	// are serialised on the one write connection, so no two claims
	// overlap. The condition and order are those of the webhooks_due index.
	sqlClaimWebhooks = `UPDATE webhooks SET next_attempt_at = ?2, attempts = attempts + 1
WHERE (session_id, id) IN (
    SELECT session_id, id FROM webhooks
    WHERE delivered_at IS NULL AND dead_at IS NULL AND next_attempt_at <= ?1
    ORDER BY next_attempt_at, id
    LIMIT ?3
)
RETURNING ` + webhookColumns

	sqlMarkWebhook = `UPDATE webhooks SET
    delivered_at    = CASE WHEN ?3 = 'delivered' THEN ?4 ELSE delivered_at END,
    dead_at         = CASE WHEN ?3 = 'dead' THEN ?4 ELSE dead_at END,
    next_attempt_at = CASE WHEN ?3 = 'retry' THEN ?5 ELSE next_attempt_at END,
    last_error      = CASE WHEN ?3 = 'delivered' THEN last_error ELSE ?6 END
WHERE session_id = ?1 AND id = ?2 AND delivered_at IS NULL AND dead_at IS NULL`

	sqlWebhookExists = `SELECT 1 FROM webhooks WHERE session_id = ? AND id = ?`

	sqlTurnWebhooks = `SELECT ` + webhookColumns + ` FROM webhooks
WHERE session_id = ? AND turn_id = ?
ORDER BY created_at, id`
)

// webhook is an outbox row to insert, checked and encoded before the
// transaction that inserts it.
type webhook struct {
	w *turn.Webhook
}

// encodeWebhook checks w (nil: none) for writing under k.
func encodeWebhook(k turn.TurnKey, w *turn.Webhook) (webhook, error) {
	if w == nil {
		return webhook{}, nil
	}
	if err := sqlstore.CheckWebhook(k, w); err != nil {
		return webhook{}, err
	}
	return webhook{w: w}, nil
}

// insert writes the webhook, if any, under k in tx.
func (h webhook) insert(ctx context.Context, tx *sql.Tx, k turn.TurnKey) error {
	if h.w == nil {
		return nil
	}
	_, err := tx.ExecContext(ctx, sqlInsertWebhook, h.w.ID, k.SessionID, k.TurnID, h.w.URL, h.w.Event,
		string(h.w.Body), micros(sqlstore.WebhookDue(h.w)), micros(h.w.CreatedAt))
	return err
}

// ClaimWebhooks leases up to limit due open webhooks until now+lease; see
// turn.WebhookStore.
func (s *Store) ClaimWebhooks(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]turn.Webhook, error) {
	if limit <= 0 {
		return []turn.Webhook{}, nil
	}
	return queryAll(ctx, s.write, "claiming webhooks", collectWebhooks, sqlClaimWebhooks, micros(now), micros(now.Add(lease)), limit)
}

// MarkWebhook records the outcome of an attempt on webhook id; see
// turn.WebhookStore.
func (s *Store) MarkWebhook(ctx context.Context, sessionID, id string, m turn.WebhookMark) error {
	op := "recording an attempt of webhook " + id
	if err := sqlstore.CheckWebhookMark(id, m); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, sqlMarkWebhook, sessionID, id, string(m.Outcome), nullMicros(m.At), nullMicros(m.NextAttemptAt), m.Error)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n > 0 {
			return err
		}
		var one int // finished already, or unknown (sql.ErrNoRows: turn.ErrNotFound)
		return tx.QueryRowContext(ctx, sqlWebhookExists, sessionID, id).Scan(&one)
	})
	return wrap(op, err)
}

// TurnWebhooks returns the webhooks of a turn, oldest first.
func (s *Store) TurnWebhooks(ctx context.Context, k turn.TurnKey) ([]turn.Webhook, error) {
	op := fmt.Sprintf("reading webhooks of turn %s/%s", k.SessionID, k.TurnID)
	return queryAll(ctx, s.read, op, collectWebhooks, sqlTurnWebhooks, k.SessionID, k.TurnID)
}

// collectWebhooks reads rows of webhookColumns and closes rows.
var collectWebhooks = collectRows(func(row scanner) (turn.Webhook, error) {
	var (
		r               sqlstore.WebhookRow
		next, created   int64
		delivered, dead sql.NullInt64
	)
	if err := row.Scan(r.Dest(&next, &created, &delivered, &dead)...); err != nil {
		return turn.Webhook{}, err
	}
	w := r.Webhook()
	w.NextAttemptAt, w.CreatedAt = fromMicros(next), fromMicros(created)
	w.DeliveredAt, w.DeadAt = fromNullMicros(delivered), fromNullMicros(dead)
	return w, nil
})
