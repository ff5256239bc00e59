package sqlstore

import (
	"math"

	"github.com/turnd/turnd/turn"
)

// DecodeLines reverses LinesJSON for the batch of sessionID whose first
// line has seq first, appending to out the lines with seq > after, up to
// limit lines in out: a Page without a byte bound, for the tests.
func DecodeLines(out []turn.Line, sessionID string, first int64, b []byte, after int64, limit int) ([]turn.Line, error) {
	p := Page{After: after, Limit: limit, MaxBytes: math.MaxInt, Lines: out}
	if _, err := p.Add(sessionID, first, b); err != nil {
		return nil, err
	}
	return p.Lines, nil
}
