package turn

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Notifier tells replicas sharing one store that turns changed, so that a
// waiter on one replica wakes when the change lands on another (a
// completion delivered there, a deadline its sweeper enforced, a
// settlement, a cancel request). Without one (Config.Notifier nil, the
// embedded store's one process) only this process's changes wake its
// waiters, which also poll slowly for the rest.
//
// Publications are hints, not data: a receiver reads the turn from the
// store. They may be lost (a listener reconnecting) or repeated; a waiter
// that must not wait forever on a lost one also polls, slowly.
type Notifier interface {
	// Publish announces that the recorded state or ledger of keys' turns
	// changed. The service calls it after the change committed, from one
	// goroutine, batching the changes made meanwhile.
	Publish(ctx context.Context, keys ...TurnKey) error
	// Listen calls f with every key another replica published, until ctx
	// ends, and then returns nil; it reconnects by itself. f(TurnKey{})
	// means publications may have been lost (Listen (re)connected): any
	// turn may have changed. f must not block. An error return means Listen
	// cannot listen at all; the service logs it and calls Listen again
	// after a pause.
	Listen(ctx context.Context, f func(TurnKey)) error
}

// A Notifier may also tell that no other replica would hear a publication
// now (Alone), as postgres.Notifier does while it hears no other replica:
// the service then queues none, instead of handing Publish keys it would
// drop.
type aloneNotifier interface {
	Notifier
	Alone() bool
}

// notes is how the service tells turn changes around: to the local
// watchers of a turn at once, and through the Notifier to the other
// replicas, which tell their watchers and check for cancel requests.
type notes struct {
	mu       sync.Mutex
	watchers map[TurnKey]map[chan struct{}]struct{}
	// For the notify loop: turns changed here, to publish; turns running
	// here that another replica changed, to check for a cancel request
	// (checkAll: every turn running here).
	publish  map[TurnKey]struct{}
	check    map[TurnKey]struct{}
	checkAll bool
	wake     chan struct{}
	// alone is the Notifier when it can tell that it is Alone, else nil.
	alone aloneNotifier
}

func newNotes(n Notifier) notes {
	alone, _ := n.(aloneNotifier)
	return notes{watchers: make(map[TurnKey]map[chan struct{}]struct{}), wake: make(chan struct{}, 1), alone: alone}
}

// signal wakes ch's receiver unless a wake is already pending.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Watch returns a channel that receives a value after each change of turn
// k — its status, results or ledger — made by this process or, with a
// Notifier, by another replica; stop ends the watch (call it once done; it
// may be called more than once). Changes coalesce: one value may stand for
// several, so on a value read the turn (or its ledger) again rather than
// counting. Watch before the first read, and no change after that read
// goes unnoticed.
func (s *Service) Watch(k TurnKey) (changed <-chan struct{}, stop func()) {
	ch := make(chan struct{}, 1)
	n := &s.notes
	n.mu.Lock()
	ws := n.watchers[k]
	if ws == nil {
		ws = make(map[chan struct{}]struct{})
		n.watchers[k] = ws
	}
	ws[ch] = struct{}{}
	n.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			n.mu.Lock()
			defer n.mu.Unlock()
			delete(n.watchers[k], ch)
			if len(n.watchers[k]) == 0 {
				delete(n.watchers, k)
			}
		})
	}
}

// changed is called after every write that changed turn k (see observed):
// it wakes k's watchers here and queues the publication for the others.
func (s *Service) changed(k TurnKey) { s.note(k, true) }

// note wakes k's watchers here and, with publish, queues the publication
// for the other replicas.
func (s *Service) note(k TurnKey, publish bool) {
	n := &s.notes
	publish = publish && s.cfg.Notifier != nil && s.started.Load() && !s.stopped() && (n.alone == nil || !n.alone.Alone())
	n.mu.Lock()
	for ch := range n.watchers[k] {
		signal(ch)
	}
	if publish {
		if n.publish == nil {
			n.publish = make(map[TurnKey]struct{})
		}
		n.publish[k] = struct{}{}
	}
	n.mu.Unlock()
	if publish {
		signal(n.wake)
	}
}

