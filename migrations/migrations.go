package migrations

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Dialects with a migration folder.
const (
	Postgres = "postgres"
	SQLite   = "sqlite"
)

// ErrSchemaBehind reports a database whose applied schema version is older
// than the one this binary needs: a server refuses to serve on it until
// `turnd migrate` has run.
var ErrSchemaBehind = errors.New("database schema is behind")

// Migration is one numbered schema change.
type Migration struct {
	Version int
	Name    string // the file name without version and extension, e.g. "init"
	SQL     string // the whole file: its -- +goose Up and Down sections
}

//go:embed postgres/*.sql sqlite/*.sql
var files embed.FS

//go:embed citus/distribute.sql
var citusSQL string

// Citus returns the statements that distribute the PostgreSQL schema on a
// Citus coordinator (citus/distribute.sql; see docs/citus.md), one a
// line, in order. Each distributes its table only while it is not yet, so
// they may run again.
func Citus() []string {
	var out []string
	for line := range strings.SplitSeq(citusSQL, "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "--") {
			out = append(out, strings.TrimSuffix(line, ";"))
		}
	}
	return out
}

// parsed caches the parsed folders: the embedded files never change.
var parsed = sync.OnceValue(func() map[string]parseResult {
	m := make(map[string]parseResult)
	for _, d := range []string{Postgres, SQLite} {
		ms, err := parse(files, d)
		m[d] = parseResult{ms, err}
	}
	return m
})

type parseResult struct {
	migrations []Migration
	err        error
}

// FS returns the dialect's migration files, NNNN_name.sql at its root.
func FS(dialect string) (fs.FS, error) {
	if _, ok := parsed()[dialect]; !ok {
		return nil, fmt.Errorf("migrations: unknown dialect %q", dialect)
	}
	return fs.Sub(files, dialect)
}

// List returns the dialect's migrations in version order. The slice is the
// caller's to keep.
func List(dialect string) ([]Migration, error) {
	r, ok := parsed()[dialect]
	if !ok {
		return nil, fmt.Errorf("listing migrations: unknown dialect %q", dialect)
	}
	if r.err != nil {
		return nil, r.err
	}
	return append([]Migration(nil), r.migrations...), nil
}

// Latest returns the highest version of the dialect's migrations, or 0 for an
// unknown dialect or an unreadable folder (which List reports as an error).
func Latest(dialect string) int {
	r := parsed()[dialect]
	if r.err != nil || len(r.migrations) == 0 {
		return 0
	}
	return r.migrations[len(r.migrations)-1].Version
}

// parse reads dir's NNNN_name.sql files and checks that their versions run
// from 1 without gaps or duplicates.
func parse(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("reading %s migrations: %w", dir, err)
	}
	var ms []Migration
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		base := strings.TrimSuffix(e.Name(), ".sql")
		num, name, ok := strings.Cut(base, "_")
		if !ok || name == "" {
			return nil, fmt.Errorf("migration %s/%s: name must be NNNN_name.sql", dir, e.Name())
		}
		v, err := strconv.Atoi(num)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s/%s: version %q must be a positive number", dir, e.Name(), num)
		}
		b, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("reading migration %s/%s: %w", dir, e.Name(), err)
		}
		ms = append(ms, Migration{Version: v, Name: name, SQL: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	for i, m := range ms {
		if m.Version != i+1 {
			return nil, fmt.Errorf("%s migrations: version %d found where %d was expected (versions run from 1 without gaps)", dir, m.Version, i+1)
		}
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("%s migrations: none found", dir)
	}
	return ms, nil
}
