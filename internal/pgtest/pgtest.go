package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/turnd/turnd/store/postgres"
)

// setupTimeout bounds creating, migrating and dropping one schema.
const setupTimeout = 60 * time.Second

// URL returns a connection string for a fresh, migrated schema of its own on
// the server at $DATABASE_URL, dropped in t.Cleanup.
func URL(t testing.TB) string {
	t.Helper()
	admin := os.Getenv("DATABASE_URL")
	if admin == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("pgtest: DATABASE_URL is not set; in CI the PostgreSQL tests must run (scripts/test.sh starts a throwaway server)")
		}
		t.Skip("pgtest: DATABASE_URL is not set; run the PostgreSQL tests with `bash scripts/test.sh`, which starts a throwaway server")
	}
	schema := "t_" + randomHex(t)
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	if err := adminExec(ctx, admin, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatalf("pgtest: creating schema %s: %v", schema, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
		defer cancel()
		if err := adminExec(ctx, admin, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("pgtest: dropping schema %s: %v", schema, err)
		}
	})

	u, err := withParam(admin, "search_path", schema)
	if err != nil {
		t.Fatalf("pgtest: DATABASE_URL: %v", err)
	}
	s, err := postgres.Open(ctx, u, postgres.Options{MaxConns: 2})
	if err != nil {
		t.Fatalf("pgtest: opening schema %s: %v", schema, err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("pgtest: migrating schema %s: %v", schema, err)
	}
	return u
}

// Store opens a postgres.Store on a fresh schema (see URL) and closes it in
// t.Cleanup, before the schema is dropped.
func Store(t testing.TB) *postgres.Store { return StoreWith(t, postgres.Options{}) }

// StoreWith is Store with opts, and with params (key, value, key, value, …)
// added to the connection string, such as default_query_exec_mode.
func StoreWith(t testing.TB, opts postgres.Options, params ...string) *postgres.Store {
	t.Helper()
	if len(params)%2 != 0 {
		t.Fatalf("pgtest: parameter %q has no value", params[len(params)-1])
	}
	u := URL(t)
	for i := 0; i < len(params); i += 2 {
		var err error
		if u, err = withParam(u, params[i], params[i+1]); err != nil {
			t.Fatalf("pgtest: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	s, err := postgres.Open(ctx, u, opts)
	if err != nil {
		t.Fatalf("pgtest: opening store: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// adminExec runs one statement on a connection of its own: no pool, so no
// goroutine outlives the call (tests run goleak).
func adminExec(ctx context.Context, connString, sql string) error {
	conn, err := pgx.Connect(ctx, connString)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, sql)
	return err
}

// withParam returns connString with parameter key set to value; pgx sends
// unknown URL parameters and key=value pairs as run-time parameters.
func withParam(connString, key, value string) (string, error) {
	if !strings.Contains(connString, "://") {
		return connString + " " + key + "=" + value, nil
	}
	u, err := url.Parse(connString)
	if err != nil {
		return "", err
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

func randomHex(t testing.TB) string {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return hex.EncodeToString(b)
}

// Database returns a connection string for a fresh, empty database of its
// own on the server at $DATABASE_URL (its admin user may create them),
// dropped in t.Cleanup: a second node, say, for what must cross databases.
func Database(t testing.TB) string {
	t.Helper()
	URL(t) // skips, or fails in CI, as URL does without DATABASE_URL
	admin := os.Getenv("DATABASE_URL")
	name := "t_" + randomHex(t)
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	if err := adminExec(ctx, admin, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("pgtest: creating database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
		defer cancel()
		if err := adminExec(ctx, admin, "DROP DATABASE "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: dropping database %s: %v", name, err)
		}
	})
	if !strings.Contains(admin, "://") {
		return admin + " dbname=" + name
	}
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatalf("pgtest: DATABASE_URL: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}
