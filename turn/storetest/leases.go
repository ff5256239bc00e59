package storetest

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turnd/turnd/turn"
)

// receiveLeased records a running turn whose lease runs until until.
func receiveLeased(t *testing.T, s turn.Store, sid, tid, owner string, until time.Time) turn.TurnKey {
	t.Helper()
	r := receive(sid, tid, owner)
	r.LeaseUntil = until
	mustReceive(t, s, r)
	return turn.TurnKey{SessionID: sid, TurnID: tid}
}

func sortKeys(keys []turn.TurnKey) []turn.TurnKey {
	return sortedClone(keys, func(a, b turn.TurnKey) int {
		return cmp.Or(strings.Compare(a.SessionID, b.SessionID), strings.Compare(a.TurnID, b.TurnID))
	})
}

// sortedClone is a copy of xs sorted by compare.
func sortedClone[T any](xs []T, compare func(a, b T) int) []T {
	xs = slices.Clone(xs)
	slices.SortFunc(xs, compare)
	return xs
}

func testClaimTurns(t *testing.T, s turn.Store) {
	now := base.Add(time.Hour)
	expired1 := receiveLeased(t, s, "s1", "expired1", "dead", now.Add(-time.Minute))
	expired2 := receiveLeased(t, s, "s2", "expired2", "dead", now.Add(-time.Second))
	receiveLeased(t, s, "s1", "live", "alive", now.Add(time.Minute))
	receiveLeased(t, s, "s1", "at-now", "alive", now) // expires at now, not before
	for _, st := range []turn.Status{turn.StatusWaiting, turn.StatusCompleted, turn.StatusFailed, turn.StatusCancelled} {
		k := receiveLeased(t, s, "s1", string(st), "dead", now.Add(-time.Hour))
		c := commit(k.SessionID, k.TurnID, "dead")
		c.LeaseUntil = now.Add(-time.Hour)
		c.Status = st
		if st.Settled() {
			c.SettledAt = now.Add(-time.Hour)
		}
		must(t, "Commit "+string(st), s.Commit(ctx(t), c))
	}

	until := now.Add(time.Minute)
	got, err := claimKeys(s.ClaimTurns(ctx(t), "new", now, until, 0, 1))
	must(t, "ClaimTurns limit 1", err)
	if len(got) != 1 {
		t.Fatalf("ClaimTurns limit 1 = %v", got)
	}
	rest, err := claimKeys(s.ClaimTurns(ctx(t), "new", now, until, 0, 10))
	must(t, "ClaimTurns", err)
	same(t, "claimed", sortKeys(append(got, rest...)), sortKeys([]turn.TurnKey{expired1, expired2}))

	none, err := claimKeys(s.ClaimTurns(ctx(t), "other", now, until, 0, 10))
	must(t, "ClaimTurns again", err)
	if len(none) != 0 {
		t.Errorf("claimed %v twice", none)
	}

	// The claimer holds the lease now; the dead owner has lost it.
	isErr(t, "Commit by the dead owner", s.Commit(ctx(t), commit("s1", "expired1", "dead")), turn.ErrLeaseLost)
	byClaimer := commit("s1", "expired1", "new")
	byClaimer.LeaseEpoch = 1 // the claim's Resumes
	must(t, "Commit by the claimer", s.Commit(ctx(t), byClaimer))
	lost, err := s.RenewLeases(ctx(t), "new", until, []turn.TurnKey{expired1, expired2})
	must(t, "RenewLeases", err)
	if len(lost) != 0 {
		t.Errorf("claimer lost %v", lost)
	}
}

// Concurrent claimers never get the same turn, and together they get all.
func testClaimTurnsConcurrent(t *testing.T, s turn.Store) {
	const turns, claimers = 50, 8
	now := base.Add(time.Hour)
	var all []turn.TurnKey
	for i := range turns {
		all = append(all, receiveLeased(t, s, fmt.Sprintf("s%d", i%5), fmt.Sprintf("t%02d", i), "dead", now.Add(-time.Minute)))
	}
	var mu sync.Mutex
	claims := make(map[turn.TurnKey][]string)
	together(claimers, func(c int) {
		owner := fmt.Sprintf("claimer-%d", c)
		claimAll(t, "ClaimTurns "+owner, func() ([]turn.TurnKey, error) {
			return claimKeys(s.ClaimTurns(ctx(t), owner, now, now.Add(time.Hour), 0, 3))
		}, func(keys []turn.TurnKey) {
			mu.Lock()
			defer mu.Unlock()
			for _, k := range keys {
				claims[k] = append(claims[k], owner)
			}
		})
	})
	for _, k := range all {
		if n := len(claims[k]); n != 1 {
			t.Errorf("turn %v claimed %d times (by %v)", k, n, claims[k])
		}
	}
	if len(claims) != turns {
		t.Errorf("%d turns claimed, want %d", len(claims), turns)
	}
	// Each turn's lease is its claimer's.
	for k, owners := range claims {
		c := commit(k.SessionID, k.TurnID, owners[0])
		c.LeaseEpoch = 1
		if err := s.Commit(ctx(t), c); err != nil {
			t.Errorf("Commit %v by its claimer %s: %v", k, owners[0], err)
		}
	}
}

