package metrics

import (
	"context"
	"encoding/json"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/turnd/turnd/turn"
)

// storeOps are the op label values of turnd_store_duration_seconds, one per
// turn.Store method.
var storeOps = []string{"create_session", "get_session", "receive_turn", "lookup_turn", "record_turn", "commit", "get_turn", "ledger", "turn_ledger", "answered", "get_output", "delete_expired_outputs", "claim_turns", "renew_leases", "request_cancel", "cancel_requested", "unsettled", "ping", "issue_completion", "get_completion", "get_delivery", "deliver_early", "resolve", "heartbeat", "due_completions", "pending_count", "turn_completions", "record_late", "secret", "claim_webhooks", "mark_webhook", "turn_webhooks", "list_sessions", "list_turns", "list_parked", "approve", "claim_approved", "list_approvals"}

// timedStore times every call of a turn.Store into
// turnd_store_duration_seconds{op}. It embeds the store, so that a method
// added to turn.Store passes through (untimed) until it is added here.
type timedStore struct {
	turn.Store
	obs map[string]prometheus.Observer
}

// Store wraps st so that each of its operations is timed. Errors are timed
// too: a failing store is often a slow one.
func (m *Metrics) Store(st turn.Store) turn.Store {
	t := &timedStore{Store: st, obs: make(map[string]prometheus.Observer, len(storeOps))}
	for _, op := range storeOps {
		t.obs[op] = m.store.WithLabelValues(op)
	}
	return t
}

func (t *timedStore) since(op string, start time.Time) {
	t.obs[op].Observe(time.Since(start).Seconds())
}

// CreateSession implements turn.Store.
func (t *timedStore) CreateSession(ctx context.Context, s turn.Session) error {
	defer t.since("create_session", time.Now())
	return t.Store.CreateSession(ctx, s)
}

// GetSession implements turn.Store.
func (t *timedStore) GetSession(ctx context.Context, id string) (turn.Session, error) {
	defer t.since("get_session", time.Now())
	return t.Store.GetSession(ctx, id)
}

// ReceiveTurn implements turn.Store.
func (t *timedStore) ReceiveTurn(ctx context.Context, r turn.Receive) (turn.ReceiveResult, error) {
	defer t.since("receive_turn", time.Now())
	return t.Store.ReceiveTurn(ctx, r)
}

// LookupTurn implements turn.Store.
func (t *timedStore) LookupTurn(ctx context.Context, sessionID, turnID string, callIDs []string) (turn.Lookup, error) {
	defer t.since("lookup_turn", time.Now())
	return t.Store.LookupTurn(ctx, sessionID, turnID, callIDs)
}

// RecordTurn implements turn.Store.
func (t *timedStore) RecordTurn(ctx context.Context, r turn.Record) error {
	defer t.since("record_turn", time.Now())
	return t.Store.RecordTurn(ctx, r)
}

// Commit implements turn.Store.
func (t *timedStore) Commit(ctx context.Context, c turn.Commit) error {
	defer t.since("commit", time.Now())
	return t.Store.Commit(ctx, c)
}

// GetTurn implements turn.Store.
func (t *timedStore) GetTurn(ctx context.Context, k turn.TurnKey) (turn.Turn, error) {
	defer t.since("get_turn", time.Now())
	return t.Store.GetTurn(ctx, k)
}

// Ledger implements turn.Store.
func (t *timedStore) Ledger(ctx context.Context, sessionID string, after int64, limit, maxBytes int) ([]turn.Line, error) {
	defer t.since("ledger", time.Now())
	return t.Store.Ledger(ctx, sessionID, after, limit, maxBytes)
}

// TurnLedger implements turn.Store.
func (t *timedStore) TurnLedger(ctx context.Context, sessionID, turnID string, after int64, limit, maxBytes int) ([]turn.Line, error) {
	defer t.since("turn_ledger", time.Now())
	return t.Store.TurnLedger(ctx, sessionID, turnID, after, limit, maxBytes)
}

