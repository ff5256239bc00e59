package storetest

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turnd/turnd/turn"
)

// hook is the webhook announcing that turn sid/tid settled at at.
func hook(sid, tid string, at time.Time) *turn.Webhook {
	return &turn.Webhook{
		ID:    "msg_" + sid + "_" + tid,
		URL:   "https://frontend.test/hooks?token=x",
		Event: "turn.settled",
		// Spacing and escapes that a re-encoding would change.
		Body: json.RawMessage(fmt.Sprintf(`{"type": "turn.settled", "timestamp": %q,
  "data": {"session_id": %q, "turn_id": %q, "status": "completed", "note": "\u00e9<>"}}`,
			at.UTC().Format(time.RFC3339Nano), sid, tid)),
		CreatedAt: at,
	}
}

// stored is what the store holds for w, written under sid/tid and never
// claimed.
func stored(w *turn.Webhook, sid, tid string) turn.Webhook {
	x := *w
	x.SessionID, x.TurnID = sid, tid
	x.CreatedAt = normTime(x.CreatedAt)
	if x.NextAttemptAt.IsZero() {
		x.NextAttemptAt = x.CreatedAt
	}
	x.NextAttemptAt = normTime(x.NextAttemptAt)
	return x
}

// claimedAs is w after a claim at now with lease.
func claimedAs(w turn.Webhook, now time.Time, lease time.Duration) turn.Webhook {
	w.Attempts++
	w.NextAttemptAt = normTime(now.Add(lease))
	return w
}

func turnWebhooks(t *testing.T, s turn.Store, sid, tid string) []turn.Webhook {
	t.Helper()
	ws, err := s.TurnWebhooks(ctx(t), turn.TurnKey{SessionID: sid, TurnID: tid})
	must(t, "TurnWebhooks "+sid+"/"+tid, err)
	if ws == nil {
		t.Fatalf("TurnWebhooks %s/%s returned nil", sid, tid)
	}
	return ws
}

func sortWebhooks(ws []turn.Webhook) []turn.Webhook {
	return sortedClone(ws, func(a, b turn.Webhook) int { return strings.Compare(a.ID, b.ID) })
}

// settleWithHook records turn sid/tid and commits it completed at at with
// its webhook, which it returns as stored.
func settleWithHook(t *testing.T, s turn.Store, sid, tid string, at time.Time) turn.Webhook {
	t.Helper()
	mustReceive(t, s, receive(sid, tid, "owner-a"))
	c := commit(sid, tid, "owner-a")
	c.Status, c.SettledAt = turn.StatusCompleted, at
	c.Lines = []turn.Line{line(tid, "", turn.LineTurnSettled, `{"status":"completed"}`)}
	c.Webhook = hook(sid, tid, at)
	must(t, "Commit settled "+tid, s.Commit(ctx(t), c))
	return stored(c.Webhook, sid, tid)
}