func testRenewLeases(t *testing.T, s turn.Store) {
	now := base.Add(time.Hour)
	a := receiveLeased(t, s, "s1", "a", "me", now.Add(time.Second))
	b := receiveLeased(t, s, "s2", "b", "me", now.Add(-time.Minute)) // expired but not yet claimed: still mine
	c := receiveLeased(t, s, "s1", "c", "you", now.Add(time.Second))
	d := turn.TurnKey{SessionID: "s1", TurnID: "missing"}

	lost, err := s.RenewLeases(ctx(t), "me", now.Add(10*time.Minute), []turn.TurnKey{c, a, d, b})
	must(t, "RenewLeases", err)
	same(t, "lost", lost, []turn.TurnKey{c, d})

	// Renewed leases outlive the old expiry; c's did not move.
	claimed, err := claimKeys(s.ClaimTurns(ctx(t), "claimer", now.Add(5*time.Minute), now.Add(time.Hour), 0, 10))
	must(t, "ClaimTurns", err)
	same(t, "claimed", claimed, []turn.TurnKey{c})

	lost, err = s.RenewLeases(ctx(t), "me", now, nil)
	must(t, "RenewLeases of nothing", err)
	if len(lost) != 0 {
		t.Errorf("RenewLeases of nothing lost %v", lost)
	}
}

// A commit without a LeaseUntil keeps the lease's expiry: the turn stays
// claimable once that passes.
func testCommitKeepsLeaseExpiry(t *testing.T, s turn.Store) {
	k := receiveLeased(t, s, "s1", "t1", "owner-a", base.Add(time.Minute))
	c := commit("s1", "t1", "owner-a")
	c.LeaseUntil = time.Time{}
	c.Lines = []turn.Line{line("t1", "", turn.LineCallAdmitted, "")}
	must(t, "Commit", s.Commit(ctx(t), c))
	claimed, err := claimKeys(s.ClaimTurns(ctx(t), "owner-b", base.Add(30*time.Second), base.Add(time.Hour), 0, 10))
	must(t, "ClaimTurns before expiry", err)
	if len(claimed) != 0 {
		t.Fatalf("claimed %v before the lease expired", claimed)
	}
	claimed, err = claimKeys(s.ClaimTurns(ctx(t), "owner-b", base.Add(2*time.Minute), base.Add(time.Hour), 0, 10))
	must(t, "ClaimTurns after expiry", err)
	same(t, "claimed", claimed, []turn.TurnKey{k})
}

// claimKeys returns the keys of claims, for tests that compare keys.
func claimKeys(claims []turn.Claim, err error) ([]turn.TurnKey, error) {
	keys := make([]turn.TurnKey, len(claims))
	for i, c := range claims {
		keys[i] = c.TurnKey
	}
	return keys, err
}

// Every claim counts in Resumes, and a turn claimed FreeResumes times or
// more is claimed again only backoff × 2^(resumes-FreeResumes) (at most 64
// × backoff) after its lease expired; PrevOwner is the owner it replaced.
func testClaimTurnsBackOff(t *testing.T, s turn.Store) {
	const backoff = 10 * time.Second
	lease := base.Add(time.Minute)
	k := receiveLeased(t, s, "s1", "t1", "dead", lease)
	claim := func(at time.Time) []turn.Claim {
		t.Helper()
		got, err := s.ClaimTurns(ctx(t), "claimer", at, at.Add(time.Minute), backoff, 10)
		must(t, "ClaimTurns", err)
		return got
	}
	prev := "dead"
	for resumes := 0; resumes <= turn.FreeResumes+8; resumes++ {
		var wait time.Duration
		if resumes >= turn.FreeResumes {
			wait = backoff << min(resumes-turn.FreeResumes, 6)
			if got := claim(lease.Add(wait - time.Millisecond)); len(got) != 0 {
				t.Fatalf("claimed %v %v after its lease after %d claims, want a wait of %v", got, wait-time.Millisecond, resumes, wait)
			}
		}
		at := lease.Add(wait + time.Millisecond)
		got := claim(at)
		same(t, fmt.Sprintf("claim %d", resumes+1), got, []turn.Claim{{TurnKey: k, Resumes: resumes + 1, PrevOwner: prev}})
		lease, prev = at.Add(time.Minute), "claimer"
	}
	// A commit by the claimer keeps the count: it counts claims, not failures.
	c := commit("s1", "t1", "claimer")
	c.LeaseEpoch = turn.FreeResumes + 9
	must(t, "Commit", s.Commit(ctx(t), c))
	must(t, "Commit again", s.Commit(ctx(t), c))
}

