package storetest

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/turnd/turnd/turn"
)

func testCompletionIssue(t *testing.T, s turn.Store) {
	mustReceive(t, s, receiveCalls("s1", "t1", "owner-a", 2))
	c1 := issue(t, s, "s1", "t1", 1)
	c0 := issue(t, s, "s1", "t1", 0)
	checkCompletion(t, s, "issued completion", c0)

	// Issuing again changes nothing, whatever it carries.
	again := c0
	again.CallName, again.Status, again.CreatedAt = "other", turn.CompletionEarly, base.Add(time.Hour)
	must(t, "IssueCompletion again", s.IssueCompletion(ctx(t), again))
	checkCompletion(t, s, "completion issued twice", c0)

	cs, err := s.TurnCompletions(ctx(t), turn.TurnKey{SessionID: "s1", TurnID: "t1"})
	must(t, "TurnCompletions", err)
	same(t, "turn completions (in call order)", cs, []turn.Completion{wantCompletion(c0), wantCompletion(c1)})
	cs, err = s.TurnCompletions(ctx(t), turn.TurnKey{SessionID: "s1", TurnID: "nope"})
	must(t, "TurnCompletions of an unknown turn", err)
	if cs == nil || len(cs) != 0 {
		t.Errorf("TurnCompletions of an unknown turn = %#v, want an empty slice", cs)
	}

	_, err = s.GetCompletion(ctx(t), "s1", keyHash("s1", "t1", 9))
	isErr(t, "GetCompletion of an unknown key", err, turn.ErrNotFound)
	err = s.IssueCompletion(ctx(t), completion("s1", "nope", 0))
	isErr(t, "IssueCompletion for an unknown turn", err, turn.ErrNotFound)
}

func testCompletionPark(t *testing.T, s turn.Store) {
	mustReceive(t, s, receiveCalls("s1", "t1", "owner-a", 4))
	mustReceive(t, s, receiveCalls("s1", "t2", "owner-a", 1))
	a, b, e, r := issue(t, s, "s1", "t1", 0), issue(t, s, "s1", "t1", 1), issue(t, s, "s1", "t1", 2), issue(t, s, "s1", "t1", 3)
	x := issue(t, s, "s1", "t2", 0) // another turn's
	payload := json.RawMessage(`{"output":"early"}`)
	early, err := s.DeliverEarly(ctx(t), e.SessionID, e.KeyHash, payload, sha256.Sum256(payload), base.Add(time.Second))
	must(t, "DeliverEarly", err)

	// A lost lease parks nothing.
	lost := parkCommit("s1", "t1", "owner-b", "", a, e)
	isErr(t, "Commit by another owner", s.Commit(ctx(t), lost), turn.ErrLeaseLost)
	checkCompletion(t, s, "a after a lost commit", a)
	checkCompletion(t, s, "e after a lost commit", early)

	c := parkCommit("s1", "t1", "owner-a", "", a, e, r)
	c.Parks = append(c.Parks, parkOf(x)) // not this turn's: ignored
	must(t, "Commit with parks", s.Commit(ctx(t), c))
	checkCompletion(t, s, "issued → pending", parked(a, parkOf(a)))
	checkCompletion(t, s, "early stays early, with its deadline", parked(early, parkOf(e)))
	checkCompletion(t, s, "not parked", b)
	checkCompletion(t, s, "another turn's key", x)

	// The turn is still running: resolving r does not settle it.
	rr := resolution(r, `"done"`)
	settled, err := s.Resolve(ctx(t), batch("s1", "t1", base.Add(time.Minute), rr))
	must(t, "Resolve r", err)
	if settled {
		t.Error("Resolve settled a running turn")
	}
	if got := getTurn(t, s, "s1", "t1").Status; got != turn.StatusRunning {
		t.Errorf("turn status %s after Resolve, want running", got)
	}

	// Parking again moves neither a pending nor a resolved completion.
	again := commit("s1", "t1", "owner-a")
	for _, k := range []turn.Completion{a, r} {
		p := parkOf(k)
		p.Deadline, p.OnTimeout = base.Add(2*time.Hour), "fail_turn"
		again.Parks = append(again.Parks, p)
	}
	must(t, "Commit parking again", s.Commit(ctx(t), again))
	checkCompletion(t, s, "pending parked again", parked(a, parkOf(a)))
	checkCompletion(t, s, "resolved parked again", resolved(parked(r, parkOf(r)), rr, base.Add(time.Minute)))
}

