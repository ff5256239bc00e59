// Package pgtest gives tests an isolated, migrated PostgreSQL schema.
//
// Each URL call creates a schema t_<random> in the database at
// $DATABASE_URL, migrates it, and returns a connection string whose
// search_path is that schema; the schema is dropped when the test ends. Tests
// therefore share one server but never each other's data, and may run in
// parallel.
//
// Without DATABASE_URL the tests that need PostgreSQL are skipped — run them
// through scripts/test.sh, which starts a throwaway cluster — except in CI
// (CI set), where a missing database is a failure, not a skip.
//
// pgtest is for tests only. It may import store/postgres and pgx; it must not
// be imported by non-test code.
package pgtest
