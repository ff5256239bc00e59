// Package sqlstore is what store/postgres and store/sqlite share that is
// not SQL: row encodings, the checks a write passes, the decisions both
// must take alike (completion transitions, lease release, cursors) and how
// a classified driver error is reported. See ARCHITECTURE.md, "What the
// two SQL stores share". It may import turn, budget and the standard
// library, never a database driver, migrations or api.
package sqlstore
