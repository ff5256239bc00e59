package postgres

// Signals between replicas sharing one database: the turn notifier
// (LISTEN/NOTIFY) and cancel requests for turns another replica runs.

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/turnd/turnd/store/internal/sqlstore"
	"github.com/turnd/turnd/turn"
)

const (
	// Unchanged when the turn is not running (nothing to cancel) or already
	// has a request (the first one's time is kept). t reads the turn as it
	// was, to tell an unknown turn from one not running.
	sqlRequestCancel = `WITH t AS (
    SELECT FROM turns WHERE session_id = $1 AND id = $2
), u AS (
    UPDATE turns SET cancel_requested_at = COALESCE(cancel_requested_at, $3)
    WHERE session_id = $1 AND id = $2 AND status = 'running'
)
SELECT EXISTS (SELECT FROM t)`

	sqlCancelRequested = `SELECT t.session_id, t.id FROM turns t
JOIN unnest($1::text[], $2::text[]) AS k (session_id, id) ON t.session_id = k.session_id AND t.id = k.id
WHERE t.status = 'running' AND t.cancel_requested_at IS NOT NULL`

	sqlUnsettled = `SELECT t.session_id, t.id FROM turns t
JOIN unnest($1::text[], $2::text[]) AS k (session_id, id) ON t.session_id = k.session_id AND t.id = k.id
WHERE t.status IN ('running', 'waiting')`
)

