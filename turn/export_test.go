package turn

import "context"

// Renew runs one pass of the lease renewal loop, for tests.
func (s *Service) Renew(ctx context.Context) { s.renew(ctx) }

// SettledHere counts the waiters answered with what a delivery here left
// them (waitSet.settledTurn) rather than a read, for tests.
func (s *Service) SettledHere() int64 { return s.handedOff.Load() }
