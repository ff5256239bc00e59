package budget

import "math"

// tokenBytes is the number of bytes one token stands for in ModeTokens.
const tokenBytes = 4

// Units named by markers and by [Result.Unit].
const (
	unitBytes  = "bytes"
	unitTokens = "tokens"
	unitLines  = "lines"
)

// Projector projects outputs onto one Config. It is immutable and safe for
// concurrent use.
type Projector struct {
	config Config
	// sizeCap is the size cap in bytes: Limit, or Limit tokens' worth of
	// bytes. A text of n bytes fits Limit tokens exactly when n <= 4*Limit,
	// so tokens mode is bytes mode with a larger cap and another unit.
	sizeCap int
	// lineCap is MaxLines.
	lineCap int
	// matcher finds error lines (WindowErrors only, else nil).
	matcher *matcher
}

// New returns a Projector for c. Zero fields of c get their defaults (see
// [Config.WithDefaults]) unless [NoDefaults] is given; the result must pass
// [Config.Validate].
func New(c Config, opts ...Option) (*Projector, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if o.noDefaults {
		c = c.withNamedDefaults()
	} else {
		c = c.WithDefaults()
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	p := &Projector{config: c, sizeCap: c.Limit, lineCap: c.MaxLines}
	if c.Mode == ModeTokens {
		p.sizeCap = math.MaxInt
		if c.Limit <= math.MaxInt/tokenBytes {
			p.sizeCap = c.Limit * tokenBytes
		}
	}
	if c.Window == WindowErrors {
		p.matcher = newMatcher(c.Patterns)
	}
	return p, nil
}

// Within returns a projector like p whose Limit is at most limit (in the
// unit of Mode, at least 0): p itself when its Limit is within it already.
// The turn budget projects each output with one (see [Share]).
func (p *Projector) Within(limit int) *Projector {
	limit = max(limit, 0)
	if limit >= p.config.Limit {
		return p
	}
	q := *p
	q.config.Limit = limit
	q.sizeCap = limit
	if q.config.Mode == ModeTokens {
		q.sizeCap = math.MaxInt
		if limit <= math.MaxInt/tokenBytes {
			q.sizeCap = limit * tokenBytes
		}
	}
	return &q
}

// Config returns the effective configuration, defaults included.
func (p *Projector) Config() Config { return p.config }

// unit is what size markers count.
func (p *Projector) unit() string {
	if p.config.Mode == ModeTokens {
		return unitTokens
	}
	return unitBytes
}

// inUnit converts a byte count to the unit of size markers.
func (p *Projector) inUnit(n int64) int64 {
	if p.config.Mode == ModeTokens {
		return (n + tokenBytes - 1) / tokenBytes
	}
	return n
}

// headShareOf returns the part of n that the head gets: all of it in head
// mode, none in tail mode, floor(n*HeadShare) in head_tail mode.
func (p *Projector) headShareOf(n int) int {
	switch p.config.Window {
	case WindowHead:
		return n
	case WindowTail:
		return 0
	}
	if p.config.HeadShare >= 1 {
		return n
	}
	return min(n, int(float64(n)*p.config.HeadShare))
}

// keepsHead and keepsTail tell which ends the window keeps.
func (p *Projector) keepsHead() bool { return p.config.Window != WindowTail }
func (p *Projector) keepsTail() bool { return p.config.Window != WindowHead }