// Answered implements turn.Store.
func (t *timedStore) Answered(ctx context.Context, sessionID string, callIDs []string) (map[string]turn.Result, error) {
	defer t.since("answered", time.Now())
	return t.Store.Answered(ctx, sessionID, callIDs)
}

// GetOutput implements turn.Store.
func (t *timedStore) GetOutput(ctx context.Context, sessionID, id string) (turn.Output, error) {
	defer t.since("get_output", time.Now())
	return t.Store.GetOutput(ctx, sessionID, id)
}

// DeleteExpiredOutputs implements turn.Store.
func (t *timedStore) DeleteExpiredOutputs(ctx context.Context, now time.Time) (int64, error) {
	defer t.since("delete_expired_outputs", time.Now())
	return t.Store.DeleteExpiredOutputs(ctx, now)
}

// ClaimTurns implements turn.Store.
func (t *timedStore) ClaimTurns(ctx context.Context, owner string, now, until time.Time, backoff time.Duration, limit int) ([]turn.Claim, error) {
	defer t.since("claim_turns", time.Now())
	return t.Store.ClaimTurns(ctx, owner, now, until, backoff, limit)
}

// RenewLeases implements turn.Store.
func (t *timedStore) RenewLeases(ctx context.Context, owner string, until time.Time, keys []turn.TurnKey) ([]turn.TurnKey, error) {
	defer t.since("renew_leases", time.Now())
	return t.Store.RenewLeases(ctx, owner, until, keys)
}

// RequestCancel implements turn.Store.
func (t *timedStore) RequestCancel(ctx context.Context, k turn.TurnKey, at time.Time) error {
	defer t.since("request_cancel", time.Now())
	return t.Store.RequestCancel(ctx, k, at)
}

// CancelRequested implements turn.Store.
func (t *timedStore) CancelRequested(ctx context.Context, keys []turn.TurnKey) ([]turn.TurnKey, error) {
	defer t.since("cancel_requested", time.Now())
	return t.Store.CancelRequested(ctx, keys)
}

// Unsettled implements turn.Store.
func (t *timedStore) Unsettled(ctx context.Context, keys []turn.TurnKey) ([]turn.TurnKey, error) {
	defer t.since("unsettled", time.Now())
	return t.Store.Unsettled(ctx, keys)
}

// Ping implements turn.Store.
func (t *timedStore) Ping(ctx context.Context) error {
	defer t.since("ping", time.Now())
	return t.Store.Ping(ctx)
}

// IssueCompletion implements turn.Store.
func (t *timedStore) IssueCompletion(ctx context.Context, c turn.Completion) error {
	defer t.since("issue_completion", time.Now())
	return t.Store.IssueCompletion(ctx, c)
}

// GetCompletion implements turn.Store.
func (t *timedStore) GetCompletion(ctx context.Context, sessionID string, keyHash [32]byte) (turn.Completion, error) {
	defer t.since("get_completion", time.Now())
	return t.Store.GetCompletion(ctx, sessionID, keyHash)
}

// GetDelivery implements turn.Store.
func (t *timedStore) GetDelivery(ctx context.Context, sessionID string, keyHash [32]byte) (turn.DeliveryTarget, error) {
	defer t.since("get_delivery", time.Now())
	return t.Store.GetDelivery(ctx, sessionID, keyHash)
}

// DeliverEarly implements turn.Store.
func (t *timedStore) DeliverEarly(ctx context.Context, sessionID string, keyHash [32]byte, payload json.RawMessage, payloadHash [32]byte, now time.Time) (turn.Completion, error) {
	defer t.since("deliver_early", time.Now())
	return t.Store.DeliverEarly(ctx, sessionID, keyHash, payload, payloadHash, now)
}

// Resolve implements turn.Store.
func (t *timedStore) Resolve(ctx context.Context, b turn.ResolveBatch) (bool, error) {
	defer t.since("resolve", time.Now())
	return t.Store.Resolve(ctx, b)
}

