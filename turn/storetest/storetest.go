package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/turnd/turnd/budget"
	"github.com/turnd/turnd/dispatch"
	"github.com/turnd/turnd/turn"
)

// Run runs the conformance suite against the store that open returns. open
// must return a fresh, empty, migrated store (isolated from every other
// call's) and close it in t.Cleanup.
func Run(t *testing.T, open func(t *testing.T) turn.Store) {
	tests := []struct {
		name string
		run  func(t *testing.T, s turn.Store)
	}{
		{"Ping", testPing},
		{"CreateGetSession", testCreateGetSession},
		{"CreateSessionExists", testCreateSessionExists},
		{"GetSessionNotFound", testGetSessionNotFound},
		{"ReceiveTurnCreatesSession", testReceiveTurnCreatesSession},
		{"ReceiveTurnExistingSession", testReceiveTurnExistingSession},
		{"ReceiveTurnDuplicate", testReceiveTurnDuplicate},
		{"ReceiveTurnConcurrentNewSession", testReceiveTurnConcurrentNewSession},
		{"CommitSeqs", testCommitSeqs},
		{"CommitConcurrent", testCommitConcurrent},
		{"CommitResultsUpsert", testCommitResultsUpsert},
		{"CommitOutputs", testCommitOutputs},
		{"CommitStatus", testCommitStatus},
		{"CommitLeaseLost", testCommitLeaseLost},
		{"CommitKeepsLeaseExpiry", testCommitKeepsLeaseExpiry},
		{"GetTurnNotFound", testGetTurnNotFound},
		{"LedgerPaging", testLedgerPaging},
		{"LedgerNotFound", testLedgerNotFound},
		{"LedgerBytes", testLedgerBytes},
		{"TurnLedger", testTurnLedger},
		{"LinesOfOneTurn", testLinesOfOneTurn},
		{"Answered", testAnswered},
		{"LookupTurn", testLookupTurn},
		{"RecordTurn", testRecordTurn},
		{"RecordTurnRefused", testRecordTurnRefused},
		{"RecordTurnConcurrent", testRecordTurnConcurrent},
		{"RecordTurnCallsAnswered", testRecordTurnCallsAnswered},
		{"RecordTurnCallsAnsweredConcurrent", testRecordTurnCallsAnsweredConcurrent},
		{"OutputExpiry", testOutputExpiry},
		{"ClaimTurns", testClaimTurns},
		{"ClaimTurnsConcurrent", testClaimTurnsConcurrent},
		{"ClaimTurnsBackOff", testClaimTurnsBackOff},
		{"CommitLeaseEpoch", testCommitLeaseEpoch},
		{"RenewLeases", testRenewLeases},
		{"CancelRequests", testCancelRequests},
		{"CancelRequestsConcurrent", testCancelRequestsConcurrent},
		{"TimesUTCMicroseconds", testTimes},
		{"JSONByteExact", testJSONByteExact},
		{"CompletionIssue", testCompletionIssue},
		{"CompletionPark", testCompletionPark},
		{"CompletionDeliverEarly", testCompletionDeliverEarly},
		{"ResolveSettles", testResolveSettles},
		{"ResolveEarlyAndEmpty", testResolveEarlyAndEmpty},
		{"ResolveMismatch", testResolveMismatch},
		{"ResolveRace", testResolveRace},
		{"ResolveManyKeys", testResolveManyKeys},
		{"ResolveWhileCommitting", testResolveWhileCommitting},
		{"Heartbeat", testHeartbeat},
		{"DueCompletions", testDueCompletions},
		{"PendingCount", testPendingCount},
		{"Secret", testSecret},
		{"SecretConcurrent", testSecretConcurrent},
		{"CompletionRoundTrip", testCompletionRoundTrip},
		{"GetDelivery", testGetDelivery},
		{"Unsettled", testUnsettled},
		{"RecordLate", testRecordLate},
		{"RecordLateConcurrent", testRecordLateConcurrent},
		{"WebhookCommit", testWebhookCommit},
		{"WebhookResolve", testWebhookResolve},
		{"WebhookClaim", testWebhookClaim},
		{"WebhookClaimConcurrent", testWebhookClaimConcurrent},
		{"WebhookMark", testWebhookMark},
		{"ListSessions", testListSessions},
		{"ListTurns", testListTurns},
		{"ListParked", testListParked},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.run(t, open(t))
		})
	}
}

