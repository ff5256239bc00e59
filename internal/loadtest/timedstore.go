package loadtest

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/turnd/turnd/turn"
)

// TimedStore wraps a turn.Store and counts and times its calls, to tell how
// many store round trips a turn costs and how long the service waits on
// each. The methods on the hot path (and the background ones, to tell them
// apart) are timed; the others pass through untouched.
//
// Wrapping hides any optional interface the wrapped store implements beyond
// turn.Store; the service does not look for one today.
type TimedStore struct {
	turn.Store
	stats [numStoreOps]struct{ calls, errors, nanos atomic.Int64 }
}

// NewTimedStore wraps s.
func NewTimedStore(s turn.Store) *TimedStore { return &TimedStore{Store: s} }

type storeOp int

const (
	opReceiveTurn storeOp = iota
	opAnswered
	opCommit
	opGetTurn
	opGetSession
	opClaimTurns
	opRenewLeases
	numStoreOps
)

var storeOpNames = [numStoreOps]string{
	"ReceiveTurn", "Answered", "Commit", "GetTurn", "GetSession", "ClaimTurns", "RenewLeases",
}

func (s *TimedStore) record(op storeOp, t0 time.Time, err error) {
	st := &s.stats[op]
	st.calls.Add(1)
	st.nanos.Add(int64(time.Since(t0)))
	if err != nil {
		st.errors.Add(1)
	}
}

// ReceiveTurn implements turn.Store.
func (s *TimedStore) ReceiveTurn(ctx context.Context, r turn.Receive) (turn.ReceiveResult, error) {
	t0 := time.Now()
	res, err := s.Store.ReceiveTurn(ctx, r)
	s.record(opReceiveTurn, t0, err)
	return res, err
}

// Answered implements turn.Store.
func (s *TimedStore) Answered(ctx context.Context, sessionID string, callIDs []string) (map[string]turn.Result, error) {
	t0 := time.Now()
	res, err := s.Store.Answered(ctx, sessionID, callIDs)
	s.record(opAnswered, t0, err)
	return res, err
}

// Commit implements turn.Store.
func (s *TimedStore) Commit(ctx context.Context, c turn.Commit) error {
	t0 := time.Now()
	err := s.Store.Commit(ctx, c)
	s.record(opCommit, t0, err)
	return err
}

// GetTurn implements turn.Store.
func (s *TimedStore) GetTurn(ctx context.Context, k turn.TurnKey) (turn.Turn, error) {
	t0 := time.Now()
	t, err := s.Store.GetTurn(ctx, k)
	s.record(opGetTurn, t0, err)
	return t, err
}

// GetSession implements turn.Store.
func (s *TimedStore) GetSession(ctx context.Context, id string) (turn.Session, error) {
	t0 := time.Now()
	sess, err := s.Store.GetSession(ctx, id)
	s.record(opGetSession, t0, err)
	return sess, err
}

// ClaimTurns implements turn.Store.
func (s *TimedStore) ClaimTurns(ctx context.Context, owner string, now, until time.Time, backoff time.Duration, limit int) ([]turn.Claim, error) {
	t0 := time.Now()
	keys, err := s.Store.ClaimTurns(ctx, owner, now, until, backoff, limit)
	s.record(opClaimTurns, t0, err)
	return keys, err
}

// RenewLeases implements turn.Store.
func (s *TimedStore) RenewLeases(ctx context.Context, owner string, until time.Time, keys []turn.TurnKey) ([]turn.TurnKey, error) {
	t0 := time.Now()
	lost, err := s.Store.RenewLeases(ctx, owner, until, keys)
	s.record(opRenewLeases, t0, err)
	return lost, err
}

// StoreCall is what a TimedStore recorded of one method.
type StoreCall struct {
	Name   string
	Calls  int64
	Errors int64
	// Total is the time callers spent in the method, summed over calls
	// (including waits for a pool connection).
	Total time.Duration
}

// Mean is the average time of one call.
func (c StoreCall) Mean() time.Duration {
	if c.Calls == 0 {
		return 0
	}
	return c.Total / time.Duration(c.Calls)
}

// StoreCalls is a snapshot of a TimedStore's counters, one entry per timed
// method in a fixed order.
type StoreCalls []StoreCall

// Snapshot returns the counters so far.
func (s *TimedStore) Snapshot() StoreCalls {
	out := make(StoreCalls, numStoreOps)
	for i := range out {
		st := &s.stats[i]
		out[i] = StoreCall{
			Name: storeOpNames[i], Calls: st.calls.Load(), Errors: st.errors.Load(),
			Total: time.Duration(st.nanos.Load()),
		}
	}
	return out
}

// Sub returns the counters of c minus those of an earlier snapshot.
func (c StoreCalls) Sub(earlier StoreCalls) StoreCalls {
	out := make(StoreCalls, len(c))
	for i, x := range c {
		out[i] = x
		if i < len(earlier) {
			out[i].Calls -= earlier[i].Calls
			out[i].Errors -= earlier[i].Errors
			out[i].Total -= earlier[i].Total
		}
	}
	return out
}

// Calls returns the total number of calls: store round trips, since every
// timed method is one statement (GetTurn one batch).
func (c StoreCalls) Calls() int64 {
	var n int64
	for _, x := range c {
		n += x.Calls
	}
	return n
}