func testCompletionDeliverEarly(t *testing.T, s turn.Store) {
	mustReceive(t, s, receiveCalls("s1", "t1", "owner-a", 2))
	a, b := issue(t, s, "s1", "t1", 0), issue(t, s, "s1", "t1", 1)

	p1 := json.RawMessage(` {"output": [1, 2.50]} `)
	h1 := sha256.Sum256(p1)
	at := base.Add(time.Second)
	got, err := s.DeliverEarly(ctx(t), a.SessionID, a.KeyHash, p1, h1, at)
	must(t, "DeliverEarly", err)
	want := a
	want.Status, want.Payload, want.PayloadHash, want.ResolvedAt = turn.CompletionEarly, p1, h1, at
	same(t, "early completion", got, wantCompletion(want))
	checkCompletion(t, s, "stored early completion", want)

	// A second delivery changes nothing and returns the completion as it is.
	p2 := json.RawMessage(`{"output":2}`)
	got, err = s.DeliverEarly(ctx(t), a.SessionID, a.KeyHash, p2, sha256.Sum256(p2), base.Add(2*time.Second))
	isErr(t, "DeliverEarly to an early completion", err, turn.ErrCompletionState)
	same(t, "early completion after a second delivery", got, wantCompletion(want))

	// Pending, then resolved: no early delivery.
	must(t, "Commit parking b", s.Commit(ctx(t), parkCommit("s1", "t1", "owner-a", "", b)))
	got, err = s.DeliverEarly(ctx(t), b.SessionID, b.KeyHash, p2, sha256.Sum256(p2), base.Add(2*time.Second))
	isErr(t, "DeliverEarly to a pending completion", err, turn.ErrCompletionState)
	same(t, "pending completion", got, wantCompletion(parked(b, parkOf(b))))
	item := resolution(parked(b, parkOf(b)), `"ok"`)
	_, err = s.Resolve(ctx(t), batch("s1", "t1", base.Add(time.Minute), item))
	must(t, "Resolve b", err)
	got, err = s.DeliverEarly(ctx(t), b.SessionID, b.KeyHash, p2, sha256.Sum256(p2), base.Add(2*time.Minute))
	isErr(t, "DeliverEarly to a completed completion", err, turn.ErrCompletionState)
	same(t, "completed completion", got.Status, turn.CompletionCompleted)

	_, err = s.DeliverEarly(ctx(t), "s1", keyHash("s1", "t1", 9), p2, sha256.Sum256(p2), base)
	isErr(t, "DeliverEarly to an unknown key", err, turn.ErrNotFound)
	if _, err := s.DeliverEarly(ctx(t), a.SessionID, a.KeyHash, json.RawMessage(`{"bad": `), [32]byte{}, base); err == nil {
		t.Error("DeliverEarly stored invalid JSON")
	}
}