// The webhook is written by the commit that settles, in its transaction:
// a commit that loses its lease writes none, one without a webhook none.
func testWebhookCommit(t *testing.T, s turn.Store) {
	w := settleWithHook(t, s, "s1", "t1", base)
	same(t, "webhooks of t1", turnWebhooks(t, s, "s1", "t1"), []turn.Webhook{w})

	// The lease is someone else's: nothing is written, webhook included.
	mustReceive(t, s, receive("s1", "t2", "owner-a"))
	lost := commit("s1", "t2", "owner-b")
	lost.Status, lost.SettledAt = turn.StatusCompleted, base
	lost.Lines = []turn.Line{line("t2", "", turn.LineTurnSettled, `{"status":"completed"}`)}
	lost.Webhook = hook("s1", "t2", base)
	isErr(t, "Commit by a stranger", s.Commit(ctx(t), lost), turn.ErrLeaseLost)
	same(t, "webhooks after a lost lease", turnWebhooks(t, s, "s1", "t2"), []turn.Webhook{})
	if tu := getTurn(t, s, "s1", "t2"); tu.Status != turn.StatusRunning {
		t.Errorf("turn t2 is %s after a lost-lease commit", tu.Status)
	}

	// Settled without a webhook (no callback URL): no row.
	nohook := commit("s1", "t2", "owner-a")
	nohook.Status, nohook.SettledAt = turn.StatusFailed, base
	must(t, "Commit without webhook", s.Commit(ctx(t), nohook))
	same(t, "webhooks of a settlement without one", turnWebhooks(t, s, "s1", "t2"), []turn.Webhook{})

	// An explicit NextAttemptAt is kept; the ids of the key fill in.
	mustReceive(t, s, receive("s2", "t3", "owner-a"))
	later := commit("s2", "t3", "owner-a")
	later.Status, later.SettledAt = turn.StatusCancelled, base
	later.Webhook = hook("s2", "t3", base)
	later.Webhook.NextAttemptAt = base.Add(time.Minute)
	must(t, "Commit with a later first attempt", s.Commit(ctx(t), later))
	same(t, "webhook due later", turnWebhooks(t, s, "s2", "t3"), []turn.Webhook{stored(later.Webhook, "s2", "t3")})

	// A webhook of another turn, or without an id, is refused whole.
	mustReceive(t, s, receive("s1", "t4", "owner-a"))
	bad := commit("s1", "t4", "owner-a")
	bad.Status, bad.SettledAt = turn.StatusCompleted, base
	bad.Webhook = hook("s1", "t4", base)
	bad.Webhook.SessionID = "s2"
	if err := s.Commit(ctx(t), bad); err == nil {
		t.Error("Commit wrote a webhook of another session")
	}
	bad.Webhook = hook("s1", "t4", base)
	bad.Webhook.ID = ""
	if err := s.Commit(ctx(t), bad); err == nil {
		t.Error("Commit wrote a webhook without an id")
	}
	bad.Webhook = hook("s1", "t4", base)
	bad.Webhook.Body = json.RawMessage(`{"type":`)
	if err := s.Commit(ctx(t), bad); err == nil {
		t.Error("Commit wrote a webhook with an invalid body")
	}
	if tu := getTurn(t, s, "s1", "t4"); tu.Status != turn.StatusRunning {
		t.Errorf("turn t4 is %s after refused commits", tu.Status)
	}
	same(t, "webhooks after refused commits", turnWebhooks(t, s, "s1", "t4"), []turn.Webhook{})
}

// Resolve writes its SettleWebhook only when the batch settles the turn.
func testWebhookResolve(t *testing.T, s turn.Store) {
	cs := waitingTurn(t, s, "s1", "t1", 2)
	now := base.Add(time.Minute)

	// a resolves, b still pending: no settlement, no webhook.
	ba := batch("s1", "t1", now, resolution(cs[0], `1`))
	ba.SettleWebhook = hook("s1", "t1", now)
	settled, err := s.Resolve(ctx(t), ba)
	must(t, "Resolve a", err)
	if settled {
		t.Fatal("Resolve a settled the turn")
	}
	same(t, "webhooks while waiting", turnWebhooks(t, s, "s1", "t1"), []turn.Webhook{})

	// A batch that fails its checks writes nothing.
	bad := batch("s1", "t1", now, resolution(cs[0], `1`), resolution(cs[1], `2`))
	bad.SettleWebhook = hook("s1", "t1", now)
	_, err = s.Resolve(ctx(t), bad)
	isErr(t, "Resolve a again with b", err, turn.ErrCompletionState)
	same(t, "webhooks after a failed batch", turnWebhooks(t, s, "s1", "t1"), []turn.Webhook{})

	// b resolves: the turn settles with its webhook.
	bb := batch("s1", "t1", now, resolution(cs[1], `2`))
	bb.SettleWebhook = hook("s1", "t1", now)
	settled, err = s.Resolve(ctx(t), bb)
	must(t, "Resolve b", err)
	if !settled {
		t.Fatal("Resolve b did not settle the turn")
	}
	same(t, "webhooks after settling", turnWebhooks(t, s, "s1", "t1"), []turn.Webhook{stored(bb.SettleWebhook, "s1", "t1")})

	// A batch settling nothing (the turn is settled already) writes none.
	mustReceive(t, s, receiveCalls("s1", "t2", "owner-a", 1))
	c2 := issue(t, s, "s1", "t2", 0)
	settledCommit := parkCommit("s1", "t2", "owner-a", turn.StatusCancelled, c2)
	must(t, "Commit cancelled with a parked call", s.Commit(ctx(t), settledCommit))
	cancel := batch("s1", "t2", now, turn.Resolution{KeyHash: c2.KeyHash, Expect: turn.CompletionPending,
		Status: turn.CompletionCancelled, Result: pendingResult("t2", 0)})
	cancel.SettleStatus = turn.StatusCancelled
	cancel.SettleWebhook = hook("s1", "t2", now)
	settled, err = s.Resolve(ctx(t), cancel)
	must(t, "Resolve the parked call of a settled turn", err)
	if settled {
		t.Error("Resolve settled a settled turn")
	}
	same(t, "webhooks of an already settled turn", turnWebhooks(t, s, "s1", "t2"), []turn.Webhook{})
}

