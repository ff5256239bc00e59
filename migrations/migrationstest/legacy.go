package migrationstest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/turnd/turnd/turn"
)

// LegacyVersion is the last version whose completion keys and output ids
// carry no session (version 12 routes them).
const LegacyVersion = 11

// LegacySession, LegacyTurn, LegacyOutput and LegacyWebhook name the rows
// a store's test writes at LegacyVersion for CheckLegacyIDs.
const (
	LegacySession = "ls"
	LegacyTurn    = "lt"
	LegacyOutput  = "out_legacy"
	LegacyWebhook = "msg_legacy"
)

// Statement is one statement of a store's SQL and its arguments.
type Statement struct {
	SQL  string
	Args []any
}

// CheckLegacyIDs checks that what the release before routed ids left in a
// database keeps working after the upgrade, and comes through a rollback:
// s, at LegacyVersion, gets v11(hash, now)'s rows — a session
// LegacySession, its turn LegacyTurn waiting on one call parked on the key
// of hash (call c0, index 0), an output LegacyOutput and an open webhook
// LegacyWebhook of the turn — in LegacyVersion's SQL; then, migrated to the
// latest version, the key is found without its session (the lookup of a
// legacy key) and with it, not under another session; the output likewise;
// the key completes its call and settles the turn; the webhook is marked;
// and down to LegacyVersion and up again every row is still there.
// count(sql) returns a count from the store's database.
func CheckLegacyIDs(t *testing.T, s Store, exec func(ctx context.Context, sql string, args ...any) error,
	count func(sql string) (int, error), v11 func(hash []byte, now time.Time) []Statement) {
	t.Helper()
	ctx := t.Context()
	if err := s.MigrateTo(ctx, LegacyVersion); err != nil {
		t.Fatalf("MigrateTo %d: %v", LegacyVersion, err)
	}
	hash := [32]byte{0: 0x1e, 1: 0x9a, 31: 0x01}
	now := time.Now().UTC().Truncate(time.Microsecond)
	for _, st := range v11(hash[:], now) {
		if err := exec(ctx, st.SQL, st.Args...); err != nil {
			t.Fatalf("writing at version %d: %v\n%s", LegacyVersion, err, st.SQL)
		}
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	k := turn.TurnKey{SessionID: LegacySession, TurnID: LegacyTurn}
	for _, sid := range []string{"", LegacySession} {
		c, err := s.GetCompletion(ctx, sid, hash)
		if err != nil || c.SessionID != LegacySession || c.TurnID != LegacyTurn || c.Status != turn.CompletionPending {
			t.Fatalf("GetCompletion(%q) of the legacy key = %+v, %v; want it pending in %v", sid, c, err, k)
		}
		o, err := s.GetOutput(ctx, sid, LegacyOutput)
		if err != nil || o.SessionID != LegacySession || string(o.Data) != "legacy" {
			t.Fatalf("GetOutput(%q, %s) = %+v, %v; want the legacy output", sid, LegacyOutput, o, err)
		}
	}
	if _, err := s.GetCompletion(ctx, "other", hash); !errors.Is(err, turn.ErrNotFound) {
		t.Errorf("GetCompletion of the legacy key under another session: %v, want ErrNotFound", err)
	}
	if _, err := s.GetOutput(ctx, "other", LegacyOutput); !errors.Is(err, turn.ErrNotFound) {
		t.Errorf("GetOutput of the legacy output under another session: %v, want ErrNotFound", err)
	}
	if _, err := s.GetCompletion(ctx, "", [32]byte{1}); !errors.Is(err, turn.ErrNotFound) {
		t.Errorf("GetCompletion of an unknown hash without a session: %v, want ErrNotFound", err)
	}

	at := now.Add(time.Second)
	settled, err := s.Resolve(ctx, turn.ResolveBatch{
		Key: k,
		Items: []turn.Resolution{{KeyHash: hash, Expect: turn.CompletionPending, Status: turn.CompletionCompleted,
			Payload: []byte(`{"output":"done"}`), PayloadHash: [32]byte{2},
			Result: turn.Result{Index: 0, CallID: "c0", Name: "approve", Effect: "write", Status: turn.CallOK, Output: []byte(`"done"`), FinishedAt: at}}},
		SettleStatus: turn.StatusCompleted, Now: at,
	})
	if err != nil || !settled {
		t.Fatalf("Resolve of the legacy key = %v, %v; want it to settle the turn", settled, err)
	}
	if err := s.MarkWebhook(ctx, LegacySession, LegacyWebhook, turn.WebhookMark{Outcome: turn.WebhookDelivered, At: at}); err != nil {
		t.Fatalf("MarkWebhook of the legacy webhook: %v", err)
	}

	r, err := s.Migrations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, step := range []func(context.Context) error{
		func(ctx context.Context) error { _, err := r.DownTo(ctx, LegacyVersion); return err },
		func(ctx context.Context) error { _, err := r.Up(ctx); return err },
	} {
		if err := step(ctx); err != nil {
			t.Fatalf("migrating down to %d and up: %v", LegacyVersion, err)
		}
		for _, q := range []string{
			`SELECT count(*) FROM completions WHERE session_id = 'ls' AND turn_id = 'lt' AND status = 'completed'`,
			`SELECT count(*) FROM outputs WHERE session_id = 'ls' AND id = 'out_legacy'`,
			`SELECT count(*) FROM webhooks WHERE session_id = 'ls' AND id = 'msg_legacy' AND delivered_at IS NOT NULL`,
			`SELECT count(*) FROM turns WHERE session_id = 'ls' AND id = 'lt' AND status = 'completed'`,
		} {
			if n, err := count(q); err != nil || n != 1 {
				t.Errorf("%s = %d, %v; want 1", q, n, err)
			}
		}
	}
	if c, err := s.GetCompletion(ctx, "", hash); err != nil || c.Status != turn.CompletionCompleted {
		t.Errorf("GetCompletion of the legacy key after down and up = %+v, %v; want it completed", c, err)
	}
}