func testHeartbeat(t *testing.T, s turn.Store) {
	mustReceive(t, s, receiveCalls("s1", "t1", "owner-a", 5))
	a, n, i, e, r := issue(t, s, "s1", "t1", 0), issue(t, s, "s1", "t1", 1), issue(t, s, "s1", "t1", 2), issue(t, s, "s1", "t1", 3), issue(t, s, "s1", "t1", 4)
	payload := json.RawMessage(`{"output":1}`)
	_, err := s.DeliverEarly(ctx(t), e.SessionID, e.KeyHash, payload, sha256.Sum256(payload), base)
	must(t, "DeliverEarly", err)
	c := parkCommit("s1", "t1", "owner-a", "", a, n, e, r)
	c.Parks[1].HeartbeatTimeout, c.Parks[1].HeartbeatDeadline = 0, time.Time{} // n: no heartbeat clock
	must(t, "Commit parks", s.Commit(ctx(t), c))
	_, err = s.Resolve(ctx(t), batch("s1", "t1", base.Add(time.Second), resolution(parked(r, parkOf(r)), "1")))
	must(t, "Resolve r", err)
	a = parked(a, parkOf(a))
	n = parked(n, c.Parks[1])

	steps := []struct {
		name string
		now  time.Time
		want time.Time // a's heartbeat deadline afterwards
	}{
		{"extends to now + timeout", base.Add(10 * time.Second), base.Add(40 * time.Second)},
		{"never moves back", base.Add(5 * time.Second), base.Add(40 * time.Second)},
		{"extends again", base.Add(20 * time.Minute), base.Add(20*time.Minute + 30*time.Second)},
		{"never past the deadline", base.Add(59*time.Minute + 45*time.Second), base.Add(time.Hour)},
	}
	for _, st := range steps {
		got, err := s.Heartbeat(ctx(t), a.SessionID, a.KeyHash, st.now)
		must(t, "Heartbeat: "+st.name, err)
		a.HeartbeatDeadline = st.want
		same(t, "Heartbeat: "+st.name, got, wantCompletion(a))
		checkCompletion(t, s, "after Heartbeat: "+st.name, a)
	}

	got, err := s.Heartbeat(ctx(t), n.SessionID, n.KeyHash, base.Add(time.Minute))
	must(t, "Heartbeat without a heartbeat clock", err)
	same(t, "completion without a heartbeat clock", got, wantCompletion(n))

	for _, x := range []struct {
		name string
		key  [32]byte
		want turn.CompletionStatus
	}{{"issued", i.KeyHash, turn.CompletionIssued}, {"early", e.KeyHash, turn.CompletionEarly}, {"resolved", r.KeyHash, turn.CompletionCompleted}} {
		before := getCompletion(t, s, x.key)
		got, err := s.Heartbeat(ctx(t), "s1", x.key, base.Add(time.Minute))
		isErr(t, "Heartbeat of an "+x.name+" completion", err, turn.ErrCompletionState)
		same(t, "Heartbeat of an "+x.name+" completion returns it", got, before)
		same(t, x.name+" status", got.Status, x.want)
		checkCompletion(t, s, x.name+" completion after Heartbeat", before)
	}
	_, err = s.Heartbeat(ctx(t), "s1", keyHash("s1", "t1", 9), base)
	isErr(t, "Heartbeat of an unknown key", err, turn.ErrNotFound)
}

func testDueCompletions(t *testing.T, s turn.Store) {
	const n = 8
	mustReceive(t, s, receiveCalls("s1", "t1", "owner-a", n))
	var cs []turn.Completion
	for i := range n {
		cs = append(cs, issue(t, s, "s1", "t1", i))
	}
	payload := json.RawMessage(`{"output":1}`)
	early, err := s.DeliverEarly(ctx(t), cs[5].SessionID, cs[5].KeyHash, payload, sha256.Sum256(payload), base)
	must(t, "DeliverEarly", err)
	cs[5] = early
	clocks := []struct{ deadline, heartbeat time.Time }{
		{base.Add(time.Minute), time.Time{}},                     // 0: due at +1m by its deadline
		{base.Add(10 * time.Minute), base.Add(30 * time.Second)}, // 1: due at +30s by its heartbeat
		{base.Add(5 * time.Minute), base.Add(5 * time.Minute)},   // 2: due at +5m by both
		{base.Add(2 * time.Hour), base.Add(time.Hour)},           // 3: not due
		{base.Add(10 * time.Minute), time.Time{}},                // 4: due at exactly now
		{base, time.Time{}},                                      // 5: early: never due
		{base, base},                                             // 6: resolved: never due
		{time.Time{}, time.Time{}},                               // 7: issued only
	}
	c := commit("s1", "t1", "owner-a")
	for i, k := range clocks[:7] {
		p := parkOf(cs[i])
		p.Deadline, p.HeartbeatDeadline = k.deadline, k.heartbeat
		if k.heartbeat.IsZero() {
			p.HeartbeatTimeout = 0
		}
		c.Parks = append(c.Parks, p)
		cs[i] = parked(cs[i], p)
	}
	must(t, "Commit parks", s.Commit(ctx(t), c))
	_, err = s.Resolve(ctx(t), batch("s1", "t1", base, resolution(cs[6], "1")))
	must(t, "Resolve 6", err)

	due := func(now time.Time, limit int, want ...int) {
		t.Helper()
		got, err := s.DueCompletions(ctx(t), now, limit)
		must(t, "DueCompletions", err)
		if got == nil {
			t.Errorf("DueCompletions at %v: nil, want a non-nil (possibly empty) slice", now)
		}
		ws := []turn.Completion{}
		for _, i := range want {
			ws = append(ws, wantCompletion(cs[i]))
		}
		same(t, fmt.Sprintf("DueCompletions at +%v limit %d", now.Sub(base), limit), got, ws)
	}
	now := base.Add(10 * time.Minute)
	due(now, 10, 1, 0, 2, 4)
	due(now, 2, 1, 0)
	due(now, 0)
	due(base.Add(30*time.Second), 10, 1) // at exactly the heartbeat deadline
	due(base, 10)

	// A heartbeat takes 1 off the list until its new heartbeat deadline.
	hb, err := s.Heartbeat(ctx(t), cs[1].SessionID, cs[1].KeyHash, base.Add(time.Minute))
	must(t, "Heartbeat", err)
	cs[1] = hb
	due(base.Add(time.Minute), 10, 0)
	due(base.Add(time.Minute+30*time.Second), 10, 0, 1)
}

