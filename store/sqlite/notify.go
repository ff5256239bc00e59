package sqlite

// Cancel requests. The embedded store serves one process, which cancels its
// own waves directly and needs no turn notifier (turn.Config.Notifier left
// nil); these keep its contract the same as the PostgreSQL store's.

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/turnd/turnd/store/internal/sqlstore"
	"github.com/turnd/turnd/turn"
)

const (
	// The row is matched whatever its status, so that RETURNING tells an
	// unknown turn from one not running; only a running turn without a
	// request takes the time.
	sqlRequestCancel = `UPDATE turns SET cancel_requested_at = CASE
    WHEN status = 'running' THEN COALESCE(cancel_requested_at, ?3) ELSE cancel_requested_at END
WHERE session_id = ?1 AND id = ?2
RETURNING 1`

	// The keys come as a JSON array of [session, turn] pairs, as in
	// RenewLeases.
	sqlCancelRequested = `SELECT session_id, id FROM turns
WHERE status = 'running' AND cancel_requested_at IS NOT NULL AND (session_id, id) IN (
    SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?1)
)`

	sqlUnsettled = `SELECT session_id, id FROM turns
WHERE status IN ('running', 'waiting') AND (session_id, id) IN (
    SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?1)
)`
)

// RequestCancel records a request to cancel a running turn; see turn.Store.
func (s *Store) RequestCancel(ctx context.Context, k turn.TurnKey, at time.Time) error {
	op := fmt.Sprintf("requesting cancel of turn %s/%s", k.SessionID, k.TurnID)
	var one int
	if err := s.write.QueryRowContext(ctx, sqlRequestCancel, k.SessionID, k.TurnID, micros(at)).Scan(&one); err != nil {
		return wrap(op, err) // sql.ErrNoRows: turn.ErrNotFound
	}
	return nil
}

// CancelRequested returns those of keys whose turn is running with a cancel
// request, in the order given; see turn.Store.
func (s *Store) CancelRequested(ctx context.Context, keys []turn.TurnKey) ([]turn.TurnKey, error) {
	return s.keysAmong(ctx, "reading cancel requests", sqlCancelRequested, keys)
}

// Unsettled returns those of keys whose turn is running or waiting, in the
// order given; see turn.Store.
func (s *Store) Unsettled(ctx context.Context, keys []turn.TurnKey) ([]turn.TurnKey, error) {
	return s.keysAmong(ctx, "reading unsettled turns", sqlUnsettled, keys)
}

// keysAmong returns those of keys that query (?1 the keys, keyPairs)
// returns, in the order given; op says what it was doing.
func (s *Store) keysAmong(ctx context.Context, op, query string, keys []turn.TurnKey) ([]turn.TurnKey, error) {
	if len(keys) == 0 {
		return []turn.TurnKey{}, nil
	}
	arg, err := keyPairs(keys)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	found, err := queryAll(ctx, s.read, op, collectKeys, query, arg)
	if err != nil {
		return nil, err
	}
	return sqlstore.InOrder(keys, found), nil
}

// keyPairs encodes keys as a JSON array of [session, turn] pairs, which
// the statements read with json_each.
func keyPairs(keys []turn.TurnKey) (string, error) {
	pairs := make([][2]string, len(keys))
	for i, k := range keys {
		pairs[i] = [2]string{k.SessionID, k.TurnID}
	}
	b, err := json.Marshal(pairs)
	return string(b), err
}
