package turn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/turnd/turnd/budget"
	"github.com/turnd/turnd/completion"
	"github.com/turnd/turnd/dispatch"
	"github.com/turnd/turnd/tool"
)

// Service runs turns. Create it with New, start its background loops with
// Start, stop it with Shutdown.
type Service struct {
	cfg   Config
	store Store
	log   *slog.Logger

	// base is the parent of every wave's context; cancelling it cancels
	// every running wave (the end of a shutdown's grace period).
	base       context.Context
	cancelBase context.CancelFunc

	completions CompletionStore // nil when the store keeps no keys
	keys        *completion.Keyring

	// hookCtx is the parent of webhook deliveries; Shutdown cancels it when
	// its grace period ends. hookWake wakes the delivery loop.
	hookCtx     context.Context
	cancelHooks context.CancelFunc
	hookWake    chan struct{}

	// notes tells turn changes to watchers and other replicas (notify.go).
	notes notes

	// sessions caches sessions read from the store; recent remembers ids
	// written (sessioncache.go).
	sessions *sessionCache
	recent   *recentIDs

	mu      sync.Mutex
	active  map[TurnKey]*run
	closing bool
	waves   sync.WaitGroup // running waves
	workers workers        // the goroutines waves run on
	loops   sync.WaitGroup // background loops
	stop    chan struct{}
	started atomic.Bool
	trace   *tracing // nil: tracing off (trace.go)
	// progress holds the latest progress of calls running here (progress.go).
	progress progressBoard
	// waiting holds the turns WaitSettled waits on, polled together
	// (waiting.go); handedOff counts the waiters answered with what a
	// delivery here left them, not a read.
	waiting   waitSet
	handedOff atomic.Int64
	// parked holds what deliveries need of the keys parked here
	// (parkedhere.go).
	parked parkedHere
}

// New builds a Service.
func New(cfg Config) (*Service, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	base, cancel := context.WithCancel(context.Background())
	hookCtx, cancelHooks := context.WithCancel(context.Background())
	s := &Service{
		hookCtx:     hookCtx,
		cancelHooks: cancelHooks,
		hookWake:    make(chan struct{}, 1),
		notes:       newNotes(cfg.Notifier),
		sessions:    newSessionCache(sessionCacheSize),
		recent:      newRecentIDs(recentIDsSize),
		cfg:         cfg,
		log:         cfg.Logger,
		base:        base,
		cancelBase:  cancel,
		active:      make(map[TurnKey]*run),
		stop:        make(chan struct{}),
		trace:       newTracing(cfg),
	}
	// Every write that changes a turn wakes its watchers and is published
	// to the other replicas (observed, notify.go).
	s.store = observed{Store: cfg.Store, svc: s}
	s.completions = s.store
	return s, nil
}

// Owner returns the lease owner id of this service.
func (s *Service) Owner() string { return s.cfg.Owner }

// SessionSpec is a session to create.
type SessionSpec struct {
	ID          string // generated when empty
	Tools       []string
	Budget      *budget.Config // nil: the service default
	CallbackURL string
	Metadata    json.RawMessage
	// Approval is the session's own approval policy ("always", or
	// {"tools": [...], "when": [rules]}; see tool.ParseApproval), which
	// adds to the tools' own: it can ask for more approvals, never fewer.
	Approval json.RawMessage
}