// A commit carries the lease epoch its owner holds the turn under, and one
// of an older epoch is refused even when its owner holds the lease again:
// owner a stalls, b claims the turn, b's lease expires, a claims it back;
// a's stale wave (epoch 0) then commits nothing, a's new one (epoch 2) does.
func testCommitLeaseEpoch(t *testing.T, s turn.Store) {
	k := receiveLeased(t, s, "s1", "t1", "a", base.Add(time.Minute))
	at := func(d time.Duration) time.Time { return base.Add(d * time.Minute) }
	epochCommit := func(owner string, epoch int, status turn.Status) turn.Commit {
		c := commit(k.SessionID, k.TurnID, owner)
		c.LeaseUntil, c.LeaseEpoch = time.Time{}, epoch
		c.Lines = []turn.Line{line(k.TurnID, "", turn.LineCallAdmitted, fmt.Sprintf(`{"by":%q,"epoch":%d}`, owner, epoch))}
		if status != "" {
			c.Status, c.SettledAt = status, at(10)
		}
		return c
	}
	must(t, "Commit by a at epoch 0", s.Commit(ctx(t), epochCommit("a", 0, "")))

	claim := func(owner string, now time.Time) turn.Claim {
		t.Helper()
		got, err := s.ClaimTurns(ctx(t), owner, now, now.Add(time.Minute), 0, 10)
		must(t, "ClaimTurns by "+owner, err)
		if len(got) != 1 || got[0].TurnKey != k {
			t.Fatalf("ClaimTurns by %s = %v, want %v", owner, got, k)
		}
		return got[0]
	}
	b := claim("b", at(2))
	same(t, "b's claim", b, turn.Claim{TurnKey: k, Resumes: 1, PrevOwner: "a"})
	isErr(t, "Commit by a at epoch 0 under b's lease", s.Commit(ctx(t), epochCommit("a", 0, turn.StatusCompleted)), turn.ErrLeaseLost)
	a := claim("a", at(4))
	same(t, "a's claim back", a, turn.Claim{TurnKey: k, Resumes: 2, PrevOwner: "b"})

	// a holds the lease again, but its old wave's epoch is stale.
	isErr(t, "Commit by a at the stale epoch 0", s.Commit(ctx(t), epochCommit("a", 0, turn.StatusCompleted)), turn.ErrLeaseLost)
	isErr(t, "Commit by b at its epoch 1", s.Commit(ctx(t), epochCommit("b", 1, turn.StatusCompleted)), turn.ErrLeaseLost)
	isErr(t, "Commit by a at a future epoch 3", s.Commit(ctx(t), epochCommit("a", 3, "")), turn.ErrLeaseLost)
	// The refused commits wrote nothing: the turn is still running under
	// a's lease, which a's new wave renews and commits under.
	lost, err := s.RenewLeases(ctx(t), "a", at(6), []turn.TurnKey{k})
	must(t, "RenewLeases by a", err)
	if len(lost) != 0 {
		t.Fatalf("a lost %v", lost)
	}
	must(t, "Commit by a at epoch 2", s.Commit(ctx(t), epochCommit("a", 2, "")))
	must(t, "settling Commit by a at epoch 2", s.Commit(ctx(t), epochCommit("a", 2, turn.StatusCompleted)))

	var got []string
	for _, l := range readLedger(t, s, k.SessionID, 100) {
		if l.Kind == turn.LineCallAdmitted {
			got = append(got, string(l.Data))
		}
	}
	same(t, "committed lines", got, []string{`{"by":"a","epoch":0}`, `{"by":"a","epoch":2}`, `{"by":"a","epoch":2}`})
	tr, err := s.GetTurn(ctx(t), k)
	must(t, "GetTurn", err)
	if tr.Status != turn.StatusCompleted {
		t.Errorf("status %s, want completed", tr.Status)
	}
}