// base is the suite's clock: not UTC and with nanoseconds, so every test
// also checks that times come back in UTC truncated to the microsecond.
var base = time.Date(2031, 3, 14, 15, 9, 26, 535897932, time.FixedZone("UTC+2", 2*60*60))

// ctx returns a context that ends with the test.
func ctx(t *testing.T) context.Context {
	t.Helper()
	return t.Context()
}

// normTime is what a store returns for t.
func normTime(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.Truncate(time.Microsecond).UTC()
}

// normJSON is what a store returns for m: the same bytes, nil when empty.
func normJSON(m json.RawMessage) json.RawMessage {
	if len(m) == 0 {
		return nil
	}
	return m
}

func wantSession(s turn.Session) turn.Session {
	s.CreatedAt = normTime(s.CreatedAt)
	s.Metadata = normJSON(s.Metadata)
	return s
}

func wantTurn(t turn.Turn) turn.Turn {
	t.CreatedAt, t.SettledAt = normTime(t.CreatedAt), normTime(t.SettledAt)
	calls := make([]turn.Call, len(t.Calls))
	for i, c := range t.Calls {
		c.Arguments = normJSON(c.Arguments)
		calls[i] = c
	}
	t.Calls = calls
	results := make([]turn.Result, len(t.Results))
	for i, r := range t.Results {
		results[i] = wantResult(r)
	}
	t.Results = results
	return t
}

func wantResult(r turn.Result) turn.Result {
	r.Output = normJSON(r.Output)
	r.StartedAt, r.FinishedAt = normTime(r.StartedAt), normTime(r.FinishedAt)
	return r
}

func wantLine(l turn.Line, seq int64, sessionID string) turn.Line {
	l.Seq, l.SessionID = seq, sessionID
	l.At, l.Data = normTime(l.At), normJSON(l.Data)
	return l
}

func wantOutput(o turn.Output) turn.Output {
	o.CreatedAt, o.ExpiresAt = normTime(o.CreatedAt), normTime(o.ExpiresAt)
	if o.Data == nil {
		o.Data = []byte{}
	}
	return o
}

// gotTurn normalises what a store returned where the contract leaves room:
// an empty results list may be nil or not.
func gotTurn(t turn.Turn) turn.Turn {
	if t.Results == nil {
		t.Results = []turn.Result{}
	}
	return t
}

func gotOutput(o turn.Output) turn.Output {
	if o.Data == nil {
		o.Data = []byte{}
	}
	return o
}

// same fails the test when got and want differ.
func same[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got %+v\nwant %+v", what, got, want)
	}
}

// isErr fails the test unless errors.Is(err, want).
func isErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: error %v, want %v", what, err, want)
	}
}

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// testBudget returns a budget.Config with every field set to a non-zero
// value, found by reflection so that the suite does not depend on the
// budget package's fields.
func testBudget() budget.Config {
	var c budget.Config
	fill(reflect.ValueOf(&c).Elem())
	return c
}

func fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i))
			}
		}
	case reflect.String:
		v.SetString("bytes")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(7)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(7)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(0.25)
	}
}

func session(id string) turn.Session {
	return turn.Session{
		ID:          id,
		Tools:       []string{"read_file", "search"},
		Budget:      testBudget(),
		CallbackURL: "https://frontend.test/callback",
		Metadata:    json.RawMessage(`{"user":"u-1"}`),
		CreatedAt:   base,
	}
}

// receive describes a new running turn of session sid with two calls,
// leased to owner until base+1m.
func receive(sid, tid, owner string) turn.Receive {
	return turn.Receive{
		Session: session(sid),
		Turn: turn.Turn{
			SessionID:     sid,
			ID:            tid,
			Status:        turn.StatusRunning,
			Mode:          dispatch.ModeOrdered,
			FailurePolicy: dispatch.PolicyIsolate,
			Calls: []turn.Call{
				{ID: tid + "-c0", Name: "read_file", Arguments: json.RawMessage(`{"path":"a.txt"}`)},
				{ID: tid + "-c1", Name: "write_file", Arguments: json.RawMessage(`{"path":"b.txt","text":"hi"}`)},
			},
			Hash:      "hash-" + tid,
			CreatedAt: base,
		},
		Line: turn.Line{
			TurnID: tid,
			Kind:   turn.LineTurnReceived,
			At:     base,
			Data:   json.RawMessage(`{"calls":2}`),
		},
		LeaseOwner: owner,
		LeaseUntil: base.Add(time.Minute),
	}
}

