package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/turnd/turnd/turn"
)

// On a sharded database (Options.Sharded: Citus, docs/citus.md) the
// statements that take rows of many sessions at once — the claims of
// expired leases and due webhooks, a replica's lease renewal — are split
// into a read across the shards that locks nothing, and then one routed
// statement per row, each its own single-shard transaction. Citus runs
// row locks (FOR UPDATE) only in statements routed to one shard, and a
// write across shards would be a distributed (two-phase) transaction. The
// claims keep their contract: a claim re-checks its row's condition under
// the row's lock, so two claimers never take the same turn or webhook;
// a row locked by another claimer or a commit is passed over (SKIP
// LOCKED), as the single statement does.

const (
	// sqlClaimCandidates is sqlClaimTurns' read: the expired leases, the
	// oldest first, locking nothing.
	sqlClaimCandidates = `SELECT session_id, id FROM turns
WHERE status = 'running'
  AND lease_until < $1::timestamptz - make_interval(secs => CASE WHEN resumes < $4 THEN 0
      ELSE $3::float8 * least(2 ^ (resumes - $4), 64) END)
ORDER BY lease_until
LIMIT $2`

	// sqlClaimTurn claims one candidate if its lease is still expired
	// when its row is locked, and returns the owner it replaced.
	sqlClaimTurn = `WITH c AS (
    SELECT session_id, id, lease_owner FROM turns
    WHERE session_id = $1 AND id = $2 AND status = 'running'
      AND lease_until < $4::timestamptz - make_interval(secs => CASE WHEN resumes < $7 THEN 0
          ELSE $6::float8 * least(2 ^ (resumes - $7), 64) END)
    FOR UPDATE SKIP LOCKED
)
UPDATE turns t SET lease_owner = $3, lease_until = $5, resumes = t.resumes + 1
FROM c
WHERE t.session_id = $1 AND t.id = $2 AND c.session_id = t.session_id AND c.id = t.id
RETURNING t.session_id, t.id, t.resumes, coalesce(c.lease_owner, '')`

	// sqlRenewLease is sqlRenewLeases for one turn.
	sqlRenewLease = `UPDATE turns SET lease_until = $4
WHERE session_id = $1 AND id = $2 AND lease_owner = $3`

	// sqlWebhookCandidates is sqlClaimWebhooks' read.
	sqlWebhookCandidates = `SELECT session_id, id FROM webhooks
WHERE delivered_at IS NULL AND dead_at IS NULL AND next_attempt_at <= $1
ORDER BY next_attempt_at, id
LIMIT $2`

	// sqlClaimWebhook claims one candidate if it is still open and due when
	// its row is locked.
	sqlClaimWebhook = `WITH c AS (
    SELECT session_id, id FROM webhooks
    WHERE session_id = $1 AND id = $2 AND delivered_at IS NULL AND dead_at IS NULL AND next_attempt_at <= $3
    FOR UPDATE SKIP LOCKED
)
UPDATE webhooks w SET next_attempt_at = $4, attempts = w.attempts + 1
FROM c
WHERE w.session_id = $1 AND w.id = $2 AND c.session_id = w.session_id AND c.id = w.id
RETURNING ` + returnedWebhook
)

// claimTurnsSharded is ClaimTurns on a sharded database.
func (s *Store) claimTurnsSharded(ctx context.Context, owner string, now, until time.Time, backoff time.Duration, limit int) ([]turn.Claim, error) {
	cands, err := queryAll(ctx, s.pool, "claiming turns: reading expired leases", collectKeys,
		sqlClaimCandidates, now, limit, backoff.Seconds(), turn.FreeResumes)
	if err != nil {
		return nil, err
	}
	claims := []turn.Claim{}
	for _, k := range cands {
		var c turn.Claim
		err := s.pool.QueryRow(ctx, sqlClaimTurn, k.SessionID, k.TurnID, owner, now, until, backoff.Seconds(), turn.FreeResumes).
			Scan(&c.SessionID, &c.TurnID, &c.Resumes, &c.PrevOwner)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			continue // claimed, committed or locked meanwhile
		case err != nil:
			return claims, wrap("claiming turn "+k.SessionID+"/"+k.TurnID, err)
		}
		claims = append(claims, c)
	}
	return claims, nil
}

// renewLeasesSharded is RenewLeases on a sharded database: the keys whose
// update matched no row are lost.
func (s *Store) renewLeasesSharded(ctx context.Context, owner string, until time.Time, keys []turn.TurnKey) ([]turn.TurnKey, error) {
	var lost []turn.TurnKey
	for _, k := range keys {
		tag, err := s.pool.Exec(ctx, sqlRenewLease, k.SessionID, k.TurnID, owner, until)
		if err != nil {
			return nil, wrap("renewing the lease of "+k.SessionID+"/"+k.TurnID, err)
		}
		if tag.RowsAffected() == 0 {
			lost = append(lost, k)
		}
	}
	return lost, nil
}

// claimWebhooksSharded is ClaimWebhooks on a sharded database.
func (s *Store) claimWebhooksSharded(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]turn.Webhook, error) {
	cands, err := queryAll(ctx, s.pool, "claiming webhooks: reading due webhooks", collectKeys, sqlWebhookCandidates, now, limit)
	if err != nil {
		return nil, err
	}
	hooks := []turn.Webhook{}
	for _, k := range cands { // k.TurnID is the webhook's id (collectKeys)
		got, err := queryAll(ctx, s.pool, "claiming webhook "+k.TurnID, collectWebhooks,
			sqlClaimWebhook, k.SessionID, k.TurnID, now, now.Add(lease))
		if err != nil {
			return hooks, err
		}
		hooks = append(hooks, got...)
	}
	return hooks, nil
}
