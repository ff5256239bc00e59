// Package migrations holds turnd's SQL schema as numbered, embedded
// migrations, one folder per SQL dialect (postgres, sqlite).
//
// A migration file is named NNNN_name.sql; its number is its version and
// versions run from 1 without gaps. Both dialects carry the same versions so
// the two stores move in step. The stores (store/postgres, store/sqlite)
// apply them and record each applied version in their schema_migrations
// table, which they create themselves before running version 1.
//
// Applied migrations are never edited: a schema change is a new file.
//
// migrations imports only the standard library; in particular it must not
// import turn, the stores or any database driver.
package migrations
