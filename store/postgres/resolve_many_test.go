package postgres_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/turnd/turnd/internal/pgtest"
	"github.com/turnd/turnd/store/postgres"
	"github.com/turnd/turnd/turn"
	"github.com/turnd/turnd/turn/storetest"
)

// TestResolveManyAsAlone: the set-based statements that resolve a batch of
// several sessions' resolutions decide and write exactly what the per-call
// statements write for each resolution alone. The same fixtures are made
// twice, under session prefixes "a" and "b"; "a"'s resolutions run one
// transaction each, "b"'s in one transaction of the set-based statements
// (which must not fail as a whole: the group commit would then retry call
// by call and hide it); the outcomes, turns, results, ledgers,
// completions, kept outputs and webhooks must match.
func TestResolveManyAsAlone(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t)
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Microsecond)
	// Each case makes its fixture under prefix p and returns its batch.
	cases := []struct {
		name    string
		fixture func(p string) turn.ResolveBatch
		wantErr error
		settles bool
	}{
		{"the last parked call, with a kept output and a webhook", func(p string) turn.ResolveBatch {
			c := storetest.WaitingTurn(t, s, p+"1", "t1", 1)[0]
			b := storetest.Delivered(c, `"aaaa"`, now)
			b.Items[0].Result.Truncated, b.Items[0].Result.OutputID = true, "out_"+p+"1"
			b.Items[0].Outputs = []turn.Output{{ID: "out_" + p + "1", SessionID: p + "1", TurnID: "t1", CallID: c.CallID,
				ContentType: "application/json", Data: []byte(`"aaaaaaaa"`), CreatedAt: now}}
			b.SettleWebhook = &turn.Webhook{ID: "msg_" + p + "1", SessionID: p + "1", TurnID: "t1", URL: "https://x.test/",
				Event: "turn.settled", Body: json.RawMessage(`{"turn":"t1"}`), CreatedAt: now}
			return b
		}, nil, true},
		{"one of two parked calls", func(p string) turn.ResolveBatch {
			c := storetest.WaitingTurn(t, s, p+"2", "t1", 2)[1]
			b := storetest.Delivered(c, `{"n":2}`, now)
			b.SettleWebhook = &turn.Webhook{ID: "msg_" + p + "2", SessionID: p + "2", TurnID: "t1", URL: "https://x.test/",
				Event: "turn.settled", Body: json.RawMessage(`{}`), CreatedAt: now}
			return b
		}, nil, false},
		{"a completion not in its expected status", func(p string) turn.ResolveBatch {
			c := storetest.WaitingTurn(t, s, p+"3", "t1", 1)[0]
			b := storetest.Delivered(c, `3`, now)
			b.Items[0].Expect = turn.CompletionEarly
			return b
		}, turn.ErrCompletionState, false},
		{"an unknown turn", func(p string) turn.ResolveBatch {
			c := storetest.WaitingTurn(t, s, p+"4", "t1", 1)[0]
			b := storetest.Delivered(c, `4`, now)
			b.Key.TurnID = "nope"
			return b
		}, turn.ErrNotFound, false},
		// Its session sorts between the others' (b4 < b45 < b5), so the
		// calls after it find their items past an empty slice.
		{"no items, beside a call still parked", func(p string) turn.ResolveBatch {
			c := storetest.WaitingTurn(t, s, p+"45", "t1", 1)[0]
			b := storetest.Delivered(c, `45`, now)
			b.Items = nil
			return b
		}, nil, false},
		{"both parked calls of a turn at once", func(p string) turn.ResolveBatch {
			cs := storetest.WaitingTurn(t, s, p+"5", "t1", 2)
			b := storetest.Delivered(cs[0], `"x"`, now)
			other := storetest.Delivered(cs[1], `"y"`, now)
			b.Items = append(b.Items, other.Items...)
			b.Lines = append(b.Lines, other.Lines...)
			return b
		}, nil, true},
		{"the last parked call, with no lines at all", func(p string) turn.ResolveBatch {
			c := storetest.WaitingTurn(t, s, p+"6", "t1", 1)[0]
			b := storetest.Delivered(c, `6`, now)
			b.Lines, b.SettleLines = nil, nil
			return b
		}, nil, true},
		{"a key of another turn", func(p string) turn.ResolveBatch {
			c := storetest.WaitingTurn(t, s, p+"7", "t1", 1)[0]
			storetest.WaitingTurn(t, s, p+"7", "t2", 1)
			b := storetest.Delivered(c, `7`, now)
			b.Key.TurnID = "t2"
			return b
		}, turn.ErrNotFound, false},
	}
	batches := map[string][]turn.ResolveBatch{}
	for _, p := range []string{"a", "b"} {
		for _, c := range cases {
			batches[p] = append(batches[p], c.fixture(p))
		}
	}
	alone := make([]error, len(cases))
	aloneSettled := make([]bool, len(cases))
	for i, b := range batches["a"] {
		settled, errs := s.ResolveTogether(ctx, []turn.ResolveBatch{b})
		aloneSettled[i], alone[i] = settled[0], errs[0]
	}
	together, togetherErrs, err := s.ResolveMany(ctx, batches["b"])
	if err != nil {
		t.Fatalf("the batch's transaction failed: %v", err)
	}
	for i, c := range cases {
		for who, got := range map[string]struct {
			settled bool
			err     error
		}{"alone": {aloneSettled[i], alone[i]}, "together": {together[i], togetherErrs[i]}} {
			if (c.wantErr == nil) != (got.err == nil) || (c.wantErr != nil && !errors.Is(got.err, c.wantErr)) {
				t.Errorf("%s, %s: %v, want %v", c.name, who, got.err, c.wantErr)
			}
			if got.settled != c.settles {
				t.Errorf("%s, %s: settled %v, want %v", c.name, who, got.settled, c.settles)
			}
		}
		a, b := written(t, s, "a", batches["a"][i].Key.SessionID), written(t, s, "b", batches["b"][i].Key.SessionID)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s: resolved together it wrote\n%s\nalone\n%s", c.name, b, a)
		}
	}
}