// Heartbeat implements turn.Store.
func (t *timedStore) Heartbeat(ctx context.Context, sessionID string, keyHash [32]byte, now time.Time) (turn.Completion, error) {
	defer t.since("heartbeat", time.Now())
	return t.Store.Heartbeat(ctx, sessionID, keyHash, now)
}

// DueCompletions implements turn.Store.
func (t *timedStore) DueCompletions(ctx context.Context, now time.Time, limit int) ([]turn.Completion, error) {
	defer t.since("due_completions", time.Now())
	return t.Store.DueCompletions(ctx, now, limit)
}

// PendingCount implements turn.Store.
func (t *timedStore) PendingCount(ctx context.Context) (int64, error) {
	defer t.since("pending_count", time.Now())
	return t.Store.PendingCount(ctx)
}

// TurnCompletions implements turn.Store.
func (t *timedStore) TurnCompletions(ctx context.Context, k turn.TurnKey) ([]turn.Completion, error) {
	defer t.since("turn_completions", time.Now())
	return t.Store.TurnCompletions(ctx, k)
}

// RecordLate implements turn.Store.
func (t *timedStore) RecordLate(ctx context.Context, k turn.TurnKey, l turn.Late) (turn.LateOutcome, error) {
	defer t.since("record_late", time.Now())
	return t.Store.RecordLate(ctx, k, l)
}

// Secret implements turn.Store.
func (t *timedStore) Secret(ctx context.Context, generate func() (string, error)) (string, error) {
	defer t.since("secret", time.Now())
	return t.Store.Secret(ctx, generate)
}

// ClaimWebhooks implements turn.Store.
func (t *timedStore) ClaimWebhooks(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]turn.Webhook, error) {
	defer t.since("claim_webhooks", time.Now())
	return t.Store.ClaimWebhooks(ctx, now, lease, limit)
}

// MarkWebhook implements turn.Store.
func (t *timedStore) MarkWebhook(ctx context.Context, sessionID, id string, m turn.WebhookMark) error {
	defer t.since("mark_webhook", time.Now())
	return t.Store.MarkWebhook(ctx, sessionID, id, m)
}

// TurnWebhooks implements turn.Store.
func (t *timedStore) TurnWebhooks(ctx context.Context, k turn.TurnKey) ([]turn.Webhook, error) {
	defer t.since("turn_webhooks", time.Now())
	return t.Store.TurnWebhooks(ctx, k)
}

// ListSessions implements turn.Store.
func (t *timedStore) ListSessions(ctx context.Context, after turn.Cursor, limit int) ([]turn.SessionSummary, error) {
	defer t.since("list_sessions", time.Now())
	return t.Store.ListSessions(ctx, after, limit)
}

// ListTurns implements turn.Store.
func (t *timedStore) ListTurns(ctx context.Context, sessionID string, after turn.Cursor, limit int, status turn.Status) ([]turn.TurnSummary, error) {
	defer t.since("list_turns", time.Now())
	return t.Store.ListTurns(ctx, sessionID, after, limit, status)
}

// ListParked implements turn.Store.
func (t *timedStore) ListParked(ctx context.Context, after turn.Cursor, limit int) ([]turn.ParkedCall, error) {
	defer t.since("list_parked", time.Now())
	return t.Store.ListParked(ctx, after, limit)
}

// Approve implements turn.Store.
func (t *timedStore) Approve(ctx context.Context, a turn.Approve) (turn.Approved, error) {
	defer t.since("approve", time.Now())
	return t.Store.Approve(ctx, a)
}

// ClaimApproved implements turn.Store.
func (t *timedStore) ClaimApproved(ctx context.Context, k turn.TurnKey, owner string, until time.Time) (int, bool, error) {
	defer t.since("claim_approved", time.Now())
	return t.Store.ClaimApproved(ctx, k, owner, until)
}

// ListApprovals implements turn.Store.
func (t *timedStore) ListApprovals(ctx context.Context, after turn.Cursor, limit int) ([]turn.Approval, error) {
	defer t.since("list_approvals", time.Now())
	return t.Store.ListApprovals(ctx, after, limit)
}