// CreateSession creates a session explicitly.
func (s *Service) CreateSession(ctx context.Context, spec SessionSpec) (Session, error) {
	if spec.ID == "" {
		spec.ID = newID("s_")
	} else if !validPathID(spec.ID) {
		return Session{}, invalid("id", "must be 1-256 characters of [A-Za-z0-9._~:@+=-]")
	}
	cfg := s.cfg.Budget
	if spec.Budget != nil {
		cfg = spec.Budget.WithDefaults()
		if err := cfg.Validate(); err != nil {
			return Session{}, &InvalidError{Field: "budget", Reason: err.Error()}
		}
	}
	reg := s.cfg.Tools()
	if spec.Tools != nil {
		for i, name := range spec.Tools {
			if _, ok := reg.Lookup(name); !ok {
				return Session{}, invalid(fmt.Sprintf("tools[%d]", i), "unknown tool %q", name)
			}
		}
	}
	if spec.CallbackURL != "" {
		if err := checkCallbackURL(spec.CallbackURL); err != nil {
			return Session{}, &InvalidError{Field: "callback_url", Reason: err.Error()}
		}
		u, _ := url.Parse(spec.CallbackURL) // checked above
		if err := s.cfg.CallbackPolicy.checkHost(ctx, u.Hostname()); err != nil {
			return Session{}, &InvalidError{Field: "callback_url", Reason: err.Error()}
		}
	}
	if len(spec.Metadata) > 0 {
		if !json.Valid(spec.Metadata) {
			return Session{}, invalid("metadata", "not valid JSON")
		}
		if err := checkJSONText("metadata", spec.Metadata); err != nil {
			return Session{}, err
		}
	}
	approval, err := sessionApproval(reg, spec.Approval)
	if err != nil {
		return Session{}, err
	}
	sess := Session{
		ID:          spec.ID,
		Tools:       spec.Tools,
		Budget:      cfg,
		CallbackURL: spec.CallbackURL,
		Metadata:    spec.Metadata,
		CreatedAt:   s.now(),
		Approval:    approval,
	}
	if err := s.store.CreateSession(ctx, sess); err != nil {
		return Session{}, fmt.Errorf("creating session: %w", err)
	}
	return sess, nil
}

// GetSession returns a session.
func (s *Service) GetSession(ctx context.Context, id string) (Session, error) {
	if !validPathID(id) {
		return Session{}, ErrNotFound
	}
	sess, err := s.store.GetSession(ctx, id)
	if err != nil {
		return Session{}, fmt.Errorf("reading session: %w", err)
	}
	s.sessions.put(sess)
	return sess, nil
}

// storedSession returns the stored session id: from the session cache
// when it holds it (a session never changes once created, see
// sessionCache), else read from the store and cached.
func (s *Service) storedSession(ctx context.Context, id string) (Session, error) {
	if sess, ok := s.sessions.get(id); ok {
		return sess, nil
	}
	sess, err := s.store.GetSession(ctx, id)
	if err != nil {
		return Session{}, err
	}
	s.sessions.put(sess)
	return sess, nil
}

// TurnRequest is an assistant turn to run.
type TurnRequest struct {
	ID            string // the client's idempotency key; generated when empty
	Calls         []Call
	Mode          dispatch.Mode
	FailurePolicy dispatch.FailurePolicy
	// Async: the caller answers before the turn settles (Prefer:
	// respond-async), so Submit records the turn before it runs instead of
	// letting an all-read turn run first (see Config.ReadTurnWindow).
	Async bool
}

// Submitted is what Submit reports.
type Submitted struct {
	Turn Turn
	// Replayed is true when the turn id was already recorded with the same
	// calls: no tool ran for this request.
	Replayed bool
}

// Submit records a turn and starts its wave in the background; the wave
// does not depend on ctx (a client that goes away loses nothing). A turn of
// reads only may instead run first and be recorded whole when it settles
// (see reads.go): Submit then returns it settled. Wait for
// the outcome with Await. A turn id already recorded with the same calls is
// returned as recorded (Replayed); with other calls it is ErrTurnConflict.
func (s *Service) Submit(ctx context.Context, sessionID string, req TurnRequest) (Submitted, error) {
	return s.submit(ctx, sessionID, req, nil)
}