// remote is the Listen callback: another replica changed turn k (or, for
// the zero key, possibly any turn).
func (s *Service) remote(k TurnKey) {
	all := k == TurnKey{}
	here := !all && s.activeRun(k) != nil
	n := &s.notes
	n.mu.Lock()
	if all {
		for _, ws := range n.watchers {
			for ch := range ws {
				signal(ch)
			}
		}
		n.checkAll = true
	} else {
		for ch := range n.watchers[k] {
			signal(ch)
		}
		if here {
			// A turn running here changed elsewhere: most likely a cancel
			// request (see cancelElsewhere).
			if n.check == nil {
				n.check = make(map[TurnKey]struct{})
			}
			n.check[k] = struct{}{}
		}
	}
	n.mu.Unlock()
	if all || here {
		signal(n.wake)
	}
}

func (s *Service) stopped() bool {
	select {
	case <-s.stop:
		return true
	default:
		return false
	}
}

// startNotifier starts the notify loop and the listener; Start calls it
// when a Notifier is configured.
func (s *Service) startNotifier() {
	s.loops.Add(2)
	go s.notifyLoop()
	go s.listen()
}

// notifyLoop publishes the changes made here and applies the cancel
// requests that notifications point at, off the goroutines that made or
// heard them: a wave never waits on a publication, and changes made while
// one is sent go out together in the next. At Shutdown it publishes what is
// left.
func (s *Service) notifyLoop() {
	defer s.loops.Done()
	for {
		select {
		case <-s.stop:
			s.flushNotes()
			return
		case <-s.notes.wake:
			s.flushNotes()
		}
	}
}

// notifyTimeout bounds one pass of the notify loop.
const notifyTimeout = 10 * time.Second

func (s *Service) flushNotes() {
	n := &s.notes
	n.mu.Lock()
	publish, check, all := n.publish, n.check, n.checkAll
	n.publish, n.check, n.checkAll = nil, nil, false
	n.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), notifyTimeout)
	defer cancel()
	if len(publish) > 0 {
		keys := make([]TurnKey, 0, len(publish))
		for k := range publish {
			keys = append(keys, k)
		}
		if err := s.cfg.Notifier.Publish(ctx, keys...); err != nil {
			// Waiters elsewhere notice the changes at their next poll.
			s.log.Warn("publishing turn changes failed", "turns", len(keys), "err", err)
		}
	}
	var keys []TurnKey
	if all {
		keys = s.activeKeys()
	} else {
		for k := range check {
			keys = append(keys, k)
		}
	}
	if len(keys) > 0 {
		s.applyCancelRequests(ctx, keys)
	}
}

// listenRetry is the pause before calling a Notifier's Listen again after
// it failed.
const listenRetry = time.Second

// listen runs the Notifier's Listen until Shutdown.
func (s *Service) listen() {
	defer s.loops.Done()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			err := s.cfg.Notifier.Listen(ctx, s.remote)
			if ctx.Err() != nil {
				return
			}
			s.log.Warn("listening for turn changes failed; retrying", "in", listenRetry, "err", err)
			t := time.NewTimer(listenRetry)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}()
	<-s.stop
	cancel()
	<-done
}

func (s *Service) activeKeys() []TurnKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]TurnKey, 0, len(s.active))
	for k := range s.active {
		keys = append(keys, k)
	}
	return keys
}

// applyCancelRequests cancels the waves here of those of keys whose turn
// another replica asked to cancel (see cancelElsewhere). The lease renewal
// calls it for every turn running here; the notify loop for those a
// notification points at.
func (s *Service) applyCancelRequests(ctx context.Context, keys []TurnKey) {
	requested, err := s.store.CancelRequested(ctx, keys)
	if err != nil {
		s.log.Warn("reading cancel requests failed", "err", err)
		return
	}
	for _, k := range requested {
		r := s.activeRun(k)
		if r != nil && !r.cancelRequested.Swap(true) {
			s.log.Info("cancelling turn at a request made on another replica", "session_id", k.SessionID, "turn_id", k.TurnID)
			r.cancel()
		}
	}
}