// RequestCancel records a request to cancel a running turn; see turn.Store.
func (s *Store) RequestCancel(ctx context.Context, k turn.TurnKey, at time.Time) error {
	op := fmt.Sprintf("requesting cancel of turn %s/%s", k.SessionID, k.TurnID)
	var found bool
	if err := s.pool.QueryRow(ctx, sqlRequestCancel, k.SessionID, k.TurnID, at).Scan(&found); err != nil {
		return wrap(op, err)
	}
	if !found {
		return fmt.Errorf("%s: %w", op, turn.ErrNotFound)
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

// keysAmong returns those of keys that query ($1 session ids, $2 turn
// ids) returns, in the order given; op says what it was doing.
func (s *Store) keysAmong(ctx context.Context, op, query string, keys []turn.TurnKey) ([]turn.TurnKey, error) {
	if len(keys) == 0 {
		return []turn.TurnKey{}, nil
	}
	sids, tids := keyColumns(keys)
	found, err := queryAll(ctx, s.pool, op, collectKeys, query, sids, tids)
	if err != nil {
		return nil, err
	}
	return sqlstore.InOrder(keys, found), nil
}

// keyColumns returns keys as two arrays, of session ids and turn ids, for
// unnest.
func keyColumns(keys []turn.TurnKey) (sids, tids []string) {
	sids, tids = make([]string, len(keys)), make([]string, len(keys))
	for i, k := range keys {
		sids[i], tids[i] = k.SessionID, k.TurnID
	}
	return sids, tids
}

// NotifierOptions tunes a Notifier. The zero value is ready to use.
type NotifierOptions struct {
	// Logger receives the listener's connection problems. Default: discard.
	Logger *slog.Logger
	// PingInterval is how often an idle listening connection is checked:
	// a connection that died silently (a network partition) would otherwise
	// wait for notifications forever. Default 15s.
	PingInterval time.Duration
	// MinBackoff and MaxBackoff bound the wait between reconnection
	// attempts, which doubles from MinBackoff. Defaults 100ms and 5s.
	MinBackoff, MaxBackoff time.Duration
	// HelloInterval is how often a listening Notifier tells the others of
	// its channel that it is there; one that has heard no other replica
	// for three intervals publishes nothing (see Publish). Default 10s.
	HelloInterval time.Duration
	// JoinWait is how long a Notifier publishes after its listening
	// connection came up, before it counts what it heard: the others'
	// answers to its hello take a moment. Default 1s.
	JoinWait time.Duration
}

func (o NotifierOptions) withDefaults() NotifierOptions {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.PingInterval <= 0 {
		o.PingInterval = 15 * time.Second
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = 100 * time.Millisecond
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = max(o.MinBackoff, 5*time.Second)
	}
	if o.HelloInterval <= 0 {
		o.HelloInterval = 10 * time.Second
	}
	if o.JoinWait <= 0 {
		o.JoinWait = time.Second
	}
	return o
}

// Notifier is the turn.Notifier of replicas that share one PostgreSQL
// schema: Publish sends pg_notify on the schema's channel through the
// store's pool (or Options.NotifyURL's), and Listen holds one dedicated
// connection in LISTEN there, skipping this process's own publications.
// Listening Notifiers say hello to each other, and one that knows of no
// other replica publishes nothing. See ARCHITECTURE.md, "Replica
// notifications".
type Notifier struct {
	store   *Store
	channel string
	origin  string
	opts    NotifierOptions
	log     *slog.Logger

	// mu guards listening: one Listen at a time per Notifier.
	mu        sync.Mutex
	listening bool
	// listens while the listening connection is up; heardOther and
	// saidHello are when another replica was last heard and this one last
	// said hello, as durations since born (monotonic: a step of the wall
	// clock moves neither).
	born                  time.Time
	listens               atomic.Bool
	heardOther, saidHello atomic.Int64
}

var _ turn.Notifier = (*Notifier)(nil)

// NewNotifier returns a Notifier for the store's schema (the first of its
// connections' search_path that exists).
func NewNotifier(ctx context.Context, s *Store, o NotifierOptions) (*Notifier, error) {
	o = o.withDefaults()
	var schema string
	if err := s.pool.QueryRow(ctx, `SELECT COALESCE(current_schema(), '')`).Scan(&schema); err != nil {
		return nil, wrap("setting up turn notifications: reading the schema", err)
	}
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("setting up turn notifications: %w", err)
	}
	n := &Notifier{store: s, channel: channelFor(schema), origin: hex.EncodeToString(b), opts: o, log: o.Logger, born: time.Now()}
	n.heardOther.Store(math.MinInt64 / 2) // no other replica heard yet
	return n, nil
}

// channelFor names the notification channel of a schema. Channel names are
// identifiers: at most 63 bytes, hence the hash rather than the schema's
// name.
func channelFor(schema string) string {
	if schema == "" || schema == "public" {
		return "turnd_turns"
	}
	h := sha256.Sum256([]byte(schema))
	return "turnd_turns_" + hex.EncodeToString(h[:8])
}

// Channel returns the notification channel's name.
func (n *Notifier) Channel() string { return n.channel }

// publishChunk bounds the payloads of one statement.
const publishChunk = 1000

// sqlPublish notifies once per payload; NOTIFY folds duplicate payloads of
// one transaction into one. A notifying transaction takes a transaction id,
// so its commit would wait for a WAL flush like any write; a notification
// is a hint that loses nothing in a crash, so this one commits
// asynchronously (set_config local to its transaction; volatile, so the
// CTE is evaluated, not inlined away). Delivery does not wait for the flush
// either way. In BenchmarkTurnsVsInsert with a Notifier wired in, a
// synchronous commit here cost 20–45% of the turns per second (two noisy
// runs); the asynchronous one was within the noise.
const sqlPublish = `WITH async AS (
    SELECT set_config('synchronous_commit', 'off', true)
)
SELECT count(pg_notify($1, p)) FROM async, unnest($2::text[]) AS p`

// Publish announces that keys' turns changed; see turn.Notifier. One
// statement carries up to a thousand keys. While the Notifier is Alone it
// sends nothing: no replica would hear it (a waiter that misses a change
// learns of it from its own poll).
func (n *Notifier) Publish(ctx context.Context, keys ...turn.TurnKey) error {
	if n.Alone() {
		return nil
	}
	for len(keys) > 0 {
		chunk := keys[:min(len(keys), publishChunk)]
		keys = keys[len(chunk):]
		payloads := make([]string, len(chunk))
		for i, k := range chunk {
			payloads[i] = n.origin + " " + k.SessionID + "/" + k.TurnID
		}
		if _, err := n.store.notifyPool.Exec(ctx, sqlPublish, n.channel, payloads); err != nil {
			return wrap("publishing turn notifications", err)
		}
	}
	return nil
}

// pingTimeout is the least time a ping of the listening connection gets
// before the connection counts as broken.
const pingTimeout = 5 * time.Second

// errListening: a second Listen on one Notifier.
var errListening = errors.New("turn notifications: this notifier is already listening")

// Listen delivers the other replicas' publications to f until ctx ends, and
// then returns nil; see turn.Notifier. After every (re)connection it calls
// f with the zero TurnKey: notifications sent while no connection listened
// are lost, so every turn may have changed.
func (n *Notifier) Listen(ctx context.Context, f func(turn.TurnKey)) error {
	n.mu.Lock()
	if n.listening {
		n.mu.Unlock()
		return errListening
	}
	n.listening = true
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		n.listening = false
		n.mu.Unlock()
	}()

	backoff := n.opts.MinBackoff
	for {
		start := time.Now()
		err := n.listen(ctx, f)
		if ctx.Err() != nil {
			return nil
		}
		if time.Since(start) > n.opts.MaxBackoff {
			backoff = n.opts.MinBackoff // it had been listening a while
		}
		n.log.Warn("turn notifications: listening connection failed; reconnecting", "channel", n.channel, "in", backoff, "err", err)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		backoff = min(2*backoff, n.opts.MaxBackoff)
	}
}