// submit is Submit with the early runs of a streamed turn (nil for a turn
// posted whole), which the turn's wave adopts or discards.
func (s *Service) submit(ctx context.Context, sessionID string, req TurnRequest, early *earlyPool) (Submitted, error) {
	if !validPathID(sessionID) {
		return Submitted{}, invalid("session_id", "must be 1-256 characters of [A-Za-z0-9._~:@+=-]")
	}
	if err := s.checkRequest(&req); err != nil {
		return Submitted{}, err
	}
	s.mu.Lock()
	closing := s.closing
	s.mu.Unlock()
	if closing {
		return Submitted{}, ErrShuttingDown
	}

	now := s.now()
	t := Turn{
		SessionID:     sessionID,
		ID:            req.ID,
		Status:        StatusRunning,
		Mode:          req.Mode,
		FailurePolicy: req.FailurePolicy,
		Calls:         req.Calls,
		Hash:          requestHash(req.Calls, req.Mode, req.FailurePolicy),
		CreatedAt:     now,
	}
	if !req.Async && s.cfg.ReadTurnWindow > 0 {
		if sub, ok, err := s.submitReads(ctx, t, early); ok || err != nil {
			return sub, err
		}
	}
	received, err := s.store.ReceiveTurn(ctx, Receive{
		Session:    Session{ID: sessionID, Budget: s.cfg.Budget, CreatedAt: now},
		Turn:       t,
		Line:       receivedLine(t, now, early != nil),
		LeaseOwner: s.cfg.Owner,
		LeaseUntil: now.Add(s.cfg.LeaseTTL),
	})
	if errors.Is(err, ErrTurnExists) {
		existing := received.Existing
		if existing.Hash != t.Hash {
			return Submitted{}, ErrTurnConflict
		}
		return Submitted{Turn: visible(existing), Replayed: true}, nil
	}
	if err != nil {
		return Submitted{}, fmt.Errorf("recording turn: %w", err)
	}
	s.sessions.put(received.Session)
	// Seq 1 means this turn created the session: no call can have been
	// answered in it yet, so prepare skips that lookup.
	r, err := s.prepare(ctx, received.Session, t, nil, received.Seq == 1)
	if err != nil {
		// The turn is recorded with our lease; recovery resumes it once the
		// lease expires.
		return Submitted{}, err
	}
	r.logCtx = context.WithoutCancel(ctx)
	r.early = early
	s.launch(r)
	return Submitted{Turn: visible(t)}, nil
}

func (s *Service) checkRequest(req *TurnRequest) error {
	if req.ID == "" {
		req.ID = newID("t_")
	} else if !validPathID(req.ID) {
		return invalid("id", "must be 1-256 characters of [A-Za-z0-9._~:@+=-]")
	}
	switch req.Mode {
	case "":
		req.Mode = dispatch.ModeOrdered
	case dispatch.ModeOrdered, dispatch.ModeConcurrent:
	default:
		return invalid("mode", "must be ordered or concurrent, not %q", req.Mode)
	}
	switch req.FailurePolicy {
	case "":
		req.FailurePolicy = dispatch.PolicyIsolate
	case dispatch.PolicyIsolate, dispatch.PolicyFailFast:
	default:
		return invalid("failure_policy", "must be isolate or fail_fast, not %q", req.FailurePolicy)
	}
	if len(req.Calls) > s.cfg.MaxCalls {
		return &InvalidError{Field: "calls", Reason: fmt.Sprintf("%d calls, more than the limit of %d", len(req.Calls), s.cfg.MaxCalls), TooLarge: true}
	}
	for i, c := range req.Calls {
		switch {
		case c.ID == "":
			return invalid(fmt.Sprintf("calls[%d].id", i), "required")
		case !validCallID(c.ID):
			return invalid(fmt.Sprintf("calls[%d].id", i), "must be 1-256 bytes of printable UTF-8")
		case c.Name == "":
			return invalid(fmt.Sprintf("calls[%d].name", i), "required")
		case len(c.Name) > 256:
			return invalid(fmt.Sprintf("calls[%d].name", i), "longer than 256 bytes")
		}
		if err := checkText(fmt.Sprintf("calls[%d].name", i), c.Name); err != nil {
			return err
		}
		if err := checkJSONText(fmt.Sprintf("calls[%d].arguments", i), c.Arguments); err != nil {
			return err
		}
	}
	return nil
}