// Claims take due open webhooks, the earliest first, and lease them: a
// claimed webhook is not due again until its lease runs out (this is what
// brings back an attempt a crash cut short).
func testWebhookClaim(t *testing.T, s turn.Store) {
	w1 := settleWithHook(t, s, "s1", "t1", base)
	w2 := settleWithHook(t, s, "s1", "t2", base.Add(time.Second))
	w3 := settleWithHook(t, s, "s2", "t3", base.Add(time.Minute))
	const lease = 30 * time.Second

	none, err := s.ClaimWebhooks(ctx(t), base.Add(-time.Second), lease, 10)
	must(t, "ClaimWebhooks before any is due", err)
	same(t, "claimed before due", none, []turn.Webhook{})
	zero, err := s.ClaimWebhooks(ctx(t), base.Add(time.Hour), lease, 0)
	must(t, "ClaimWebhooks limit 0", err)
	same(t, "claimed with limit 0", zero, []turn.Webhook{})

	now := base.Add(time.Second) // w2 is due at exactly now
	got, err := s.ClaimWebhooks(ctx(t), now, lease, 1)
	must(t, "ClaimWebhooks limit 1", err)
	same(t, "first claim", got, []turn.Webhook{claimedAs(w1, now, lease)})
	got, err = s.ClaimWebhooks(ctx(t), now, lease, 10)
	must(t, "ClaimWebhooks", err)
	same(t, "second claim", got, []turn.Webhook{claimedAs(w2, now, lease)})
	got, err = s.ClaimWebhooks(ctx(t), now.Add(lease-time.Microsecond), lease, 10)
	must(t, "ClaimWebhooks within the lease", err)
	same(t, "claimed within the lease", got, []turn.Webhook{})

	// The leases run out (no outcome was recorded): due again, one more
	// attempt counted, with w3 now due too.
	later := now.Add(2 * lease)
	got, err = s.ClaimWebhooks(ctx(t), later, lease, 10)
	must(t, "ClaimWebhooks after the leases", err)
	same(t, "reclaimed", sortWebhooks(got), sortWebhooks([]turn.Webhook{
		claimedAs(claimedAs(w1, now, lease), later, lease),
		claimedAs(claimedAs(w2, now, lease), later, lease),
		claimedAs(w3, later, lease),
	}))
	same(t, "t1 as stored", turnWebhooks(t, s, "s1", "t1"), []turn.Webhook{claimedAs(claimedAs(w1, now, lease), later, lease)})
}

// Concurrent claimers never get the same webhook, and together they get all.
func testWebhookClaimConcurrent(t *testing.T, s turn.Store) {
	const hooks, claimers = 40, 8
	for i := range hooks {
		settleWithHook(t, s, fmt.Sprintf("s%d", i%4), fmt.Sprintf("t%02d", i), base.Add(time.Duration(i%3)*time.Second))
	}
	now := base.Add(time.Minute)
	var mu sync.Mutex
	claims := make(map[string]int)
	together(claimers, func(c int) {
		claimAll(t, fmt.Sprintf("ClaimWebhooks by claimer %d", c), func() ([]turn.Webhook, error) {
			return s.ClaimWebhooks(ctx(t), now, time.Hour, 3)
		}, func(ws []turn.Webhook) {
			mu.Lock()
			defer mu.Unlock()
			for _, w := range ws {
				claims[w.ID]++
				if w.Attempts != 1 {
					t.Errorf("webhook %s claimed with %d attempts, want 1", w.ID, w.Attempts)
				}
			}
		})
	})
	if len(claims) != hooks {
		t.Errorf("%d webhooks claimed, want %d", len(claims), hooks)
	}
	for id, n := range claims {
		if n != 1 {
			t.Errorf("webhook %s claimed %d times", id, n)
		}
	}
}