// listen connects, listens and delivers until the connection fails or ctx
// ends; it always closes its connection before it returns.
func (n *Notifier) listen(ctx context.Context, f func(turn.TurnKey)) error {
	cfg := n.store.notifyPool.Config().ConnConfig.Copy()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return wrap("connecting", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{n.channel}.Sanitize()); err != nil {
		return wrap("listening", err)
	}
	n.log.Debug("turn notifications: listening", "channel", n.channel)
	// Publish counts what it heard once JoinWait has passed (alone); a
	// replica heard more recently still counts.
	if join := int64(n.now() - 3*n.opts.HelloInterval + n.opts.JoinWait); join > n.heardOther.Load() {
		n.heardOther.Store(join)
	}
	n.listens.Store(true)
	defer n.listens.Store(false) // one not listening knows of no one: it publishes
	n.say(ctx, payloadHello)
	f(turn.TurnKey{}) // anything may have changed while no one listened
	for {
		if n.since(&n.saidHello) >= n.opts.HelloInterval {
			n.say(ctx, payloadHere)
		}
		wctx, cancel := context.WithTimeout(ctx, min(n.opts.PingInterval, n.opts.HelloInterval))
		msg, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil:
			k, from, ok := n.parse(msg.Payload)
			if from != fromNone {
				n.heardOther.Store(int64(n.now()))
			}
			if ok {
				f(k)
			} else if from == fromHello {
				// A replica that just started listening learns of this
				// one at once, not at its next hello.
				n.say(ctx, payloadHere)
			}
		case ctx.Err() != nil:
			return ctx.Err()
		case pgconn.Timeout(err) || errors.Is(err, context.DeadlineExceeded):
			// Idle for a ping interval: make sure the connection still
			// answers. A timed-out wait leaves the connection usable.
			pctx, cancel := context.WithTimeout(ctx, max(n.opts.PingInterval, pingTimeout))
			err := conn.Ping(pctx)
			cancel()
			if err != nil {
				return wrap("pinging", err)
			}
		default:
			return wrap("waiting for notifications", err)
		}
	}
}

// Alone reports whether the listening connection is up and, past
// JoinWait, has heard no other replica say hello or here, or publish, for
// three hello intervals: a publication would reach no one, and Publish
// sends none.
func (n *Notifier) Alone() bool {
	return n.listens.Load() && n.since(&n.heardOther) > 3*n.opts.HelloInterval
}

// now is the time since the Notifier was made, on the monotonic clock.
func (n *Notifier) now() time.Duration { return time.Since(n.born) }

// since is the time since the moment at (a duration since born).
func (n *Notifier) since(at *atomic.Int64) time.Duration { return n.now() - time.Duration(at.Load()) }

// What follows a Notifier's origin when it tells the others that it
// listens: hello when it starts listening (the others answer here), here
// every hello interval and in answer. Turn keys always hold a '/', so no
// key reads as either.
const (
	payloadHello = "hello"
	payloadHere  = "here"
)

// sayTimeout bounds a hello or a here, sent from the listening loop.
const sayTimeout = 5 * time.Second

// say tells the other replicas of the channel that this one listens. It
// runs on the listening loop, so it waits at most sayTimeout, and a
// failure is logged, not the connection's end: the others then count
// this replica out after three hello intervals without a word, and its
// waiters fall back to their poll, as when a notification is lost.
func (n *Notifier) say(ctx context.Context, what string) {
	n.saidHello.Store(int64(n.now()))
	sctx, cancel := context.WithTimeout(ctx, sayTimeout)
	defer cancel()
	if _, err := n.store.notifyPool.Exec(sctx, sqlPublish, n.channel, []string{n.origin + " " + what}); err != nil && ctx.Err() == nil {
		n.log.Warn("turn notifications: telling the other replicas this one listens failed", "channel", n.channel, "err", err)
	}
}

// Who sent a payload: no other replica (this one, or malformed), another
// replica (a publication, or here), or another replica that just started
// listening (hello).
const (
	fromNone = iota
	fromOther
	fromHello
)

// parse reads a payload: the key of another replica's publication (ok),
// and who sent it. Its own publications and malformed payloads are
// skipped.
func (n *Notifier) parse(payload string) (k turn.TurnKey, from int, ok bool) {
	origin, key, cut := strings.Cut(payload, " ")
	if !cut || origin == n.origin || origin == "" {
		return turn.TurnKey{}, fromNone, false
	}
	switch key {
	case payloadHello:
		return turn.TurnKey{}, fromHello, false
	case payloadHere:
		return turn.TurnKey{}, fromOther, false
	}
	sid, tid, cut := strings.Cut(key, "/")
	if !cut || sid == "" || tid == "" {
		n.log.Debug("turn notifications: malformed payload", "payload", payload)
		return turn.TurnKey{}, fromNone, false
	}
	return turn.TurnKey{SessionID: sid, TurnID: tid}, fromOther, true
}
