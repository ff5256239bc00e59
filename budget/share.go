package budget

// Share splits a turn budget (Config.TurnLimit) among the outputs of a
// turn's calls, taken in call order: the output of call i may keep
// floor(left / (calls - i)), left being the turn budget minus what the
// outputs before it kept. An output within its share passes whole and
// leaves the rest to the later ones; no output gets less than
// floor(TurnLimit / calls). The split depends only on the outputs in call
// order, never on when they completed. A Share is not safe for concurrent
// use.
type Share struct {
	left  int64
	calls int
	next  int
}

// NewShare returns the split of turnLimit (in the unit of the session's
// Mode) among calls outputs; a turnLimit of 0 means no turn budget, and
// Limit then never lowers a projector's own limit.
func NewShare(turnLimit, calls int) *Share {
	if turnLimit <= 0 {
		return &Share{left: -1, calls: calls}
	}
	return &Share{left: int64(turnLimit), calls: calls}
}

// Limit returns the limit of the next call's output, or -1 when there is
// no turn budget.
func (s *Share) Limit() int {
	if s.left < 0 {
		return -1
	}
	rest := int64(max(s.calls-s.next, 1))
	return int(s.left / rest)
}

// Floor is the least share of any call: floor(TurnLimit / calls), or -1
// when there is no turn budget. A deferred completion, projected after its
// turn was accounted, gets this share.
func Floor(turnLimit, calls int) int {
	if turnLimit <= 0 {
		return -1
	}
	return turnLimit / max(calls, 1)
}

// Spend accounts the next call's output with its projection r; a call
// without an output is accounted with the zero Result.
func (s *Share) Spend(r Result, mode Mode) {
	s.spend(unitsOf(r.OriginalBytes-r.DroppedBytes, mode))
}

// SpendAtMost accounts the next call's output when only an upper bound of
// the bytes it kept is known (a result recorded before a resume): it is
// charged that bound, or its whole share if less.
func (s *Share) SpendAtMost(n int64, mode Mode) {
	units := unitsOf(n, mode)
	if l := s.Limit(); l >= 0 {
		units = min(units, int64(l))
	}
	s.spend(units)
}

func (s *Share) spend(units int64) {
	s.next++
	if s.left >= 0 {
		s.left = max(s.left-units, 0)
	}
}

// unitsOf converts n bytes to the unit of mode.
func unitsOf(n int64, mode Mode) int64 {
	if mode == ModeTokens {
		return (n + tokenBytes - 1) / tokenBytes
	}
	return n
}

// Projection is what a tool may set of its own outputs' projection: the
// window and the error patterns. Empty fields leave the session's.
type Projection struct {
	Window   Window   `json:"window,omitempty" yaml:"window"`
	Patterns []string `json:"patterns,omitempty" yaml:"patterns"`
}

// IsZero reports that o changes nothing.
func (o Projection) IsZero() bool { return o.Window == "" && len(o.Patterns) == 0 }

// Validate rejects an unknown window and invalid patterns, as
// [Config.Validate] does.
func (o Projection) Validate() error {
	return Config{Window: o.Window, Patterns: o.Patterns}.Validate()
}

// With returns a projector like p with o's window and patterns: p itself
// when o is zero. o must pass Validate.
func (p *Projector) With(o Projection) (*Projector, error) {
	if o.IsZero() {
		return p, nil
	}
	c := p.config
	if o.Window != "" {
		c.Window = o.Window
	}
	if len(o.Patterns) > 0 {
		c.Patterns = o.Patterns
	}
	return New(c, NoDefaults())
}