func testSecret(t *testing.T, s turn.Store) {
	boom := errors.New("no entropy")
	_, err := s.Secret(ctx(t), func() (string, error) { return "", boom })
	isErr(t, "Secret with a failing generator", err, boom)
	if _, err := s.Secret(ctx(t), func() (string, error) { return "", nil }); err == nil {
		t.Error("Secret stored an empty secret")
	}
	got, err := s.Secret(ctx(t), func() (string, error) { return "first", nil })
	must(t, "Secret", err)
	same(t, "secret", got, "first")
	got, err = s.Secret(ctx(t), func() (string, error) {
		t.Error("Secret generated a second secret")
		return "second", nil
	})
	must(t, "Secret again", err)
	same(t, "secret read again", got, "first")
}

// Replicas starting together on a new database agree on one secret.
func testSecretConcurrent(t *testing.T, s turn.Store) {
	const callers = 8
	got := make([]string, callers)
	together(callers, func(i int) {
		v, err := s.Secret(ctx(t), func() (string, error) { return fmt.Sprintf("secret-%d", i), nil })
		if err != nil {
			t.Errorf("Secret %d: %v", i, err)
		}
		got[i] = v
	})
	for i, v := range got {
		if v != got[0] || !strings.HasPrefix(v, "secret-") {
			t.Fatalf("callers got %q (caller %d differs), want one secret", got, i)
		}
	}
}

// Completion times come back in UTC truncated to the microsecond, payloads
// byte for byte, durations to the microsecond.
func testCompletionRoundTrip(t *testing.T, s turn.Store) {
	loc := time.FixedZone("UTC-7", -7*60*60)
	at := time.Date(2029, 12, 31, 23, 59, 59, 999999999, loc)
	utc := time.Date(2030, 1, 1, 6, 59, 59, 999999000, time.UTC)
	mustReceive(t, s, receiveCalls("s1", "t1", "owner-a", 2))
	a, e := completion("s1", "t1", 0), completion("s1", "t1", 1)
	a.CreatedAt, e.CreatedAt = at, at
	must(t, "IssueCompletion a", s.IssueCompletion(ctx(t), a))
	must(t, "IssueCompletion e", s.IssueCompletion(ctx(t), e))

	early := json.RawMessage("{ \"output\" : \"caf\\u00e9 <b>&amp;</b>\",\n \"n\": 1.50, \"n\": 2 }")
	_, err := s.DeliverEarly(ctx(t), e.SessionID, e.KeyHash, early, sha256.Sum256(early), at)
	must(t, "DeliverEarly", err)
	c := commit("s1", "t1", "owner-a")
	for _, k := range []turn.Completion{a, e} {
		p := parkOf(k)
		p.Deadline, p.HeartbeatDeadline = at.Add(time.Hour), at
		p.HeartbeatTimeout = 90*time.Second + 1500*time.Nanosecond // kept to the microsecond
		c.Parks = append(c.Parks, p)
	}
	must(t, "Commit parks", s.Commit(ctx(t), c))
	final := json.RawMessage(` {"output": [ "\ud83d\ude00", 1e3 ]} `)
	ia := resolution(a, "1")
	ia.Payload, ia.PayloadHash = final, sha256.Sum256(final)
	_, err = s.Resolve(ctx(t), batch("s1", "t1", at, ia))
	must(t, "Resolve", err)

	checkTime := func(what string, got, want time.Time) {
		t.Helper()
		if !got.Equal(want) || got.Location() != time.UTC {
			t.Errorf("%s = %v (%v), want %v", what, got, got.Location(), want)
		}
	}
	ga, ge := getCompletion(t, s, a.KeyHash), getCompletion(t, s, e.KeyHash)
	for _, g := range []turn.Completion{ga, ge} {
		checkTime("CreatedAt", g.CreatedAt, utc)
		checkTime("Deadline", g.Deadline, utc.Add(time.Hour))
		checkTime("HeartbeatDeadline", g.HeartbeatDeadline, utc)
		checkTime("ResolvedAt", g.ResolvedAt, utc)
		if g.HeartbeatTimeout != 90*time.Second+time.Microsecond {
			t.Errorf("HeartbeatTimeout = %v, want 1m30.000001s", g.HeartbeatTimeout)
		}
	}
	if !bytes.Equal(ge.Payload, early) || ge.PayloadHash != sha256.Sum256(early) {
		t.Errorf("early payload = %q (hash %x), want %q byte for byte", ge.Payload, ge.PayloadHash, early)
	}
	if !bytes.Equal(ga.Payload, final) || ga.PayloadHash != sha256.Sum256(final) {
		t.Errorf("final payload = %q (hash %x), want %q byte for byte", ga.Payload, ga.PayloadHash, final)
	}
}