// cancelElsewhere cancels a running turn whose wave is not in this process:
// it records a cancel request, which the replica running the wave applies
// at its next lease renewal (a third of the lease TTL) or, with a Notifier,
// as soon as the request's publication reaches it; then it waits for the
// turn to leave status running and cancels it from there (Cancel again): a
// cancelled or otherwise settled turn is returned, a turn that parked its
// calls before its owner saw the request has them cancelled here, and a
// turn whose owner died is resumed by a recovery pass (here or on another
// replica), which applies the request too. It waits until ctx ends.
func (s *Service) cancelElsewhere(ctx context.Context, k TurnKey) (Turn, error) {
	changed, stop := s.Watch(k)
	defer stop()
	if err := s.store.RequestCancel(ctx, k, s.now()); err != nil {
		return Turn{}, fmt.Errorf("requesting cancel: %w", err)
	}
	// The poll covers a lost notification, and the case without a Notifier.
	poll := time.NewTicker(time.Second)
	defer poll.Stop()
	for {
		// Read first: the turn may have left running before the watch began.
		t, err := s.GetTurn(ctx, k)
		if err != nil {
			return Turn{}, err
		}
		here := s.activeRun(k) != nil
		if t.Status != StatusRunning || here {
			stop()
			return s.Cancel(ctx, k)
		}
		select {
		case <-changed:
		case <-poll.C:
		case <-ctx.Done():
			return Turn{}, ctx.Err()
		}
	}
}

// observed is the service's view of its Store: every write that changes a
// turn's state or ledger calls Service.changed once it returned without
// error. Wrapping the store rather than calling changed at each call site
// keeps a future write from forgetting to.
type observed struct {
	Store
	svc *Service
}

// Writes of turns and answers are also remembered (recentIDs), as hints
// for the all-read path.

func (o observed) ReceiveTurn(ctx context.Context, r Receive) (ReceiveResult, error) {
	res, err := o.Store.ReceiveTurn(ctx, r)
	if err == nil {
		o.svc.changed(TurnKey{r.Turn.SessionID, r.Turn.ID})
	}
	if err == nil || errors.Is(err, ErrTurnExists) {
		o.svc.recent.add(recentID{session: r.Turn.SessionID, id: r.Turn.ID})
	}
	return res, err
}

func (o observed) RecordTurn(ctx context.Context, r Record) error {
	err := o.Store.RecordTurn(ctx, r)
	if err == nil {
		// Not published: RecordTurn records only a turn that did not
		// exist (else ErrTurnExists), and every watcher reads its turn
		// before waiting (a turn not found is not waited for), so no
		// replica can be waiting on this change, and none runs the turn,
		// which is settled.
		o.svc.note(TurnKey{r.Turn.SessionID, r.Turn.ID}, false)
		o.svc.recent.add(append(answeredIDs(r.Turn.SessionID, r.Results), recentID{session: r.Turn.SessionID, id: r.Turn.ID})...)
	} else if errors.Is(err, ErrTurnExists) {
		o.svc.recent.add(recentID{session: r.Turn.SessionID, id: r.Turn.ID})
	}
	return err
}

func (o observed) Commit(ctx context.Context, c Commit) error {
	err := o.Store.Commit(ctx, c)
	if err == nil {
		o.svc.changed(c.Key)
		o.svc.recent.add(answeredIDs(c.Key.SessionID, c.Results)...)
	}
	return err
}

func (o observed) Resolve(ctx context.Context, b ResolveBatch) (bool, error) {
	settled, err := o.Store.Resolve(ctx, b)
	if err == nil {
		if settled {
			if h, ok := settledBy(b); ok {
				o.svc.waiting.settle(b.Key, h)
			}
			if b.SettleWebhook != nil {
				o.svc.wakeWebhooks() // the settlement wrote one
			}
		}
		o.svc.changed(b.Key)
	}
	return settled, err
}

func (o observed) RecordLate(ctx context.Context, k TurnKey, l Late) (LateOutcome, error) {
	outcome, err := o.Store.RecordLate(ctx, k, l)
	if err == nil && outcome == LateRecorded {
		o.svc.changed(k)
	}
	return outcome, err
}

func (o observed) RequestCancel(ctx context.Context, k TurnKey, at time.Time) error {
	err := o.Store.RequestCancel(ctx, k, at)
	if err == nil {
		o.svc.changed(k)
	}
	return err
}

func (o observed) Approve(ctx context.Context, a Approve) (Approved, error) {
	got, err := o.Store.Approve(ctx, a)
	if err == nil {
		o.svc.changed(a.Key)
	}
	return got, err
}

func (o observed) ClaimApproved(ctx context.Context, k TurnKey, owner string, until time.Time) (int, bool, error) {
	epoch, ok, err := o.Store.ClaimApproved(ctx, k, owner, until)
	if err == nil && ok {
		o.svc.changed(k)
	}
	return epoch, ok, err
}
