package api_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/turnd/turnd/store/postgres"
	"github.com/turnd/turnd/turn"
)

// TestDatabaseUnavailable cuts a running turnd off its Postgres database
// (no new connections, existing ones terminated): a posted turn is answered
// 503 with Retry-After, and once the database is back no partial turn is
// visible and the same request succeeds.
func TestDatabaseUnavailable(t *testing.T) {
	t.Parallel()
	admin := os.Getenv("DATABASE_URL")
	if admin == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("DATABASE_URL is not set in CI")
		}
		t.Skip("DATABASE_URL is not set; run via scripts/test.sh")
	}
	ctx := context.Background()
	var b [6]byte
	_, _ = rand.Read(b[:])
	db := "unavail_" + hex.EncodeToString(b[:])
	exec := func(sql string) {
		t.Helper()
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec("CREATE DATABASE " + db)
	t.Cleanup(func() { exec("DROP DATABASE IF EXISTS " + db + " WITH (FORCE)") })
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + db
	open := func(t testing.TB) turn.Store {
		st, err := postgres.Open(ctx, u.String(), postgres.Options{MaxConns: 4})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(st.Close)
		return st
	}
	s := newStack(t, open, stackOptions{})
	if r := s.do("POST", "/v1/sessions/s/turns", `{"id":"warm","calls":[{"id":"a","name":"echo"}]}`); r.status != 200 {
		t.Fatalf("warm-up: %d %s", r.status, r.body)
	}

	exec("ALTER DATABASE " + db + " WITH ALLOW_CONNECTIONS false")
	exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '" + db + "'")
	body := `{"id":"t1","calls":[{"id":"x","name":"search","arguments":{"q":"a"}}]}`
	r := s.do("POST", "/v1/sessions/s/turns", body)
	if r.status != 503 || r.header.Get("Retry-After") == "" || r.code(t) != "store_unavailable" {
		t.Fatalf("with the database down: %d %v %s", r.status, r.header, r.body)
	}
	if r := s.do("GET", "/readyz", nil); r.status != 503 {
		t.Fatalf("readyz with the database down: %d", r.status)
	}

	exec("ALTER DATABASE " + db + " WITH ALLOW_CONNECTIONS true")
	if r := s.do("GET", "/v1/sessions/s/turns/t1", nil); r.status != 404 {
		t.Fatalf("a partial turn is visible after the outage: %d %s", r.status, r.body)
	}
	r = s.do("POST", "/v1/sessions/s/turns", body)
	var tr wireTurn
	r.json(t, &tr)
	if r.status != 200 || summary(tr) != "x=ok" {
		t.Fatalf("after the outage: %d %s", r.status, r.body)
	}
}
