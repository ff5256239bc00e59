// Package migrations holds turnd's SQL schema as numbered, embedded goose
// migrations, one folder per SQL dialect (postgres, sqlite), and the Runner
// that applies them.
//
// A migration file is named NNNN_name.sql; its number is its version and
// versions run from 1 without gaps. Both dialects carry the same versions so
// the two stores move in step. A file has a `-- +goose Up` section and a
// `-- +goose Down` section that undoes it; each runs in a transaction (a
// statement that cannot, such as CREATE INDEX CONCURRENTLY, needs a file
// of its own marked `-- +goose NO TRANSACTION`). The Runner records applied
// versions in goose's table (VersionTable); a database of a release before
// goose, which recorded them in schema_migrations, is adopted in place.
//
// Applied migrations are never edited: a schema change is a new file.
//
// migrations imports the standard library and goose only; in particular it
// must not import turn, the stores or any database driver (the stores hand
// the Runner their *sql.DB).
package migrations