// Marks: delivered and dead webhooks are never due again; a retry is due
// at its NextAttemptAt with its error; a finished webhook ignores later
// marks.
func testWebhookMark(t *testing.T, s turn.Store) {
	const lease = time.Minute
	wd := settleWithHook(t, s, "s1", "delivered", base)
	wr := settleWithHook(t, s, "s1", "retried", base)
	wx := settleWithHook(t, s, "s1", "dead", base)
	now := base.Add(time.Second)
	got, err := s.ClaimWebhooks(ctx(t), now, lease, 10)
	must(t, "ClaimWebhooks", err)
	if len(got) != 3 {
		t.Fatalf("claimed %d webhooks, want 3", len(got))
	}
	wd, wr, wx = claimedAs(wd, now, lease), claimedAs(wr, now, lease), claimedAs(wx, now, lease)

	at := now.Add(2 * time.Second)
	must(t, "mark delivered", s.MarkWebhook(ctx(t), wd.SessionID, wd.ID, turn.WebhookMark{Outcome: turn.WebhookDelivered, At: at}))
	wd.DeliveredAt = normTime(at)
	next := at.Add(5 * time.Second)
	must(t, "mark retry", s.MarkWebhook(ctx(t), wr.SessionID, wr.ID, turn.WebhookMark{Outcome: turn.WebhookRetry, At: at, NextAttemptAt: next, Error: "HTTP 503 Service Unavailable"}))
	wr.NextAttemptAt, wr.LastError = normTime(next), "HTTP 503 Service Unavailable"
	must(t, "mark dead", s.MarkWebhook(ctx(t), wx.SessionID, wx.ID, turn.WebhookMark{Outcome: turn.WebhookDead, At: at, Error: "HTTP 410 Gone"}))
	wx.DeadAt, wx.LastError = normTime(at), "HTTP 410 Gone"
	same(t, "delivered", turnWebhooks(t, s, "s1", "delivered"), []turn.Webhook{wd})
	same(t, "retried", turnWebhooks(t, s, "s1", "retried"), []turn.Webhook{wr})
	same(t, "dead", turnWebhooks(t, s, "s1", "dead"), []turn.Webhook{wx})

	// Only the retry becomes due again, at its NextAttemptAt, well before
	// the claim's lease would have run out.
	got, err = s.ClaimWebhooks(ctx(t), next.Add(-time.Microsecond), lease, 10)
	must(t, "ClaimWebhooks before the retry", err)
	same(t, "claimed before the retry is due", got, []turn.Webhook{})
	got, err = s.ClaimWebhooks(ctx(t), next, lease, 10)
	must(t, "ClaimWebhooks at the retry", err)
	wr = claimedAs(wr, next, lease)
	same(t, "retry claimed", got, []turn.Webhook{wr})
	got, err = s.ClaimWebhooks(ctx(t), base.Add(1000*time.Hour), lease, 10)
	must(t, "ClaimWebhooks much later", err)
	same(t, "claimed much later", sortWebhooks(got), []turn.Webhook{claimedAs(wr, base.Add(1000*time.Hour), lease)})
	wr = got[0]

	// A delivery wins over a retry recorded after it (a claimer whose lease
	// ran out), and keeps the last error; marks on finished webhooks change
	// nothing.
	must(t, "deliver the retried", s.MarkWebhook(ctx(t), wr.SessionID, wr.ID, turn.WebhookMark{Outcome: turn.WebhookDelivered, At: next}))
	wr.DeliveredAt = normTime(next)
	must(t, "retry after delivery", s.MarkWebhook(ctx(t), wr.SessionID, wr.ID, turn.WebhookMark{Outcome: turn.WebhookRetry, At: next, NextAttemptAt: next, Error: "late"}))
	must(t, "dead after delivery", s.MarkWebhook(ctx(t), wd.SessionID, wd.ID, turn.WebhookMark{Outcome: turn.WebhookDead, At: next, Error: "late"}))
	must(t, "deliver the dead", s.MarkWebhook(ctx(t), wx.SessionID, wx.ID, turn.WebhookMark{Outcome: turn.WebhookDelivered, At: next}))
	same(t, "retried after marks", turnWebhooks(t, s, "s1", "retried"), []turn.Webhook{wr})
	same(t, "delivered after marks", turnWebhooks(t, s, "s1", "delivered"), []turn.Webhook{wd})
	same(t, "dead after marks", turnWebhooks(t, s, "s1", "dead"), []turn.Webhook{wx})

	isErr(t, "mark an unknown webhook",
		s.MarkWebhook(ctx(t), "s1", "msg_nope", turn.WebhookMark{Outcome: turn.WebhookDelivered, At: at}), turn.ErrNotFound)
	for _, m := range []turn.WebhookMark{
		{Outcome: "lost", At: at},
		{Outcome: turn.WebhookRetry, At: at},
		{Outcome: turn.WebhookDelivered},
	} {
		if err := s.MarkWebhook(ctx(t), wd.SessionID, wd.ID, m); err == nil {
			t.Errorf("MarkWebhook accepted %+v", m)
		}
	}
	same(t, "webhooks of an unknown turn", turnWebhooks(t, s, "s1", "nope"), []turn.Webhook{})
}
