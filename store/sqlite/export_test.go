package sqlite

import "context"

// MigrateTo applies the migrations the database lacks up to version target,
// to test upgrades from an older schema.
func (s *Store) MigrateTo(ctx context.Context, target int) error { return s.migrate(ctx, target) }

// ExecRaw runs a statement on the write connection, for tests that write
// data as an earlier schema version's SQL did.
func (s *Store) ExecRaw(ctx context.Context, query string, args ...any) error {
	_, err := s.write.ExecContext(ctx, query, args...)
	return err
}