// written renders what the store holds of session sid's turns t1 and t2
// (their status, results, ledger, completions, webhooks and the kept
// output of the first case, under prefix), with the session id replaced by
// "S" and the completions' key hashes (derived from it) left out.
func written(t *testing.T, s *postgres.Store, prefix, sid string) string {
	t.Helper()
	ctx := t.Context()
	var b strings.Builder
	add := func(what string, v any, err error) {
		if err != nil && !errors.Is(err, turn.ErrNotFound) {
			t.Fatalf("reading %s of %s: %v", what, sid, err)
		}
		j, jerr := json.Marshal(v)
		if jerr != nil {
			t.Fatal(jerr)
		}
		fmt.Fprintf(&b, "%s: %s (%v)\n", what, j, errors.Is(err, turn.ErrNotFound))
	}
	for _, tid := range []string{"t1", "t2"} {
		k := turn.TurnKey{SessionID: sid, TurnID: tid}
		tu, err := s.GetTurn(ctx, k)
		add(tid, tu, err)
		cs, err := s.TurnCompletions(ctx, k)
		for i := range cs {
			cs[i].KeyHash = [32]byte{} // derived from the session id
		}
		add(tid+" completions", cs, err)
		hooks, err := s.TurnWebhooks(ctx, k)
		add(tid+" webhooks", hooks, err)
	}
	lines, err := s.Ledger(ctx, sid, 0, 100, 1<<20)
	add("ledger", lines, err)
	out, err := s.GetOutput(ctx, sid, "out_"+prefix+"1")
	add("output", out, err)
	return strings.ReplaceAll(strings.ReplaceAll(b.String(), `"`+sid+`"`, `"S"`), "_"+prefix+"1", "_S")
}

// TestResolveTogetherOneSessionTwice: two resolutions of one session's
// turns in one batch (which the group commit never makes: it keys calls by
// session) are not sent to the set-based statement, which moves a
// session's seqs once per statement; each resolves alone, and the ledger's
// seqs stay distinct and in order.
func TestResolveTogetherOneSessionTwice(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t)
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Microsecond)
	c1 := storetest.WaitingTurn(t, s, "s", "t1", 1)[0]
	c2 := storetest.WaitingTurn(t, s, "s", "t2", 1)[0]
	if _, _, err := s.ResolveMany(ctx, []turn.ResolveBatch{storetest.Delivered(c1, `1`, now), storetest.Delivered(c2, `2`, now)}); err == nil ||
		!strings.Contains(err.Error(), "two calls of session s in one statement") {
		t.Fatalf("the set-based statement given two resolutions of one session: %v, want it refused", err)
	}
	settled, errs := s.ResolveTogether(ctx, []turn.ResolveBatch{storetest.Delivered(c1, `1`, now), storetest.Delivered(c2, `2`, now)})
	for i := range errs {
		if errs[i] != nil || !settled[i] {
			t.Errorf("resolution %d: settled %v, %v", i, settled[i], errs[i])
		}
	}
	lines, err := s.Ledger(ctx, "s", 0, 100, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range lines {
		if l.Seq != int64(i+1) {
			t.Fatalf("line %d has seq %d: %+v", i, l.Seq, lines)
		}
	}
	if n := len(lines); n != 8 { // per turn: received, pending, answered, settled
		t.Errorf("%d ledger lines, want 8: %+v", n, lines)
	}
}