// testPendingCount: only completions parked and unresolved count; issued,
// early and resolved ones do not.
func testPendingCount(t *testing.T, s turn.Store) {
	count := func(what string, want int64) {
		t.Helper()
		n, err := s.PendingCount(ctx(t))
		must(t, "PendingCount "+what, err)
		if n != want {
			t.Errorf("PendingCount %s = %d, want %d", what, n, want)
		}
	}
	count("of an empty store", 0)
	mustReceive(t, s, receiveCalls("s1", "t0", "owner-a", 2))
	issue(t, s, "s1", "t0", 0)
	e := issue(t, s, "s1", "t0", 1)
	payload := json.RawMessage(`{"output":"early"}`)
	_, err := s.DeliverEarly(ctx(t), e.SessionID, e.KeyHash, payload, sha256.Sum256(payload), base)
	must(t, "DeliverEarly", err)
	count("with an issued and an early key", 0)

	cs := waitingTurn(t, s, "s1", "t1", 3)
	waitingTurn(t, s, "s2", "t1", 2)
	count("with five parked calls in two sessions", 5)

	_, err = s.Resolve(ctx(t), batch("s1", "t1", base.Add(time.Minute), resolution(cs[0], `"a"`), resolution(cs[2], `"c"`)))
	must(t, "Resolve", err)
	count("after two were resolved", 3)
	timedOut := resolution(cs[1], `null`)
	timedOut.Status = turn.CompletionTimedOut
	_, err = s.Resolve(ctx(t), batch("s1", "t1", base.Add(2*time.Minute), timedOut))
	must(t, "Resolve timed out", err)
	count("after the third timed out", 2)
}

// testGetDelivery: a delivery's read is the completion with its call's
// recorded result (identity, status, attempts and times) and its turn's
// call count and creation time; a key without a result row reads as not
// recorded; an unknown key is ErrNotFound.
func testGetDelivery(t *testing.T, s turn.Store) {
	cs := waitingTurn(t, s, "s1", "t1", 3)
	tu := getTurn(t, s, "s1", "t1")
	d, err := s.GetDelivery(ctx(t), "s1", cs[1].KeyHash)
	must(t, "GetDelivery", err)
	same(t, "completion", d.Completion, wantCompletion(cs[1]))
	if !d.Recorded || d.Calls != 3 || !d.TurnCreatedAt.Equal(tu.CreatedAt) {
		t.Errorf("recorded %v, %d calls, created %v; want a recorded result, 3 calls, created %v", d.Recorded, d.Calls, d.TurnCreatedAt, tu.CreatedAt)
	}
	want := tu.Results[1]
	got := d.Result
	got.Output, got.Error = want.Output, want.Error // a store may leave them out
	same(t, "result", got, want)

	mustReceive(t, s, receiveCalls("s1", "t2", "owner-a", 2))
	x := issue(t, s, "s1", "t2", 1)
	d, err = s.GetDelivery(ctx(t), "s1", x.KeyHash)
	must(t, "GetDelivery of an issued key", err)
	if d.Recorded || d.Calls != 2 || d.Status != turn.CompletionIssued {
		t.Errorf("issued key: recorded %v, %d calls, status %s; want no result, 2 calls, issued", d.Recorded, d.Calls, d.Status)
	}
	_, err = s.GetDelivery(ctx(t), "s1", keyHash("s1", "t9", 0))
	isErr(t, "GetDelivery of an unknown key", err, turn.ErrNotFound)
}
