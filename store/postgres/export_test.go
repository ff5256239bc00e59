package postgres

import "context"

// MigrateTo applies the migrations the database lacks up to version target,
// to test upgrades from an older schema.
func (s *Store) MigrateTo(ctx context.Context, target int) error { return s.migrate(ctx, target) }
