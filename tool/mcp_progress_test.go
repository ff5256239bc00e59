//go:build unix

package tool

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/turnd/turnd/dispatch"
)

// progressLog is a ProgressReporter that hands every report to a channel.
type progressLog chan reported

type reported struct {
	callID string
	p      Progress
}

func (l progressLog) CallProgress(callID string, p Progress) { l <- reported{callID, p} }

func (l progressLog) next(t *testing.T) reported {
	t.Helper()
	select {
	case r := <-l:
		return r
	case <-time.After(20 * time.Second):
		t.Fatal("no progress reported")
		return reported{}
	}
}

// TestMCPStdioProgressTraceAndCancel runs a real stdio MCP server: a call
// carries the trace context and a progress token in _meta, the server's
// notifications/progress reach the call's reporter, and a call cancelled
// or timed out makes the client send notifications/cancelled, which the
// server records (the SDK sends it when the call's context ends; turnd
// relies on that rather than sending its own).
func TestMCPStdioProgressTraceAndCancel(t *testing.T) {
	t.Parallel()
	cfg := stdioConfig(t, map[string]string{"TURND_TEST_MCP_PROGRESS": "1"}, "      timeout: 3s\n")
	l, _ := openStdio(t, cfg, nil, 10*time.Millisecond)
	r := l.Registry()
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})
	invoke := func(ctx context.Context, name, callID, args string) dispatch.Outcome {
		s, ok := r.Lookup(name)
		if !ok {
			t.Fatalf("no tool %q; the registry has %v", name, names(r))
		}
		ctx = WithCallContext(ctx, CallContext{SessionID: "s", TurnID: "t"})
		return s.Impl.Invoke(ctx, dispatch.Call{ID: callID, Name: name, Arguments: json.RawMessage(args)}, nil)
	}

	t.Run("meta", func(t *testing.T) {
		ctx := WithProgress(trace.ContextWithSpanContext(context.Background(), sc), make(progressLog, 8))
		out := invoke(ctx, "meta", "m1", `{}`)
		var got struct {
			Traceparent   string `json:"traceparent"`
			ProgressToken string `json:"progress_token"`
		}
		if out.Status != dispatch.StatusOK || json.Unmarshal(out.Output, &got) != nil {
			t.Fatalf("%+v %s", out, out.Output)
		}
		if got.Traceparent != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" || !strings.HasPrefix(got.ProgressToken, "turnd-") {
			t.Fatalf("_meta %+v", got)
		}
		// Without a span or a reporter, _meta has neither.
		out = invoke(context.Background(), "meta", "m2", `{}`)
		if out.Status != dispatch.StatusOK || string(out.Output) != `{"progress_token":null,"traceparent":null}` {
			t.Fatalf("plain call: %+v %s", out, out.Output)
		}
	})

	for _, c := range []struct {
		name   string
		cancel bool // cancel the call's context; else let the entry's timeout end it
		status dispatch.Status
	}{
		{"cancelled", true, dispatch.StatusCancelled},
		{"timed out", false, dispatch.StatusError},
	} {
		t.Run(c.name, func(t *testing.T) {
			log := make(progressLog, 8)
			ctx, cancel := context.WithCancel(WithProgress(context.Background(), log))
			defer cancel()
			callID := "b-" + strings.ReplaceAll(c.name, " ", "-")
			done := make(chan dispatch.Outcome, 1)
			go func() { done <- invoke(ctx, "block", callID, `{}`) }()
			for i := 1; i <= 3; i++ {
				got := log.next(t)
				if got.callID != callID || got.p.Progress != float64(i) || got.p.Total != 3 || got.p.Message != "step "+string(rune('0'+i)) {
					t.Fatalf("report %d: %+v", i, got)
				}
			}
			if c.cancel {
				cancel()
			}
			out := <-done
			if out.Status != c.status || (!c.cancel && (out.Err == nil || !out.Err.TimedOut)) {
				t.Fatalf("outcome %+v %+v", out, out.Err)
			}
			// The server saw notifications/cancelled for the call; its
			// session (and process) lives on.
			rec := invoke(context.Background(), "cancelled", "q-"+callID, `{"call":"s/t/`+callID+`"}`)
			if rec.Status != dispatch.StatusOK || string(rec.Output) != "cancelled s/t/"+callID {
				t.Fatalf("the server did not record the cancellation: %+v %+v %s", rec, rec.Err, rec.Output)
			}
		})
	}
}
