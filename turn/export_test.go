package turn

import "context"

// Renew runs one pass of the lease renewal loop, for tests.
func (s *Service) Renew(ctx context.Context) { s.renew(ctx) }