// receiveIDs is receive with a call per id, named by it.
func receiveIDs(sid, tid, owner string, ids ...string) turn.Receive {
	r := receive(sid, tid, owner)
	r.Turn.Calls = nil
	for _, id := range ids {
		r.Turn.Calls = append(r.Turn.Calls, turn.Call{ID: id, Name: "read_file", Arguments: json.RawMessage(`{}`)})
	}
	return r
}

// receiveAndCommit receives turn tid of session sid (owner-a) with the
// calls that rs answer, rs[i] the result of call rs[i].Index, and commits rs.
func receiveAndCommit(t *testing.T, s turn.Store, sid, tid string, rs ...turn.Result) {
	t.Helper()
	ids := make([]string, len(rs))
	for _, r := range rs {
		ids[r.Index] = r.CallID
	}
	mustReceive(t, s, receiveIDs(sid, tid, "owner-a", ids...))
	c := commit(sid, tid, "owner-a")
	c.Results = rs
	must(t, "Commit "+sid+"/"+tid, s.Commit(ctx(t), c))
}

// mustReceive records r and returns the turn_received line's seq.
func mustReceive(t *testing.T, s turn.Store, r turn.Receive) int64 {
	t.Helper()
	res, err := s.ReceiveTurn(ctx(t), r)
	must(t, fmt.Sprintf("ReceiveTurn %s/%s", r.Turn.SessionID, r.Turn.ID), err)
	return res.Seq
}

// line returns a ledger line of turn tid.
func line(tid, callID string, kind turn.LineKind, data string) turn.Line {
	l := turn.Line{TurnID: tid, CallID: callID, Kind: kind, At: base.Add(time.Second)}
	if data != "" {
		l.Data = json.RawMessage(data)
	}
	return l
}

// result returns a final ok result of call idx of turn tid.
func result(tid string, idx int) turn.Result {
	return turn.Result{
		Index:         idx,
		CallID:        fmt.Sprintf("%s-c%d", tid, idx),
		Name:          "read_file",
		Effect:        dispatch.EffectRead,
		Status:        turn.CallOK,
		Output:        json.RawMessage(`"file contents"`),
		OriginalBytes: 13,
		OriginalLines: 1,
		Attempts:      1,
		StartedAt:     base.Add(time.Second),
		FinishedAt:    base.Add(2 * time.Second),
	}
}

// commit returns a commit of turn sid/tid by owner that keeps the lease.
func commit(sid, tid, owner string) turn.Commit {
	return turn.Commit{
		Key:        turn.TurnKey{SessionID: sid, TurnID: tid},
		LeaseOwner: owner,
		LeaseUntil: base.Add(2 * time.Minute),
	}
}

// readLedger reads the whole ledger of sid in pages of size page.
func readLedger(t *testing.T, s turn.Store, sid string, page int) []turn.Line {
	t.Helper()
	var all []turn.Line
	var after int64
	for {
		lines, err := s.Ledger(ctx(t), sid, after, page, turn.MaxPageBytes)
		must(t, "Ledger "+sid, err)
		if len(lines) == 0 {
			return all
		}
		all = append(all, lines...)
		after = lines[len(lines)-1].Seq
	}
}

// checkSeqs fails unless lines carry seqs 1..len(lines) in order.
func checkSeqs(t *testing.T, lines []turn.Line) {
	t.Helper()
	for i, l := range lines {
		if l.Seq != int64(i+1) {
			t.Fatalf("line %d has seq %d, want %d (seqs must be gap-free from 1)", i, l.Seq, i+1)
		}
	}
}

// together runs f(0) … f(n-1) on goroutines of their own, released at
// once the better to race one another, and returns when all have.
func together(n int, f func(i int)) {
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			f(i)
		})
	}
	close(start)
	wg.Wait()
}

// claimAll claims batches until claim finds none left, handing each to
// got; an error fails the test, named by what, and ends the claiming.
func claimAll[T any](t *testing.T, what string, claim func() ([]T, error), got func([]T)) {
	for {
		batch, err := claim()
		if err != nil {
			t.Errorf("%s: %v", what, err)
			return
		}
		if len(batch) == 0 {
			return
		}
		got(batch)
	}
}
