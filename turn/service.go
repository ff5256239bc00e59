package turn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/turnd/turnd/budget"
	"github.com/turnd/turnd/dispatch"
	"github.com/turnd/turnd/tool"
)

// Config configures a Service. Zero fields take the defaults WithDefaults
// documents.
type Config struct {
	// Store persists everything. Required.
	Store Store
	// Tools returns the current tool registry; it is called once per turn so
	// that a config reload applies to the next turn. Required.
	Tools func() *tool.Registry
	// Logger receives the service's operational logs. Default: discard.
	Logger *slog.Logger
	// Owner names this process in turn leases. Default: a random id.
	Owner string
	// LeaseTTL is how long a turn stays owned by this process without a
	// renewal; a replica takes over a running turn whose lease expired.
	// Default 10s.
	LeaseTTL time.Duration
	// Budget is the projector config of sessions that do not set their own.
	// Default: budget's defaults (16 KiB, 400 lines, bytes, head_tail).
	Budget budget.Config
	// MaxCalls is the most calls a turn may carry. Default 128.
	MaxCalls int
	// MaxConcurrency caps the read calls of one wave running at once.
	// Default 16.
	MaxConcurrency int
	// OutputKeepCap is the most bytes of a truncated output kept for
	// GET /v1/outputs. Default 64 MiB.
	OutputKeepCap int64
	// OutputRetention is how long kept outputs are retrievable. Default 7 days.
	OutputRetention time.Duration
	// OutputSweep is how often expired outputs are deleted. Default 10 minutes.
	OutputSweep time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// WithDefaults returns c with its zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Owner == "" {
		c.Owner = newID("o_")
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = 10 * time.Second
	}
	c.Budget = c.Budget.WithDefaults()
	if c.MaxCalls <= 0 {
		c.MaxCalls = 128
	}
	if c.MaxConcurrency <= 0 {
		c.MaxConcurrency = 16
	}
	if c.OutputKeepCap <= 0 {
		c.OutputKeepCap = 64 << 20
	}
	if c.OutputRetention <= 0 {
		c.OutputRetention = 7 * 24 * time.Hour
	}
	if c.OutputSweep <= 0 {
		c.OutputSweep = 10 * time.Minute
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

func (c Config) validate() error {
	if c.Store == nil {
		return errors.New("turn: Config.Store is required")
	}
	if c.Tools == nil {
		return errors.New("turn: Config.Tools is required")
	}
	if err := c.Budget.Validate(); err != nil {
		return fmt.Errorf("turn: default budget: %w", err)
	}
	return nil
}

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

	mu      sync.Mutex
	active  map[TurnKey]*run
	closing bool
	waves   sync.WaitGroup // running waves
	loops   sync.WaitGroup // background loops
	stop    chan struct{}
	started atomic.Bool
}

// New builds a Service.
func New(cfg Config) (*Service, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	base, cancel := context.WithCancel(context.Background())
	return &Service{
		cfg:        cfg,
		store:      cfg.Store,
		log:        cfg.Logger,
		base:       base,
		cancelBase: cancel,
		active:     make(map[TurnKey]*run),
		stop:       make(chan struct{}),
	}, nil
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
	if len(spec.Metadata) > 0 && !json.Valid(spec.Metadata) {
		return Session{}, invalid("metadata", "not valid JSON")
	}
	sess := Session{
		ID:          spec.ID,
		Tools:       spec.Tools,
		Budget:      cfg,
		CallbackURL: spec.CallbackURL,
		Metadata:    spec.Metadata,
		CreatedAt:   s.now(),
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
	return sess, nil
}

// TurnRequest is an assistant turn to run.
type TurnRequest struct {
	ID            string // the client's idempotency key; generated when empty
	Calls         []Call
	Mode          dispatch.Mode
	FailurePolicy dispatch.FailurePolicy
}

// Submitted is what Submit reports.
type Submitted struct {
	Turn Turn
	// Replayed is true when the turn id was already recorded with the same
	// calls: no tool ran for this request.
	Replayed bool
}

// Submit records a turn and starts its wave in the background; the wave
// does not depend on ctx (a client that goes away loses nothing). Wait for
// the outcome with Await. A turn id already recorded with the same calls is
// returned as recorded (Replayed); with other calls it is ErrTurnConflict.
func (s *Service) Submit(ctx context.Context, sessionID string, req TurnRequest) (Submitted, error) {
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
	received, err := s.store.ReceiveTurn(ctx, Receive{
		Session:    Session{ID: sessionID, Budget: s.cfg.Budget, CreatedAt: now},
		Turn:       t,
		Line:       receivedLine(t, now),
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
	// Seq 1 means this turn created the session: no call can have been
	// answered in it yet, so prepare skips that lookup.
	r, err := s.prepare(ctx, received.Session, t, nil, received.Seq == 1)
	if err != nil {
		// The turn is recorded with our lease; recovery resumes it once the
		// lease expires.
		return Submitted{}, err
	}
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
	}
	return nil
}

// Await waits until the turn leaves status running in this process, or ctx
// ends, and returns its latest state. A turn not running here is read from
// the store.
func (s *Service) Await(ctx context.Context, k TurnKey) (Turn, error) {
	s.mu.Lock()
	r := s.active[k]
	s.mu.Unlock()
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

// Ledger returns a page of a session's ledger after seq.
func (s *Service) Ledger(ctx context.Context, sessionID string, after int64, limit int) ([]Line, error) {
	if !validPathID(sessionID) {
		return nil, ErrNotFound
	}
	if after < 0 {
		return nil, invalid("after", "must not be negative")
	}
	if limit <= 0 || limit > 1000 {
		return nil, invalid("limit", "must be 1-1000")
	}
	lines, err := s.store.Ledger(ctx, sessionID, after, limit)
	if err != nil {
		return nil, fmt.Errorf("reading ledger: %w", err)
	}
	return lines, nil
}

// GetOutput returns a kept full output.
func (s *Service) GetOutput(ctx context.Context, id string) (Output, error) {
	if !validPathID(id) {
		return Output{}, ErrNotFound
	}
	o, err := s.store.GetOutput(ctx, id)
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

func receivedLine(t Turn, at time.Time) Line {
	type callRef struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	}
	refs := make([]callRef, len(t.Calls))
	for i, c := range t.Calls {
		refs[i] = callRef{c.ID, c.Name}
	}
	data, _ := json.Marshal(struct {
		Calls         []callRef `json:"calls"`
		Mode          string    `json:"mode"`
		FailurePolicy string    `json:"failure_policy"`
	}{refs, string(t.Mode), string(t.FailurePolicy)})
	return Line{SessionID: t.SessionID, TurnID: t.ID, Kind: LineTurnReceived, At: at, Data: data}
}

// DefaultBudget returns the budget config of sessions that set none.
func (s *Service) DefaultBudget() budget.Config { return s.cfg.Budget }
