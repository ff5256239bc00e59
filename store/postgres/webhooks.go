package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/turnd/turnd/store/internal/sqlstore"
	"github.com/turnd/turnd/turn"
)

// writeWebhook is the write fragment (see writes.go) that inserts a
// settlement's webhook into the outbox: Commit's gate is its lease check,
// the settling statement's gate the turn's move from waiting to settled, so
// the webhook is written exactly when the settlement is.
var writeWebhook = webhookFragment("gate")

// webhookFragment is the webhook's write fragment, writing when the CTE
// named gate returned a row.
func webhookFragment(gate string) string {
	return `, hook AS (
    INSERT INTO webhooks (id, session_id, turn_id, url, event, body, next_attempt_at, created_at)
    SELECT @w_id, @session, @turn, @w_url, @w_event, @w_body::json, @w_next, @w_created
    WHERE EXISTS (SELECT FROM ` + gate + `)
)`
}

// webhookArgs encodes w, written under k, as the arguments of writeWebhook.
func webhookArgs(k turn.TurnKey, w *turn.Webhook) (*webhookParams, error) {
	if err := sqlstore.CheckWebhook(k, w); err != nil {
		return nil, err
	}
	p := webhookParamsOf(w)
	return &p, nil
}

// webhookParamsOf is w as a statement writes it (not checked: see
// webhookArgs).
func webhookParamsOf(w *turn.Webhook) webhookParams {
	return webhookParams{id: w.ID, url: w.URL, event: w.Event, body: string(w.Body),
		next: sqlstore.WebhookDue(w), created: w.CreatedAt}
}

// webhookColumns are the columns collectWebhooks scans, in order;
// returnedWebhook the same of an UPDATE webhooks w.
const (
	webhookColumns  = sqlstore.WebhookColumns
	returnedWebhook = `w.id, w.session_id, w.turn_id, w.url, w.event, w.body, w.attempts, w.next_attempt_at, w.last_error,
    w.created_at, w.delivered_at, w.dead_at`
)

const (
	// sqlClaimWebhooks leases due open webhooks. As in ClaimTurns, SKIP
	// LOCKED makes concurrent claimers pass over each other's rows instead
	// of waiting, and FOR UPDATE re-checks next_attempt_at on the latest
	// row version, so a webhook claimed meanwhile (its next_attempt_at
	// moved past now) is not taken twice. The condition and order are those
	// of the webhooks_due index.
	sqlClaimWebhooks = `UPDATE webhooks w SET next_attempt_at = $2, attempts = w.attempts + 1
FROM (
    SELECT session_id, id FROM webhooks
    WHERE delivered_at IS NULL AND dead_at IS NULL AND next_attempt_at <= $1
    ORDER BY next_attempt_at, id
    LIMIT $3
    FOR UPDATE SKIP LOCKED
) c
WHERE w.session_id = c.session_id AND w.id = c.id
RETURNING ` + returnedWebhook

	// sqlMarkWebhook records an attempt's outcome on an open webhook ($3 is
	// the outcome); it reports whether it did and whether the webhook
	// exists at all (a finished one is left as it is).
	sqlMarkWebhook = `WITH m AS (
    UPDATE webhooks SET
        delivered_at    = CASE WHEN $3 = 'delivered' THEN $4::timestamptz ELSE delivered_at END,
        dead_at         = CASE WHEN $3 = 'dead' THEN $4::timestamptz ELSE dead_at END,
        next_attempt_at = CASE WHEN $3 = 'retry' THEN $5::timestamptz ELSE next_attempt_at END,
        last_error      = CASE WHEN $3 = 'delivered' THEN last_error ELSE $6::text END
    WHERE session_id = $1 AND id = $2 AND delivered_at IS NULL AND dead_at IS NULL
    RETURNING 1
)
SELECT EXISTS (SELECT FROM m), EXISTS (SELECT FROM webhooks WHERE session_id = $1 AND id = $2)`

	sqlTurnWebhooks = `SELECT ` + webhookColumns + ` FROM webhooks
WHERE session_id = $1 AND turn_id = $2
ORDER BY created_at, id`
)

// ClaimWebhooks leases up to limit due open webhooks until now+lease; see
// turn.WebhookStore.
func (s *Store) ClaimWebhooks(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]turn.Webhook, error) {
	if limit <= 0 {
		return []turn.Webhook{}, nil
	}
	if s.sharded {
		return s.claimWebhooksSharded(ctx, now, lease, limit)
	}
	return queryAll(ctx, s.pool, "claiming webhooks", collectWebhooks, sqlClaimWebhooks, now, now.Add(lease), limit)
}

// MarkWebhook records the outcome of an attempt on webhook id; see
// turn.WebhookStore.
func (s *Store) MarkWebhook(ctx context.Context, sessionID, id string, m turn.WebhookMark) error {
	op := "recording an attempt of webhook " + id
	if err := sqlstore.CheckWebhookMark(id, m); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	var marked, exists bool
	err := s.pool.QueryRow(ctx, sqlMarkWebhook, sessionID, id, string(m.Outcome), nullTime(m.At), nullTime(m.NextAttemptAt), m.Error).
		Scan(&marked, &exists)
	if err != nil {
		return wrap(op, err)
	}
	if !exists {
		return fmt.Errorf("%s: %w", op, turn.ErrNotFound)
	}
	return nil
}

// TurnWebhooks returns the webhooks of a turn, oldest first.
func (s *Store) TurnWebhooks(ctx context.Context, k turn.TurnKey) ([]turn.Webhook, error) {
	op := fmt.Sprintf("reading webhooks of turn %s/%s", k.SessionID, k.TurnID)
	return queryAll(ctx, s.pool, op, collectWebhooks, sqlTurnWebhooks, k.SessionID, k.TurnID)
}

// collectWebhooks reads rows of webhookColumns and closes rows.
func collectWebhooks(rows pgx.Rows) ([]turn.Webhook, error) {
	var (
		r                            sqlstore.WebhookRow
		next, created, deliv, deadAt pgtype.Timestamptz
	)
	return forEach(rows, r.Dest(&next, &created, &deliv, &deadAt), func() (turn.Webhook, error) {
		w := r.Webhook()
		w.NextAttemptAt, w.CreatedAt = fromNullTime(next), fromNullTime(created)
		w.DeliveredAt, w.DeadAt = fromNullTime(deliv), fromNullTime(deadAt)
		return w, nil
	})
}
