package dispatch_test

import (
	"testing"
	"time"

	"github.com/turnd/turnd/dispatch"
)

func TestOutcomeConstructors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		got       dispatch.Outcome
		status    dispatch.Status
		err       string
		retryable bool
	}{
		{"ok", dispatch.OK([]byte(`{}`), true), dispatch.StatusOK, "", false},
		{"fail", dispatch.Fail("boom", "it broke"), dispatch.StatusError, "boom: it broke", false},
		{"retryable", dispatch.FailRetryable("busy", "", time.Second), dispatch.StatusError, "busy", true},
		{"refused", dispatch.Refused("not_granted", "no"), dispatch.StatusRefused, "not_granted: no", false},
		{"cancelled", dispatch.Cancelled("stop"), dispatch.StatusCancelled, "cancelled: stop", false},
		{"deferred", dispatch.Defer(dispatch.Pending{OnTimeout: dispatch.OnTimeoutErrorAsResult}), dispatch.StatusPending, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.got.Status != tc.status {
				t.Errorf("status %q, want %q", tc.got.Status, tc.status)
			}
			switch {
			case tc.err == "" && tc.got.Err != nil:
				t.Errorf("unexpected error %v", tc.got.Err)
			case tc.err != "" && (tc.got.Err == nil || tc.got.Err.Error() != tc.err || tc.got.Err.Retryable != tc.retryable):
				t.Errorf("error %+v, want %q (retryable %v)", tc.got.Err, tc.err, tc.retryable)
			}
			if tc.status == dispatch.StatusPending && tc.got.Pending.OnTimeout != dispatch.OnTimeoutErrorAsResult {
				t.Errorf("pending %+v", tc.got.Pending)
			}
		})
	}
}

func TestVerdictString(t *testing.T) {
	t.Parallel()
	for v, want := range map[dispatch.Verdict]string{dispatch.Run: "run", dispatch.Replay: "replay", dispatch.Refuse: "refuse", 7: "Verdict(7)"} {
		if got := v.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int(v), got, want)
		}
	}
}

// Replayed outcomes are completed like tools' ones, so that the host can
// rely on Err and Pending being set.
func TestReplayedOutcomesAreCompleted(t *testing.T) {
	t.Parallel()
	h := newHost()
	h.verdicts["p"] = dispatch.Admission{Verdict: dispatch.Replay, Outcome: dispatch.Outcome{Status: dispatch.StatusPending}}
	h.verdicts["c"] = dispatch.Admission{Verdict: dispatch.Replay, Outcome: dispatch.Outcome{Status: dispatch.StatusCancelled}}
	if _, err := (dispatch.Wave{Calls: calls("p", "c")}).Run(t.Context(), h); err != nil {
		t.Fatal(err)
	}
	as := h.accountedCalls()
	if as[0].Outcome.Pending == nil || as[1].Outcome.Err == nil || as[1].Outcome.Err.Code != dispatch.CodeCancelled {
		t.Errorf("accounted %+v", as)
	}
}