// activeRun is the run of turn k in this process, nil when none is.
func (s *Service) activeRun(k TurnKey) *run {
	s.mu.Lock()
	r := s.active[k]
	s.mu.Unlock()
	return r
}

// Await waits until the turn leaves status running in this process, or ctx
// ends, and returns its latest state. A turn not running here is read from
// the store.
func (s *Service) Await(ctx context.Context, k TurnKey) (Turn, error) {
	r := s.activeRun(k)
	if r != nil {
		select {
		case <-r.done:
			if r.settleErr != nil {
				return Turn{}, r.settleErr
			}
			return visible(r.final), nil
		case <-ctx.Done():
			return Turn{}, ctx.Err()
		}
	}
	return s.GetTurn(ctx, k)
}

// GetTurn returns a turn's recorded state.
func (s *Service) GetTurn(ctx context.Context, k TurnKey) (Turn, error) {
	if !validPathID(k.SessionID) || !validPathID(k.TurnID) {
		return Turn{}, ErrNotFound
	}
	t, err := s.store.GetTurn(ctx, k)
	if err != nil {
		return Turn{}, fmt.Errorf("reading turn: %w", err)
	}
	return visible(t), nil
}

// Ledger returns a page of a session's ledger after seq: up to limit
// (1-1000) lines and MaxPageBytes of line data, at least one line.
func (s *Service) Ledger(ctx context.Context, sessionID string, after int64, limit int) ([]Line, error) {
	if !validPathID(sessionID) {
		return nil, ErrNotFound
	}
	if err := checkPage(after, limit); err != nil {
		return nil, err
	}
	lines, err := s.store.Ledger(ctx, sessionID, after, limit, MaxPageBytes)
	if err != nil {
		return nil, fmt.Errorf("reading ledger: %w", err)
	}
	return lines, nil
}

// TurnLedger returns up to limit (1-1000) lines of one turn with seq >
// after, in seq order and bounded by MaxPageBytes like Ledger's pages.
func (s *Service) TurnLedger(ctx context.Context, k TurnKey, after int64, limit int) ([]Line, error) {
	if !validPathID(k.SessionID) || !validPathID(k.TurnID) {
		return nil, ErrNotFound
	}
	if err := checkPage(after, limit); err != nil {
		return nil, err
	}
	lines, err := s.store.TurnLedger(ctx, k.SessionID, k.TurnID, after, limit, MaxPageBytes)
	if err != nil {
		return nil, fmt.Errorf("reading the ledger of a turn: %w", err)
	}
	return lines, nil
}

// checkPage checks the bounds of a ledger page (Ledger, TurnLedger).
func checkPage(after int64, limit int) error {
	if after < 0 {
		return invalid("after", "must not be negative")
	}
	if limit <= 0 || limit > 1000 {
		return invalid("limit", "must be 1-1000")
	}
	return nil
}

// GetOutput returns a kept full output: in the session its id routes to,
// or, for a legacy id, wherever the store finds it (see outputRoute).
func (s *Service) GetOutput(ctx context.Context, id string) (Output, error) {
	sid, ok := outputRoute(id)
	if !ok {
		return Output{}, ErrNotFound
	}
	o, err := s.store.GetOutput(ctx, sid, id)
	if err != nil {
		return Output{}, fmt.Errorf("reading output: %w", err)
	}
	return o, nil
}

// Tools returns the current registry.
func (s *Service) Tools() *tool.Registry { return s.cfg.Tools() }

// Ready reports whether the service can take turns: not shutting down and
// its store reachable with a current schema.
func (s *Service) Ready(ctx context.Context) error {
	s.mu.Lock()
	closing := s.closing
	s.mu.Unlock()
	if closing {
		return ErrShuttingDown
	}
	return s.store.Ping(ctx)
}

