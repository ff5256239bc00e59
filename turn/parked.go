package turn

import (
	"context"
	"fmt"
	"slices"
)

// ParkedCalls returns the indexes, in call order, of the calls of turn k
// that were parked on a completion key: their wave answered them pending,
// whatever became of them since (completed by a delivery, timed out,
// cancelled, or still pending). It is read from the turn's completion
// records, so it is the same on every replica and every read; the api
// renders these calls as placeholders for a provider and their results
// later as a follow-up message.
func (s *Service) ParkedCalls(ctx context.Context, k TurnKey) ([]int, error) {
	if !validPathID(k.SessionID) || !validPathID(k.TurnID) {
		return nil, ErrNotFound
	}
	if s.completions == nil {
		return nil, nil
	}
	cs, err := s.completions.TurnCompletions(ctx, k)
	if err != nil {
		return nil, fmt.Errorf("reading the turn's completions: %w", err)
	}
	var out []int
	for _, c := range cs {
		// A key is given its deadline when its call parks; a key a tool
		// took without parking (it answered at once) has none.
		if !c.Deadline.IsZero() {
			out = append(out, c.CallIndex)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
