// Package codec holds the row encodings the two stores share, so that
// store/postgres and store/sqlite store and return the domain types the same
// way: which JSON is kept byte for byte, what NULL means, how a commit's
// results are deduplicated.
//
// codec may import turn and the standard library; it must not import a
// database driver, migrations or api.
package codec