// now is the service clock at the stores' precision (microseconds), so a
// time reads the same from memory and from the store.
func (s *Service) now() time.Time { return s.cfg.Now().UTC().Truncate(time.Microsecond) }

// visible strips the internal CallStarted rows from a turn's results.
func visible(t Turn) Turn {
	out := t.Results[:0:0]
	for _, r := range t.Results {
		if r.Status.Final() {
			out = append(out, r)
		}
	}
	t.Results = out
	return t
}

// receivedLine is a turn's turn_received line; a streamed turn's says
// "streamed": true, and is written when its stream ended.
func receivedLine(t Turn, at time.Time, streamed bool) Line {
	b := make([]byte, 0, 64+48*len(t.Calls))
	b = append(b, `{"calls":[`...)
	for i, c := range t.Calls {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":`...)
		b = appendJSONString(b, c.ID)
		b = append(b, `,"name":`...)
		b = appendJSONString(b, c.Name)
		b = append(b, '}')
	}
	b = append(b, `],"mode":`...)
	b = appendJSONString(b, string(t.Mode))
	b = append(b, `,"failure_policy":`...)
	b = appendJSONString(b, string(t.FailurePolicy))
	if streamed {
		b = append(b, `,"streamed":true`...)
	}
	b = append(b, '}')
	return Line{SessionID: t.SessionID, TurnID: t.ID, Kind: LineTurnReceived, At: at, Data: b}
}

// DefaultBudget returns the budget config of sessions that set none.
func (s *Service) DefaultBudget() budget.Config { return s.cfg.Budget }

// WaitSettled waits until the turn settles or ctx ends and returns its
// latest state. It wakes on every change of the turn (Watch): made here, or
// on another replica when a Notifier is configured. A poll every second
// covers a lost notification and replicas without a Notifier: in a started
// service one read a second for every turn waited on here (pollWaiting).
func (s *Service) WaitSettled(ctx context.Context, k TurnKey) (Turn, error) {
	changed, stop := s.Watch(k)
	defer stop()
	var poll <-chan time.Time
	if s.started.Load() {
		defer s.waiting.add(k)()
	} else {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		poll = t.C
	}
	for {
		t, err := s.Await(ctx, k)
		if err != nil || t.Status.Settled() {
			if err != nil && ctx.Err() != nil {
				return s.GetTurn(context.WithoutCancel(ctx), k)
			}
			return t, err
		}
		select {
		case <-changed:
			// A delivery here that settled the turn left what it changed.
			if st, ok := s.waiting.settledTurn(k, t); ok {
				s.handedOff.Add(1)
				return st, nil
			}
		case <-poll:
		case <-ctx.Done():
			return s.GetTurn(context.WithoutCancel(ctx), k)
		}
	}
}

// initCompletions sets up the keyring from the configured secret or the
// one kept in the store.
func (s *Service) initCompletions(ctx context.Context) error {
	if s.completions == nil {
		return nil
	}
	raw := s.cfg.CompletionSecret
	if raw == "" {
		var err error
		raw, err = s.completions.Secret(ctx, func() (string, error) {
			sec, err := completion.NewSecret()
			if err != nil {
				return "", err
			}
			return sec.String(), nil
		})
		if err != nil {
			return fmt.Errorf("reading the completion secret: %w", err)
		}
	}
	sec, err := completion.ParseSecret(raw)
	if err != nil {
		return fmt.Errorf("completion secret: %w", err)
	}
	kr, err := completion.NewKeyring(sec)
	if err != nil {
		return fmt.Errorf("completion secret: %w", err)
	}
	s.keys = kr
	return nil
}

func projectorFor(s *Service, sess Session) *budget.Projector {
	p, err := budget.New(sess.Budget.WithDefaults())
	if err != nil {
		p, _ = budget.New(s.cfg.Budget)
	}
	return p
}
