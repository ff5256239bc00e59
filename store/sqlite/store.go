package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"runtime"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/turnd/turnd/migrations"
	"github.com/turnd/turnd/turn"
)

// busyTimeout is how long a connection waits for SQLite's file lock, held
// by another connection (a reader checkpointing, or another process), before
// failing with SQLITE_BUSY.
const busyTimeout = 10 * time.Second

// Store is the SQLite turn.Store. It is safe for concurrent use by one
// process.
type Store struct {
	write *sql.DB // one connection: every write, in order
	read  *sql.DB // read-only connections
}

var _ turn.MigratedStore = (*Store)(nil)

// Open opens (creating it if needed) the database file at path. The path
// must name a file — not ":memory:", whose connections would each see a
// database of their own — and must not contain '?' or '#'. Open does not
// check the schema: run Migrate, then Ping.
func Open(ctx context.Context, path string) (*Store, error) {
	if path == "" || strings.HasPrefix(path, ":memory:") || strings.HasPrefix(path, "file:") || strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("opening sqlite store: path %q must be a plain file path", path)
	}
	common := url.Values{}
	common.Set("_busy_timeout", fmt.Sprint(busyTimeout.Milliseconds()))
	common.Set("_foreign_keys", "1")

	wq := cloneValues(common)
	wq.Set("_journal_mode", "WAL") // readers beside the writer; persists in the file
	wq.Set("_synchronous", "FULL") // a committed write is on disk
	// BEGIN IMMEDIATE takes the write lock up front, so a transaction never
	// fails to upgrade from reading to writing half-way.
	wq.Set("_txlock", "immediate")
	write, err := sql.Open("sqlite", path+"?"+wq.Encode())
	if err != nil {
		return nil, fmt.Errorf("opening sqlite store %s: %w", path, err)
	}
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	write.SetConnMaxLifetime(0)
	write.SetConnMaxIdleTime(0)
	// Connect the writer first: it switches the file to WAL before any
	// reader opens it.
	if err := write.PingContext(ctx); err != nil {
		write.Close()
		return nil, wrap("opening sqlite store "+path, err)
	}

	rq := cloneValues(common)
	rq.Set("_query_only", "1")
	read, err := sql.Open("sqlite", path+"?"+rq.Encode())
	if err != nil {
		write.Close()
		return nil, fmt.Errorf("opening sqlite store %s: %w", path, err)
	}
	n := max(4, runtime.GOMAXPROCS(0))
	read.SetMaxOpenConns(n)
	read.SetMaxIdleConns(n)
	if err := read.PingContext(ctx); err != nil {
		write.Close()
		read.Close()
		return nil, wrap("opening sqlite store "+path, err)
	}
	return &Store{write: write, read: read}, nil
}

func cloneValues(v url.Values) url.Values {
	c := url.Values{}
	for k, vs := range v {
		c[k] = append([]string(nil), vs...)
	}
	return c
}

// Close closes the database.
func (s *Store) Close() {
	s.read.Close()
	s.write.Close()
}

// Ping checks that the database answers and that its schema is not behind
// this binary (errors.Is(err, migrations.ErrSchemaBehind)).
func (s *Store) Ping(ctx context.Context) error {
	current, latest, err := s.SchemaVersion(ctx)
	if err != nil {
		return fmt.Errorf("pinging sqlite store: %w", err)
	}
	if current < latest {
		return fmt.Errorf("pinging sqlite store: schema version %d, this binary needs %d (run turnd migrate): %w",
			current, latest, migrations.ErrSchemaBehind)
	}
	return nil
}
