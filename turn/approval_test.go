package turn_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnd/turnd/completion"
	"github.com/turnd/turnd/dispatch"
	"github.com/turnd/turnd/internal/teststores"
	"github.com/turnd/turnd/tool"
	"github.com/turnd/turnd/turn"
)

// gatedTools are a write that needs approval (with a schema: {"path":
// string}), recording the arguments of each run, and a read that does not.
type gatedTools struct {
	mu   sync.Mutex
	runs []string // the arguments of each run of "rm"
	hold chan struct{}
}

func (g *gatedTools) specs(t *testing.T, pending completion.Options) []*tool.Spec {
	always := &tool.Approval{Always: true}
	rm := &tool.Spec{Name: "rm", Effect: dispatch.EffectWrite, Approval: always, Pending: pending,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`),
		Impl: dispatch.ToolFunc(func(_ context.Context, c dispatch.Call, _ *dispatch.Attempt) dispatch.Outcome {
			g.mu.Lock()
			g.runs = append(g.runs, string(c.Arguments))
			g.mu.Unlock()
			return dispatch.OK([]byte(`"removed"`), true)
		})}
	slow := &tool.Spec{Name: "slow", Effect: dispatch.EffectWrite, Impl: dispatch.ToolFunc(func(ctx context.Context, c dispatch.Call, _ *dispatch.Attempt) dispatch.Outcome {
		if g.hold != nil {
			<-g.hold
		}
		return dispatch.OK([]byte(`"slow done"`), true)
	})}
	ls := &tool.Spec{Name: "ls", Effect: dispatch.EffectRead, Impl: dispatch.ToolFunc(echo)}
	return []*tool.Spec{rm, slow, ls}
}

func (g *gatedTools) ran() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.runs...)
}

func approvalService(t *testing.T, store turn.Store, owner string, reg *tool.Registry) *turn.Service {
	t.Helper()
	return startService(t, turn.Config{Store: store, Tools: func() *tool.Registry { return reg }, Owner: owner,
		LeaseTTL: 2 * time.Second, SweepInterval: 10 * time.Millisecond})
}

// parkForApproval submits a turn whose call "c" (rm) needs approval and
// waits for its answer: c pending, nothing of rm run.
func parkForApproval(t *testing.T, svc *turn.Service, g *gatedTools, session, id string, calls ...turn.Call) turn.Turn {
	t.Helper()
	if calls == nil {
		calls = []turn.Call{{ID: "l", Name: "ls", Arguments: json.RawMessage(`{}`)}, {ID: "c", Name: "rm", Arguments: json.RawMessage(`{"path":"/tmp/a"}`)}}
	}
	got := submitAwait(t, svc, session, turn.TurnRequest{ID: id, Calls: calls})
	if got.Status != turn.StatusWaiting {
		t.Fatalf("turn %s, want waiting", got.Status)
	}
	for _, r := range got.Results {
		if r.CallID == "c" && r.Status != turn.CallPending {
			t.Fatalf("c is %s, want pending", r.Status)
		}
	}
	if len(g.ran()) != 0 {
		t.Fatalf("rm ran before a decision: %v", g.ran())
	}
	return got
}

func resultOf(t *testing.T, tr turn.Turn, id string) turn.Result {
	t.Helper()
	for _, r := range tr.Results {
		if r.CallID == id {
			return r
		}
	}
	t.Fatalf("no result for %s in %+v", id, tr.Results)
	return turn.Result{}
}

func decisionCode(err error) string {
	var de *turn.DecisionError
	if errors.As(err, &de) {
		return de.Code
	}
	return ""
}

func TestApprovalDecisions(t *testing.T) {
	t.Parallel()
	teststores.Each(t, func(t *testing.T, open func(testing.TB) turn.Store) {
		t.Run("approve runs the tool once, as posted", func(t *testing.T) {
			t.Parallel()
			g, store := &gatedTools{}, open(t)
			svc := approvalService(t, store, "a", mustRegistry(t, g.specs(t, completion.Options{})...))
			parkForApproval(t, svc, g, "s", "t")
			ledger := ledgerText(t, store, "s")
			if !strings.Contains(ledger, `call_pending c {`) || !strings.Contains(ledger, `"reason":"approval"`) || !strings.Contains(ledger, `"rule":"always"`) {
				t.Fatalf("no call_pending with reason approval:\n%s", ledger)
			}
			list, err := svc.ListApprovals(context.Background(), turn.Cursor{}, 10)
			if err != nil || len(list) != 1 || list[0].CallID != "c" || string(list[0].Arguments) != `{"path":"/tmp/a"}` || list[0].Rule != "always" {
				t.Fatalf("approvals %+v %v", list, err)
			}
			res, err := svc.Decide(context.Background(), turn.TurnKey{SessionID: "s", TurnID: "t"}, "c", turn.Decision{Decision: turn.DecisionApprove, By: "ana"})
			if err != nil || res.Status != "accepted" || res.Decision != "approved" {
				t.Fatalf("decide: %+v %v", res, err)
			}
			tr := waitSettled(t, svc, "s", "t")
			if r := resultOf(t, tr, "c"); tr.Status != turn.StatusCompleted || r.Status != turn.CallOK || string(r.Output) != `"removed"` {
				t.Fatalf("after approval: %s, c %s %s", tr.Status, r.Status, r.Output)
			}
			if got := g.ran(); len(got) != 1 || got[0] != `{"path":"/tmp/a"}` {
				t.Fatalf("rm ran %v, want once with the posted arguments", got)
			}
			// A repeat is the same decision; another is refused.
			if res, err := svc.Decide(context.Background(), turn.TurnKey{SessionID: "s", TurnID: "t"}, "c", turn.Decision{Decision: turn.DecisionApprove, By: "bo"}); err != nil || res.Status != "already_decided" {
				t.Fatalf("repeat: %+v %v", res, err)
			}
			if _, err := svc.Decide(context.Background(), turn.TurnKey{SessionID: "s", TurnID: "t"}, "c", turn.Decision{Decision: turn.DecisionReject}); decisionCode(err) != turn.CodeAlreadyDecided {
				t.Fatalf("reject after approve: %v", err)
			}
			if list, _ := svc.ListApprovals(context.Background(), turn.Cursor{}, 10); len(list) != 0 {
				t.Fatalf("still listed: %+v", list)
			}
			ledger = ledgerText(t, store, "s")
			for _, want := range []string{`call_decided c {"by":"ana","decision":"approved","edited":false}`, "call_answered c"} {
				if !strings.Contains(ledger, want) {
					t.Errorf("ledger lacks %q:\n%s", want, ledger)
				}
			}
			if n := strings.Count(ledger, "call_admitted c"); n != 1 {
				t.Errorf("%d call_admitted lines for c:\n%s", n, ledger)
			}
		})
		t.Run("approve with edited arguments", func(t *testing.T) {
			t.Parallel()
			g, store := &gatedTools{}, open(t)
			svc := approvalService(t, store, "a", mustRegistry(t, g.specs(t, completion.Options{})...))
			parkForApproval(t, svc, g, "s", "t")
			k := turn.TurnKey{SessionID: "s", TurnID: "t"}
			for _, bad := range []string{`{"path":7}`, `{}`} {
				_, err := svc.Decide(context.Background(), k, "c", turn.Decision{Decision: turn.DecisionApprove, Arguments: json.RawMessage(bad)})
				if decisionCode(err) != "invalid_arguments" {
					t.Fatalf("edited %s: %v, want invalid_arguments", bad, err)
				}
			}
			if _, err := svc.Decide(context.Background(), k, "c", turn.Decision{Decision: turn.DecisionApprove, Arguments: json.RawMessage(`[1]`)}); err == nil {
				t.Fatal("non-object arguments accepted")
			}
			if len(g.ran()) != 0 {
				t.Fatalf("rm ran on refused edits: %v", g.ran())
			}
			res, err := svc.Decide(context.Background(), k, "c", turn.Decision{Decision: turn.DecisionApprove, Arguments: json.RawMessage(`{"path": "/tmp/b"}`)})
			if err != nil || !res.Edited {
				t.Fatalf("decide: %+v %v", res, err)
			}
			waitSettled(t, svc, "s", "t")
			if got := g.ran(); len(got) != 1 || strings.ReplaceAll(got[0], " ", "") != `{"path":"/tmp/b"}` {
				t.Fatalf("rm ran %v, want once with the edited arguments", got)
			}
			ledger := ledgerText(t, store, "s")
			if !strings.Contains(ledger, `"arguments":{"path":"/tmp/b"}`) || !strings.Contains(ledger, `"original_arguments":{"path":"/tmp/a"}`) {
				t.Errorf("call_decided lacks both argument sets:\n%s", ledger)
			}
		})
		t.Run("reject answers the model", func(t *testing.T) {
			t.Parallel()
			g, store := &gatedTools{}, open(t)
			svc := approvalService(t, store, "a", mustRegistry(t, g.specs(t, completion.Options{})...))
			parkForApproval(t, svc, g, "s", "t")
			if _, err := svc.Decide(context.Background(), turn.TurnKey{SessionID: "s", TurnID: "t"}, "c", turn.Decision{Decision: turn.DecisionReject, Message: "not that file"}); err != nil {
				t.Fatal(err)
			}
			tr := waitSettled(t, svc, "s", "t")
			r := resultOf(t, tr, "c")
			if tr.Status != turn.StatusCompleted || r.Status != turn.CallRejected || string(r.Output) != `{"message":"not that file","rejected":true}` {
				t.Fatalf("after reject: %s, c %s %s", tr.Status, r.Status, r.Output)
			}
			if len(g.ran()) != 0 {
				t.Fatalf("rm ran after a rejection: %v", g.ran())
			}
		})
		t.Run("racing decisions: one wins", func(t *testing.T) {
			t.Parallel()
			g, store := &gatedTools{}, open(t)
			svc := approvalService(t, store, "a", mustRegistry(t, g.specs(t, completion.Options{})...))
			parkForApproval(t, svc, g, "s", "t")
			var accepted, refused atomic.Int32
			var wg sync.WaitGroup
			for i := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					d := turn.Decision{Decision: turn.DecisionApprove}
					if i%2 == 1 {
						d = turn.Decision{Decision: turn.DecisionReject, Message: "no"}
					}
					res, err := svc.Decide(context.Background(), turn.TurnKey{SessionID: "s", TurnID: "t"}, "c", d)
					switch {
					case err == nil && res.Status == "accepted":
						accepted.Add(1)
					case decisionCode(err) == turn.CodeAlreadyDecided || (err == nil && res.Status == "already_decided"):
						refused.Add(1)
					default:
						t.Errorf("decision %d: %+v %v", i, res, err)
					}
				}()
			}
			wg.Wait()
			if accepted.Load() != 1 || refused.Load() != 7 {
				t.Fatalf("%d accepted, %d refused; want 1 and 7", accepted.Load(), refused.Load())
			}
			tr := waitSettled(t, svc, "s", "t")
			r := resultOf(t, tr, "c")
			if n := len(g.ran()); (r.Status == turn.CallOK) != (n == 1) || n > 1 {
				t.Fatalf("c %s and rm ran %d times", r.Status, n)
			}
		})
		t.Run("a decision after the deadline is 410 and recorded", func(t *testing.T) {
			t.Parallel()
			g, store := &gatedTools{}, open(t)
			svc := approvalService(t, store, "a", mustRegistry(t, g.specs(t, completion.Options{Deadline: "150ms"})...))
			parkForApproval(t, svc, g, "s", "t")
			time.Sleep(200 * time.Millisecond)
			_, err := svc.Decide(context.Background(), turn.TurnKey{SessionID: "s", TurnID: "t"}, "c", turn.Decision{Decision: turn.DecisionApprove})
			if decisionCode(err) != turn.CodeApprovalExpired {
				t.Fatalf("late decision: %v, want approval_expired", err)
			}
			tr := waitSettled(t, svc, "s", "t")
			if r := resultOf(t, tr, "c"); r.Status != turn.CallTimedOut || r.Error == nil || r.Error.Code != "approval_timeout" || len(g.ran()) != 0 {
				t.Fatalf("c %s %+v, rm ran %v", r.Status, r.Error, g.ran())
			}
			if ledger := ledgerText(t, store, "s"); !strings.Contains(ledger, "decision_late c") {
				t.Fatalf("no decision_late line:\n%s", ledger)
			}
		})
		t.Run("a decision while the wave still runs", func(t *testing.T) {
			t.Parallel()
			g, store := &gatedTools{hold: make(chan struct{})}, open(t)
			svc := approvalService(t, store, "a", mustRegistry(t, g.specs(t, completion.Options{})...))
			calls := []turn.Call{{ID: "c", Name: "rm", Arguments: json.RawMessage(`{"path":"/x"}`)}, {ID: "w", Name: "slow", Arguments: json.RawMessage(`{}`)}}
			if _, err := svc.Submit(context.Background(), "s", turn.TurnRequest{ID: "t", Calls: calls, Async: true}); err != nil {
				t.Fatal(err)
			}
			k := turn.TurnKey{SessionID: "s", TurnID: "t"}
			released := false
			defer func() {
				if !released {
					close(g.hold)
				}
			}()
			var err error
			for range 500 {
				if _, err = svc.Decide(context.Background(), k, "c", turn.Decision{Decision: turn.DecisionApprove}); err == nil {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			if err != nil {
				t.Fatal(err)
			}
			close(g.hold)
			released = true
			tr := waitSettled(t, svc, "s", "t")
			if r := resultOf(t, tr, "c"); r.Status != turn.CallOK || len(g.ran()) != 1 {
				t.Fatalf("c %s, rm ran %v", r.Status, g.ran())
			}
		})
		t.Run("a restart between park and decision", func(t *testing.T) {
			t.Parallel()
			g, store := &gatedTools{}, open(t)
			reg := mustRegistry(t, g.specs(t, completion.Options{})...)
			a, err := turn.New(turn.Config{Store: store, Tools: func() *tool.Registry { return reg }, Owner: "a", LeaseTTL: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			parkForApproval(t, a, g, "s", "t")
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = a.Shutdown(ctx)
			cancel()
			b := approvalService(t, store, "b", reg)
			if _, err := b.Decide(context.Background(), turn.TurnKey{SessionID: "s", TurnID: "t"}, "c", turn.Decision{Decision: turn.DecisionApprove}); err != nil {
				t.Fatal(err)
			}
			tr := waitSettled(t, b, "s", "t")
			if r := resultOf(t, tr, "c"); r.Status != turn.CallOK || len(g.ran()) != 1 {
				t.Fatalf("c %s, rm ran %v", r.Status, g.ran())
			}
		})
		t.Run("bad decisions", func(t *testing.T) {
			t.Parallel()
			g, store := &gatedTools{}, open(t)
			svc := approvalService(t, store, "a", mustRegistry(t, g.specs(t, completion.Options{})...))
			parkForApproval(t, svc, g, "s", "t")
			k := turn.TurnKey{SessionID: "s", TurnID: "t"}
			var inv *turn.InvalidError
			for _, d := range []turn.Decision{{}, {Decision: "maybe"}, {Decision: turn.DecisionReject, Arguments: json.RawMessage(`{}`)},
				{Decision: turn.DecisionReject, Message: strings.Repeat("x", turn.MaxDecisionMessage+1)}, {Decision: turn.DecisionApprove, Arguments: json.RawMessage(`{`)}} {
				if _, err := svc.Decide(context.Background(), k, "c", d); !errors.As(err, &inv) {
					t.Errorf("%+v: %v, want an invalid decision", d, err)
				}
			}
			if _, err := svc.Decide(context.Background(), k, "l", turn.Decision{Decision: turn.DecisionApprove}); decisionCode(err) != turn.CodeNotAwaitingApproval {
				t.Errorf("deciding a call that needs none: %v", err)
			}
			if _, err := svc.Decide(context.Background(), k, "nope", turn.Decision{Decision: turn.DecisionApprove}); !errors.Is(err, turn.ErrNotFound) {
				t.Errorf("unknown call: %v", err)
			}
			if _, err := svc.Decide(context.Background(), turn.TurnKey{SessionID: "s", TurnID: "t2"}, "c", turn.Decision{Decision: turn.DecisionApprove}); !errors.Is(err, turn.ErrNotFound) {
				t.Errorf("unknown turn: %v", err)
			}
			if len(g.ran()) != 0 {
				t.Fatalf("rm ran: %v", g.ran())
			}
		})
	})
}

// TestApprovalWebhookAndKey: a session with a callback URL is told of a
// call that waits for approval (approval.requested, signed), with the
// URL an approver holding no API token decides at; a decision posted to
// that key runs the call, and a result posted there is refused.
func TestApprovalWebhookAndKey(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	g := &gatedTools{}
	f := newFixture(t, g.specs(t, completion.Options{})...)
	h := newHooked(t, f, newSigner(t), nil)
	h.createSession(t, "s", rc.srv.URL+"/hooks")
	got := parkForApproval(t, h.svc, g, "s", "t")
	_ = got
	r := rc.next(t)
	if err := h.signer.Verify(r.header, r.body, time.Now(), 0); err != nil {
		t.Errorf("signature: %v", err)
	}
	var p struct {
		Type string `json:"type"`
		Data struct {
			SessionID string `json:"session_id"`
			TurnID    string `json:"turn_id"`
			Approvals []struct {
				CallID      string `json:"call_id"`
				Tool        string `json:"tool"`
				Rule        string `json:"rule"`
				CompleteURL string `json:"complete_url"`
			} `json:"approvals"`
		} `json:"data"`
	}
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatal(err)
	}
	if p.Type != turn.EventApprovalRequested || p.Data.SessionID != "s" || len(p.Data.Approvals) != 1 ||
		p.Data.Approvals[0].CallID != "c" || p.Data.Approvals[0].Rule != "always" || !strings.HasPrefix(p.Data.Approvals[0].CompleteURL, "/v1/complete/ck_") {
		t.Fatalf("webhook %s", r.body)
	}
	key := strings.TrimPrefix(p.Data.Approvals[0].CompleteURL, "/v1/complete/")
	if _, err := h.svc.Complete(context.Background(), key, turn.Delivery{Output: json.RawMessage(`"done"`)}); decisionCode(err) != turn.CodeAwaitingApproval {
		t.Fatalf("a result posted to an approval key: %v, want awaiting_approval", err)
	}
	if _, err := h.svc.DecideByKey(context.Background(), key, turn.Decision{Decision: turn.DecisionApprove, By: "slack:ana"}); err != nil {
		t.Fatal(err)
	}
	tr := waitSettled(t, h.svc, "s", "t")
	if r := resultOf(t, tr, "c"); r.Status != turn.CallOK || len(g.ran()) != 1 {
		t.Fatalf("c %s, rm ran %v", r.Status, g.ran())
	}
	if _, err := h.svc.DecideByKey(context.Background(), key, turn.Decision{Decision: turn.DecisionReject}); decisionCode(err) != turn.CodeAlreadyDecided {
		t.Fatalf("a second decision on the key: %v", err)
	}
}

func TestSessionApprovalTightens(t *testing.T) {
	t.Parallel()
	teststores.Each(t, func(t *testing.T, open func(testing.TB) turn.Store) {
		g, store := &gatedTools{}, open(t)
		reg := mustRegistry(t, g.specs(t, completion.Options{})...)
		a := approvalService(t, store, "a", reg)
		for _, bad := range []string{`"sometimes"`, `{"tools":["nope"]}`, `{"when":[{"pointer":"/q"}]}`, `{"tools":"ls"}`, `7`} {
			_, err := a.CreateSession(context.Background(), turn.SessionSpec{ID: "bad", Approval: json.RawMessage(bad)})
			var inv *turn.InvalidError
			if !errors.As(err, &inv) || !strings.HasPrefix(inv.Field, "approval") {
				t.Errorf("approval %s: %v, want an invalid approval", bad, err)
			}
		}
		if _, err := a.CreateSession(context.Background(), turn.SessionSpec{ID: "s", Approval: json.RawMessage(`{"tools":["ls"],"when":[{"pointer":"/path","matches":"^/etc/"}]}`)}); err != nil {
			t.Fatal(err)
		}
		// Another process reads the policy from the store.
		b := approvalService(t, store, "b", reg)
		got := submitAwait(t, b, "s", turn.TurnRequest{ID: "t", Calls: []turn.Call{
			{ID: "l", Name: "ls", Arguments: json.RawMessage(`{}`)},
			{ID: "w", Name: "slow", Arguments: json.RawMessage(`{"path":"/etc/passwd"}`)},
			{ID: "x", Name: "slow", Arguments: json.RawMessage(`{"path":"/tmp/x"}`)},
		}})
		if s := statuses(got); s != "l=pending w=pending x=ok" {
			t.Fatalf("with the session's policy: %s", s)
		}
		list, err := b.ListApprovals(context.Background(), turn.Cursor{}, 10)
		if err != nil || len(list) != 2 {
			t.Fatalf("approvals %+v %v", list, err)
		}
		rules := map[string]string{}
		for _, ap := range list {
			rules[ap.CallID] = ap.Rule
		}
		if rules["l"] != "tool ls" || rules["w"] != "/path matches ^/etc/" {
			t.Fatalf("rules %v", rules)
		}
		// A session without a policy of its own asks for none of these.
		got = submitAwait(t, b, "plain", turn.TurnRequest{ID: "t", Calls: []turn.Call{{ID: "l", Name: "ls", Arguments: json.RawMessage(`{}`)}}})
		if s := statuses(got); s != "l=ok" {
			t.Fatalf("without a policy: %s", s)
		}
	})
}

// TestApprovalWhileAnotherApprovedCallRuns: a second call approved while
// the run of the first approved one is under way runs too.
func TestApprovalWhileAnotherApprovedCallRuns(t *testing.T) {
	t.Parallel()
	teststores.Each(t, func(t *testing.T, open func(testing.TB) turn.Store) {
		g, store := &gatedTools{}, open(t)
		hold := make(chan struct{})
		var entered sync.Once
		inRun := make(chan struct{})
		slowRm := &tool.Spec{Name: "slowrm", Effect: dispatch.EffectWrite, Approval: &tool.Approval{Always: true},
			Impl: dispatch.ToolFunc(func(_ context.Context, c dispatch.Call, _ *dispatch.Attempt) dispatch.Outcome {
				entered.Do(func() { close(inRun) })
				<-hold
				return dispatch.OK([]byte(`"slow removed"`), true)
			})}
		svc := approvalService(t, store, "a", mustRegistry(t, append(g.specs(t, completion.Options{}), slowRm)...))
		got := submitAwait(t, svc, "s", turn.TurnRequest{ID: "t", Calls: []turn.Call{
			{ID: "a", Name: "slowrm", Arguments: json.RawMessage(`{}`)},
			{ID: "c", Name: "rm", Arguments: json.RawMessage(`{"path":"/x"}`)},
		}})
		if s := statuses(got); s != "a=pending c=pending" {
			t.Fatalf("parked: %s", s)
		}
		k := turn.TurnKey{SessionID: "s", TurnID: "t"}
		if _, err := svc.Decide(context.Background(), k, "a", turn.Decision{Decision: turn.DecisionApprove}); err != nil {
			t.Fatal(err)
		}
		<-inRun // a's run is under way
		if _, err := svc.Decide(context.Background(), k, "c", turn.Decision{Decision: turn.DecisionApprove}); err != nil {
			close(hold)
			t.Fatal(err)
		}
		close(hold)
		tr := waitSettled(t, svc, "s", "t")
		if s := statuses(tr); s != "a=ok c=ok" || len(g.ran()) != 1 {
			t.Fatalf("after both approvals: %s, rm ran %v", s, g.ran())
		}
	})
}

// TestReadsThatNeedApproval: a read that needs approval does not run
// before its decision, in a turn posted whole or streamed (no early
// start), and the reads after it do not run at once with it: they wait
// for its gate, as after a write.
func TestReadsThatNeedApproval(t *testing.T) {
	t.Parallel()
	for _, streamed := range []bool{false, true} {
		t.Run(fmt.Sprintf("streamed=%v", streamed), func(t *testing.T) {
			t.Parallel()
			var ran sync.Map
			var first atomic.Value // the call id of the first read that ran
			peek := func(name string, ask bool) *tool.Spec {
				sp := &tool.Spec{Name: name, Effect: dispatch.EffectRead, Impl: dispatch.ToolFunc(func(_ context.Context, c dispatch.Call, _ *dispatch.Attempt) dispatch.Outcome {
					first.CompareAndSwap(nil, c.ID)
					ran.Store(c.ID, true)
					return dispatch.OK([]byte(`"seen"`), true)
				})}
				if ask {
					sp.Approval = &tool.Approval{When: mustRules(t, `[{"pointer":"/secret","equals":true}]`)}
				}
				return sp
			}
			f, svc := startedFixture(t, peek("peek", true), peek("look", false))
			f.svc = svc
			calls := []turn.Call{
				{ID: "p1", Name: "peek", Arguments: json.RawMessage(`{"secret":true}`)},
				{ID: "l2", Name: "look", Arguments: json.RawMessage(`{}`)},
				{ID: "p3", Name: "peek", Arguments: json.RawMessage(`{"secret":false}`)},
			}
			var tr turn.Turn
			if streamed {
				tr = streamAwait(t, f.svc, "s", "t", calls)
			} else {
				tr = submitAwait(t, f.svc, "s", turn.TurnRequest{ID: "t", Calls: calls})
			}
			if s := statuses(tr); s != "p1=pending l2=ok p3=ok" {
				t.Fatalf("results %s", s)
			}
			if _, ok := ran.Load("p1"); ok {
				t.Fatal("p1 ran before a decision")
			}
			if _, err := f.svc.Decide(t.Context(), turn.TurnKey{SessionID: "s", TurnID: "t"}, "p1", turn.Decision{Decision: turn.DecisionApprove}); err != nil {
				t.Fatal(err)
			}
			tr = waitSettled(t, f.svc, "s", "t")
			if s := statuses(tr); s != "p1=ok l2=ok p3=ok" {
				t.Fatalf("after approval %s", s)
			}
			if got := first.Load(); got != "l2" {
				t.Fatalf("the first read to run was %v, want l2 (after p1's gate)", got)
			}
		})
	}
}

func mustRules(t *testing.T, js string) []tool.ApprovalRule {
	t.Helper()
	a, err := tool.ParseApproval(json.RawMessage(`{"when":` + js + `}`))
	if err != nil {
		t.Fatal(err)
	}
	return a.When
}

// TestApprovedDeferredTool: an approved call of a deferred tool parks
// again on its key, for its tool's work, and a delivery answers it.
func TestApprovedDeferredTool(t *testing.T) {
	t.Parallel()
	teststores.Each(t, func(t *testing.T, open func(testing.TB) turn.Store) {
		keys := make(chan string, 2)
		d := deferring(keys, nil)
		d.Approval = &tool.Approval{Always: true}
		reg := mustRegistry(t, d)
		svc := approvalService(t, open(t), "a", reg)
		got := submitAwait(t, svc, "s", turn.TurnRequest{ID: "t", Calls: []turn.Call{{ID: "d", Name: "defer", Arguments: json.RawMessage(`{}`)}}})
		if s := statuses(got); s != "d=pending" || len(keys) != 0 {
			t.Fatalf("before the decision: %s, %d keys handed out", s, len(keys))
		}
		k := turn.TurnKey{SessionID: "s", TurnID: "t"}
		if _, err := svc.Decide(context.Background(), k, "d", turn.Decision{Decision: turn.DecisionApprove}); err != nil {
			t.Fatal(err)
		}
		var key string
		select {
		case key = <-keys:
		case <-time.After(20 * time.Second):
			t.Fatal("the approved deferred tool never ran")
		}
		// Parked again, for its tool: no longer an approval.
		if list, _ := svc.ListApprovals(context.Background(), turn.Cursor{}, 10); len(list) != 0 {
			t.Fatalf("still listed as an approval: %+v", list)
		}
		if _, err := svc.Decide(context.Background(), k, "d", turn.Decision{Decision: turn.DecisionReject}); decisionCode(err) != turn.CodeAlreadyDecided && decisionCode(err) != turn.CodeNotAwaitingApproval {
			t.Fatalf("a decision on the re-parked call: %v", err)
		}
		var res turn.DeliveryResult
		var err error
		for range 200 { // the re-park commits as the resumed wave ends
			if res, err = svc.Complete(context.Background(), key, turn.Delivery{Output: json.RawMessage(`{"done":true}`)}); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err != nil || res.Status != "accepted" {
			t.Fatalf("delivery: %+v %v", res, err)
		}
		tr := waitSettled(t, svc, "s", "t")
		if r := resultOf(t, tr, "d"); tr.Status != turn.StatusCompleted || r.Status != turn.CallOK || string(r.Output) != `{"done":true}` {
			t.Fatalf("after the delivery: %s %s %s", tr.Status, r.Status, r.Output)
		}
	})
}

// TestApprovedDeferredToolEarlyDelivery: the result of an approved
// deferred call may arrive before the tool's pending answer (kept as
// early, as for any deferred call) and answers the call.
func TestApprovedDeferredToolEarlyDelivery(t *testing.T) {
	t.Parallel()
	teststores.Each(t, func(t *testing.T, open func(testing.TB) turn.Store) {
		keys := make(chan string, 2)
		var svc *turn.Service
		early := make(chan error, 1)
		d := deferring(keys, func(key string) {
			_, err := svc.Complete(context.Background(), key, turn.Delivery{Output: json.RawMessage(`"fast"`)})
			early <- err
		})
		d.Approval, d.Deferred = &tool.Approval{Always: true}, true
		svc = approvalService(t, open(t), "a", mustRegistry(t, d))
		got := submitAwait(t, svc, "s", turn.TurnRequest{ID: "t", Calls: []turn.Call{{ID: "d", Name: "defer", Arguments: json.RawMessage(`{}`)}}})
		if s := statuses(got); s != "d=pending" {
			t.Fatalf("before the decision: %s", s)
		}
		if _, err := svc.Decide(context.Background(), turn.TurnKey{SessionID: "s", TurnID: "t"}, "d", turn.Decision{Decision: turn.DecisionApprove}); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-early:
			if err != nil {
				t.Fatalf("the early delivery: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the approved deferred tool never ran")
		}
		tr := waitSettled(t, svc, "s", "t")
		if r := resultOf(t, tr, "d"); r.Status != turn.CallOK || string(r.Output) != `"fast"` {
			t.Fatalf("after the early delivery: %s %s", r.Status, r.Output)
		}
	})
}

// streamAwait streams turn id of session with calls, one by one as a
// provider stream adds them (reads may start early), submits it and
// awaits its answer.
func streamAwait(t *testing.T, svc *turn.Service, session, id string, calls []turn.Call) turn.Turn {
	t.Helper()
	st := svc.OpenStream(session, id, "ndjson")
	for _, c := range calls {
		if err := st.Add(c); err != nil {
			t.Fatal(err)
		}
	}
	sub, err := st.Submit(t.Context(), turn.TurnRequest{ID: id})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := svc.Await(t.Context(), turn.TurnKey{SessionID: session, TurnID: sub.Turn.ID})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}
