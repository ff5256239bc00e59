package turn_test

import (
	"context"
	"encoding/json"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnd/turnd/dispatch"
	"github.com/turnd/turnd/tool"
	"github.com/turnd/turnd/turn"
)

// attemptTime is an entry of a call_answered line's attempt_times.
type attemptTime struct {
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`
	Outcome    string    `json:"outcome"`
}

// answeredLines returns the data of the call_answered lines of a turn, by
// call id.
func (f *fixture) answeredLines(session, turnID string) map[string]json.RawMessage {
	f.t.Helper()
	lines, err := f.store.Ledger(context.Background(), session, 0, 1000, turn.MaxPageBytes)
	if err != nil {
		f.t.Fatal(err)
	}
	out := map[string]json.RawMessage{}
	for _, l := range lines {
		if l.TurnID == turnID && l.Kind == turn.LineCallAnswered {
			out[l.CallID] = l.Data
		}
	}
	return out
}

// flaky fails its first attempts as answers says, then answers ok.
func flaky(name string, effect dispatch.Effect, answers ...dispatch.Outcome) *tool.Spec {
	return &tool.Spec{Name: name, Effect: effect,
		Retry: dispatch.RetryPolicy{MaxAttempts: len(answers) + 1, InitialInterval: 30 * time.Millisecond, Multiplier: 1},
		Impl: dispatch.ToolFunc(func(_ context.Context, _ dispatch.Call, at *dispatch.Attempt) dispatch.Outcome {
			if n := at.Number(); n <= len(answers) {
				return answers[n-1]
			}
			return dispatch.OK([]byte(`"fine"`), true)
		})}
}

// TestRetriedCallLedger: the call_answered line of a retried call lists
// its attempts, in order, with the backoff between them and how each
// ended; the line of a call tried once is as it always was. Both for a
// turn of reads (recorded whole) and a turn with a write (journaled).
func TestRetriedCallLedger(t *testing.T) {
	t.Parallel()
	timeout := dispatch.FailRetryable("tool_unavailable", "the tool did not answer within 1s", 0)
	timeout.Err.TimedOut = true
	unavailable := dispatch.FailRetryable("tool_unavailable", "the tool answered 503", 0)
	f := newFixture(t,
		flaky("flaky-read", dispatch.EffectRead, timeout, unavailable),
		flaky("flaky-write", dispatch.EffectWrite, unavailable, unavailable))
	for _, tc := range []struct {
		turn  string
		calls []turn.Call
		want  []string // the outcomes of the flaky call's attempts
	}{
		{"reads", calls("f=flaky-read", "r=read"), []string{"timed_out", "tool_unavailable", "ok"}},
		{"write", calls("f=flaky-write", "r=read"), []string{"tool_unavailable", "tool_unavailable", "ok"}},
	} {
		t.Run(tc.turn, func(t *testing.T) {
			tr := f.run(f.svc, "s-"+tc.turn, turn.TurnRequest{ID: tc.turn, Calls: tc.calls})
			if statuses(tr) != "f=ok r=ok" {
				t.Fatalf("results %s", statuses(tr))
			}
			lines := f.answeredLines("s-"+tc.turn, tc.turn)
			if got := string(lines["r"]); got != `{"attempts":1,"status":"ok"}` {
				t.Errorf("the line of a call tried once reads %s", got)
			}
			var data struct {
				AttemptTimes []attemptTime `json:"attempt_times"`
				Attempts     int           `json:"attempts"`
				Status       string        `json:"status"`
			}
			if err := json.Unmarshal(lines["f"], &data); err != nil {
				t.Fatal(err)
			}
			tries := data.AttemptTimes
			outcomes := make([]string, len(tries))
			for i, a := range tries {
				outcomes[i] = a.Outcome
			}
			if data.Attempts != 3 || data.Status != "ok" || !slices.Equal(outcomes, tc.want) {
				t.Fatalf("the retried call's line reads %s", lines["f"])
			}
			res := tr.Results[0]
			if !tries[0].StartedAt.Equal(res.StartedAt) || !tries[2].FinishedAt.Equal(res.FinishedAt) {
				t.Errorf("attempts from %v to %v, the call from %v to %v", tries[0].StartedAt, tries[2].FinishedAt, res.StartedAt, res.FinishedAt)
			}
			for i, a := range tries {
				if a.FinishedAt.Before(a.StartedAt) {
					t.Errorf("attempt %d ends before it starts: %+v", i+1, a)
				}
				if i > 0 {
					if gap := a.StartedAt.Sub(tries[i-1].FinishedAt); gap < 30*time.Millisecond {
						t.Errorf("attempt %d starts %v after attempt %d ended, within the 30 ms backoff", i+1, gap, i)
					}
				}
			}
		})
	}
}

// TestStreamedTurnLedger: a streamed turn's turn_received line says so,
// at the stream's end, and a read that started while the stream arrived
// is dated from its early start, before that line, its retry after it; a
// turn posted whole says nothing of streams.
func TestStreamedTurnLedger(t *testing.T) {
	t.Parallel()
	var skew atomic.Int64 // the service clock's lead on time.Now
	clock := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	started := make(chan struct{}, 4)
	spec := flaky("flaky-read", dispatch.EffectRead, dispatch.FailRetryable("tool_unavailable", "busy", 0))
	inner := spec.Impl
	spec.Impl = dispatch.ToolFunc(func(ctx context.Context, c dispatch.Call, at *dispatch.Attempt) dispatch.Outcome {
		started <- struct{}{}
		return inner.Invoke(ctx, c, at)
	})
	f := newFixture(t, spec)
	svc := f.service("owner-s", clock)

	st := svc.OpenStream("s", "t1", "ndjson")
	if err := st.Add(turn.Call{ID: "f", Name: "flaky-read", Arguments: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	<-started                      // the read started early
	skew.Store(int64(time.Second)) // the stream goes on for a second
	sub, err := st.Submit(t.Context(), turn.TurnRequest{})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := svc.Await(t.Context(), turn.TurnKey{SessionID: "s", TurnID: sub.Turn.ID})
	if err != nil {
		t.Fatal(err)
	}
	res := tr.Results[0]
	if res.Status != turn.CallOK || res.Attempts != 2 {
		t.Fatalf("result %+v", res)
	}
	if lead := tr.CreatedAt.Sub(res.StartedAt); lead < time.Second {
		t.Errorf("the early read starts %v before the stream's end, want a second or more", lead)
	}
	lines, err := f.store.Ledger(context.Background(), "s", 0, 1000, turn.MaxPageBytes)
	if err != nil {
		t.Fatal(err)
	}
	var received struct {
		Streamed bool `json:"streamed"`
	}
	if lines[0].Kind != turn.LineTurnReceived || json.Unmarshal(lines[0].Data, &received) != nil || !received.Streamed ||
		!lines[0].At.Equal(tr.CreatedAt) {
		t.Errorf("the streamed turn's first line: %s at %v %s (the turn received at %v)", lines[0].Kind, lines[0].At, lines[0].Data, tr.CreatedAt)
	}
	var data struct {
		AttemptTimes []attemptTime `json:"attempt_times"`
	}
	if err := json.Unmarshal(f.answeredLines("s", "t1")["f"], &data); err != nil {
		t.Fatal(err)
	}
	if tries := data.AttemptTimes; len(tries) != 2 || !tries[0].StartedAt.Equal(res.StartedAt) || tries[1].StartedAt.Before(tr.CreatedAt) {
		t.Errorf("attempts %+v; the call started at %v, the stream ended at %v", tries, res.StartedAt, tr.CreatedAt)
	}

	whole := f.run(svc, "w", turn.TurnRequest{ID: "t1", Calls: calls("r=read")})
	wl, err := f.store.Ledger(context.Background(), "w", 0, 1000, turn.MaxPageBytes)
	if err != nil || whole.Status != turn.StatusCompleted {
		t.Fatal(err, whole.Status)
	}
	if got := string(wl[0].Data); got != `{"calls":[{"id":"r","name":"read"}],"mode":"ordered","failure_policy":"isolate"}` {
		t.Errorf("a whole post's turn_received line reads %s", got)
	}
}
