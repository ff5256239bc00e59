package storetest

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/turnd/turnd/dispatch"
	"github.com/turnd/turnd/migrations"
	"github.com/turnd/turnd/turn"
)

// UpgradeLineData is the data of the turn_received line a store's upgrade
// test writes at version 1: spacing and escapes that must come back byte for
// byte after the migrations.
const UpgradeLineData = ` {"calls" : ["c0"], "note": "é \u00e9 <b>"} `

// Statement is a statement of a store's SQL and its arguments.
type Statement struct {
	SQL  string
	Args []any
}

// CheckUpgrade checks that s, at version 1, migrates to the latest version
// with its data — a session, a running turn with a result, ledger lines
// with and without data — and that the store's writes work on the result.
// The data is written by exec, in the statements v1 gives for now (a time
// truncated to microseconds): version 1's SQL, as that release wrote it.
func CheckUpgrade(t *testing.T, s turn.MigratedStore, exec func(ctx context.Context, sql string, args ...any) error, v1 func(now time.Time) []Statement) {
	t.Helper()
	ctx := t.Context()
	if current, _, err := s.SchemaVersion(ctx); err != nil || current != 1 {
		t.Fatalf("SchemaVersion = %d, %v; want 1", current, err)
	}
	if err := s.Ping(ctx); !errors.Is(err, migrations.ErrSchemaBehind) {
		t.Fatalf("Ping at version 1: %v, want ErrSchemaBehind", err)
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	for _, q := range v1(now) {
		if err := exec(ctx, q.SQL, q.Args...); err != nil {
			t.Fatalf("writing version 1 data: %v\n%s", err, q.SQL)
		}
	}
	CheckUpgraded(t, s, now)
}

// CheckUpgraded migrates s, which holds what a store's upgrade test wrote
// at version 1 with that version's SQL — session s1 (last seq 2); turn t1,
// running, leased to "owner", with an ok result "yes" for its call c0
// "approve"; ledger lines turn_received at now with UpgradeLineData and
// call_admitted of c0 a second later — and checks that the data comes
// through and that the store's writes work on it.
func CheckUpgraded(t *testing.T, s turn.MigratedStore, now time.Time) {
	t.Helper()
	ctx := t.Context()
	k := turn.TurnKey{SessionID: "s1", TurnID: "t1"}
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	if current, latest, err := s.SchemaVersion(ctx); err != nil || current != latest || latest < 2 {
		t.Fatalf("SchemaVersion after Migrate = %d, %d, %v; want the latest (at least 2)", current, latest, err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping after Migrate: %v", err)
	}
	lines, err := s.Ledger(ctx, "s1", 0, 10, turn.MaxPageBytes)
	if err != nil {
		t.Fatalf("Ledger after Migrate: %v", err)
	}
	want := []turn.Line{
		{Seq: 1, SessionID: "s1", TurnID: "t1", Kind: turn.LineTurnReceived, At: now, Data: json.RawMessage(UpgradeLineData)},
		{Seq: 2, SessionID: "s1", TurnID: "t1", CallID: "c0", Kind: turn.LineCallAdmitted, At: now.Add(time.Second)},
	}
	if !reflect.DeepEqual(lines, want) {
		t.Fatalf("migrated ledger\n got %+v\nwant %+v", lines, want)
	}
	// Rows written before version 9 belong to the turn of their lines.
	if got, err := s.TurnLedger(ctx, "s1", "t1", 0, 10, turn.MaxPageBytes); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("migrated ledger of turn t1\n got %+v, %v\nwant %+v", got, err, want)
	}
	if tu, err := s.GetTurn(ctx, k); err != nil || tu.Status != turn.StatusRunning || len(tu.Results) != 1 || string(tu.Results[0].Output) != `"yes"` {
		t.Fatalf("migrated turn %+v: %v", tu, err)
	}

	// New lines continue the sequence.
	res, err := s.ReceiveTurn(ctx, upgradeReceive(turn.TurnKey{SessionID: "s1", TurnID: "t2"}, now))
	if err != nil || res.Seq != 3 {
		t.Fatalf("ReceiveTurn after Migrate: seq %d, %v; want 3", res.Seq, err)
	}
	h := sha256.Sum256([]byte("key"))
	c := turn.Completion{KeyHash: h, SessionID: k.SessionID, TurnID: k.TurnID, CallID: "c0", CallName: "approve", Status: turn.CompletionIssued, CreatedAt: now}
	if err := s.IssueCompletion(ctx, c); err != nil {
		t.Fatalf("IssueCompletion for a turn recorded at version 1: %v", err)
	}
	park := turn.Commit{Key: k, LeaseOwner: "owner", Parks: []turn.Park{{KeyHash: h, Deadline: now.Add(time.Hour)}},
		Lines: []turn.Line{{CallID: "c0", Kind: turn.LineCallPending, At: now}}}
	if err := s.Commit(ctx, park); err != nil {
		t.Fatalf("Commit parking: %v", err)
	}
	if got, err := s.GetCompletion(ctx, k.SessionID, h); err != nil || got.Status != turn.CompletionPending {
		t.Fatalf("GetCompletion = %v, %v; want it pending", got.Status, err)
	}
	lines, err = s.Ledger(ctx, "s1", 2, 10, turn.MaxPageBytes)
	if err != nil || len(lines) != 2 || lines[0].Seq != 3 || lines[1].Seq != 4 || lines[1].Kind != turn.LineCallPending {
		t.Fatalf("ledger after new writes: %+v, %v", lines, err)
	}
	lines, err = s.TurnLedger(ctx, "s1", "t1", 2, 10, turn.MaxPageBytes)
	if err != nil || len(lines) != 1 || lines[0].Seq != 4 {
		t.Fatalf("ledger of turn t1 after new writes: %+v, %v", lines, err)
	}
	l := turn.Late{KeyHash: h, PayloadHash: sha256.Sum256([]byte("late")), Max: turn.MaxLateLines,
		Line: turn.Line{CallID: "c0", Kind: turn.LineCompletionLate, At: now}}
	if outcome, err := s.RecordLate(ctx, k, l); err != nil || outcome != turn.LateRecorded {
		t.Fatalf("RecordLate to a completion of a migrated turn: %v, %v", outcome, err)
	}
}

func upgradeReceive(k turn.TurnKey, now time.Time) turn.Receive {
	return turn.Receive{
		Session: turn.Session{ID: k.SessionID, CreatedAt: now},
		Turn: turn.Turn{SessionID: k.SessionID, ID: k.TurnID, Status: turn.StatusRunning,
			Mode: dispatch.ModeOrdered, FailurePolicy: dispatch.PolicyIsolate,
			Calls: []turn.Call{{ID: "c0", Name: "approve"}}, Hash: "h", CreatedAt: now},
		Line:       turn.Line{Kind: turn.LineTurnReceived, At: now},
		LeaseOwner: "owner",
		LeaseUntil: now.Add(time.Hour),
	}
}
