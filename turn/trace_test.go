package turn_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/turnd/turnd/dispatch"
	"github.com/turnd/turnd/internal/teststores"
	"github.com/turnd/turnd/tool"
	"github.com/turnd/turnd/turn"
)

// traced is a tracer provider writing to an in-memory exporter.
type traced struct {
	exp   *tracetest.InMemoryExporter
	tp    *sdktrace.TracerProvider
	mu    sync.Mutex
	ended map[string]int
	wake  chan struct{}
	every func() // called on every span's end (under mu), if set
}

func newTraced(t testing.TB) *traced {
	t.Helper()
	tr := &traced{exp: tracetest.NewInMemoryExporter(), ended: make(map[string]int), wake: make(chan struct{}, 1)}
	tr.tp = sdktrace.NewTracerProvider(sdktrace.WithSyncer(tr.exp), sdktrace.WithSpanProcessor(tr))
	t.Cleanup(func() { _ = tr.tp.Shutdown(context.Background()) })
	return tr
}

// OnEnd implements sdktrace.SpanProcessor: it counts the spans ended.
func (tr *traced) OnEnd(s sdktrace.ReadOnlySpan) {
	tr.mu.Lock()
	tr.ended[s.Name()]++
	if tr.every != nil {
		tr.every()
	}
	tr.mu.Unlock()
	select {
	case tr.wake <- struct{}{}:
	default:
	}
}

func (*traced) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (*traced) Shutdown(context.Context) error                  { return nil }
func (*traced) ForceFlush(context.Context) error                { return nil }

// wait waits until n spans called name have ended.
func (tr *traced) wait(t *testing.T, name string, n int) {
	t.Helper()
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	for {
		tr.mu.Lock()
		got := tr.ended[name]
		tr.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-tr.wake:
		case <-timeout.C:
			t.Fatalf("%d spans %q ended, want %d", got, name, n)
		}
	}
}

// named returns the ended spans called name.
func (tr *traced) named(name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range tr.exp.GetSpans() {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// one returns the one ended span called name.
func (tr *traced) one(t *testing.T, name string) tracetest.SpanStub {
	t.Helper()
	got := tr.named(name)
	if len(got) != 1 {
		var names []string
		for _, s := range tr.exp.GetSpans() {
			names = append(names, s.Name)
		}
		t.Fatalf("%d spans %q, want 1; spans: %v", len(got), name, names)
	}
	return got[0]
}

func attrOf(s tracetest.SpanStub, key string) (attribute.Value, bool) {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func wantAttrs(t *testing.T, s tracetest.SpanStub, want map[string]string) {
	t.Helper()
	for k, v := range want {
		got, ok := attrOf(s, k)
		if !ok || got.Emit() != v {
			t.Errorf("span %s: %s = %q (set %v), want %q", s.Name, k, got.Emit(), ok, v)
		}
	}
}

// remoteParent is the span context of a caller that posted a turn with a
// traceparent header.
func remoteParent(t *testing.T) trace.SpanContext {
	t.Helper()
	sc, err := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	if err != nil {
		t.Fatal(err)
	}
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: sc, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
}

func TestTraceSpans(t *testing.T) {
	t.Parallel()
	teststores.Each(t, func(t *testing.T, open func(testing.TB) turn.Store) {
		for _, content := range []bool{false, true} {
			t.Run(fmt.Sprintf("content=%v", content), func(t *testing.T) {
				tr := newTraced(t)
				prop := propagation.TraceContext{}
				headers := make(chan http.Header, 1)
				srv := httptest.NewServer(otelhttp.NewHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					headers <- r.Header.Clone()
					w.Header().Set("Content-Type", "application/json")
					_, _ = w.Write([]byte(`{"output":{"weather":"fine"}}`))
				}), "tool-server", otelhttp.WithTracerProvider(tr.tp), otelhttp.WithPropagators(prop)))
				t.Cleanup(srv.Close)
				client := &http.Client{Transport: otelhttp.NewTransport(http.DefaultTransport, otelhttp.WithTracerProvider(tr.tp), otelhttp.WithPropagators(prop))}
				reg, err := tool.Parse(fmt.Appendf(nil, "tools:\n  - name: web\n    effect: read\n    http: {url: %q}\nbuiltin: [echo]\n", srv.URL), tool.Options{HTTPClient: client})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(reg.CloseIdleConnections)
				specs := append(reg.List(), &tool.Spec{Name: "fail", Effect: dispatch.EffectRead, Impl: dispatch.ToolFunc(func(context.Context, dispatch.Call, *dispatch.Attempt) dispatch.Outcome {
					return dispatch.Fail("no_such_city", "no city of that name")
				})})
				reg = mustRegistry(t, specs...)
				svc := newService(t, turn.Config{Store: open(t), Tools: func() *tool.Registry { return reg }, TracerProvider: tr.tp, TraceContent: content})
				parent := remoteParent(t)
				ctx := trace.ContextWithRemoteSpanContext(context.Background(), parent)
				sub, err := svc.Submit(ctx, "s", turn.TurnRequest{ID: "t", Calls: []turn.Call{
					{ID: "c1", Name: "echo", Arguments: json.RawMessage(`{"secret":"hunter2"}`)},
					{ID: "c2", Name: "web", Arguments: json.RawMessage(`{}`)},
					{ID: "c3", Name: "fail", Arguments: json.RawMessage(`{}`)},
				}})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := svc.Await(context.Background(), turn.TurnKey{SessionID: "s", TurnID: sub.Turn.ID}); err != nil {
					t.Fatal(err)
				}
				tr.wait(t, "turn", 1) // the last to end

				root := tr.one(t, "turn")
				if !root.Parent.Equal(parent) || root.SpanContext.TraceID() != parent.TraceID() {
					t.Fatalf("turn span's parent %v, want the caller's %v", root.Parent, parent)
				}
				wantAttrs(t, root, map[string]string{"turnd.session.id": "s", "turnd.turn.id": "t", "turnd.turn.calls": "3", "turnd.turn.status": "completed"})
				for _, c := range []struct{ name, id, typ, kind, status, etype string }{
					{"echo", "c1", "function", "builtin", "ok", ""},
					{"web", "c2", "extension", "http", "ok", ""},
					{"fail", "c3", "function", "builtin", "error", "no_such_city"},
				} {
					s := tr.one(t, "execute_tool "+c.name)
					if s.Parent.SpanID() != root.SpanContext.SpanID() || s.SpanContext.TraceID() != parent.TraceID() {
						t.Errorf("%s: parent %v, want the turn span %v", s.Name, s.Parent.SpanID(), root.SpanContext.SpanID())
					}
					wantAttrs(t, s, map[string]string{
						"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": c.name, "gen_ai.tool.call.id": c.id,
						"gen_ai.tool.type": c.typ, "turnd.tool.kind": c.kind, "turnd.call.status": c.status, "turnd.call.attempt": "1",
					})
					if c.etype != "" {
						wantAttrs(t, s, map[string]string{"error.type": c.etype})
						if s.Status.Code != codes.Error || s.Status.Description != "no city of that name" {
							t.Errorf("%s: status %+v, want an error", s.Name, s.Status)
						}
					} else if s.Status.Code == codes.Error {
						t.Errorf("%s: status %+v", s.Name, s.Status)
					}
					_, hasArgs := attrOf(s, "gen_ai.tool.call.arguments")
					_, hasResult := attrOf(s, "gen_ai.tool.call.result")
					if hasArgs != content || (c.etype == "" && hasResult != content) {
						t.Errorf("%s: arguments recorded %v, result %v; want %v (TraceContent)", s.Name, hasArgs, hasResult, content)
					}
				}
				if content {
					wantAttrs(t, tr.one(t, "execute_tool echo"), map[string]string{
						"gen_ai.tool.call.arguments": `{"secret":"hunter2"}`, "gen_ai.tool.call.result": `{"secret":"hunter2"}`,
					})
					wantAttrs(t, tr.one(t, "execute_tool web"), map[string]string{"gen_ai.tool.call.result": `{"weather":"fine"}`})
				}

				// The trace crosses into the HTTP tool: turnd's client span is a
				// child of the call's span, the tool server's span of that.
				web := tr.one(t, "execute_tool web")
				var clientSpan, server tracetest.SpanStub
				for _, s := range tr.exp.GetSpans() {
					switch s.SpanKind {
					case trace.SpanKindClient:
						clientSpan = s
					case trace.SpanKindServer:
						server = s
					}
				}
				if clientSpan.Parent.SpanID() != web.SpanContext.SpanID() {
					t.Fatalf("HTTP client span's parent %v, want execute_tool web %v", clientSpan.Parent.SpanID(), web.SpanContext.SpanID())
				}
				if server.Parent.SpanID() != clientSpan.SpanContext.SpanID() || server.SpanContext.TraceID() != parent.TraceID() {
					t.Fatalf("tool server's span: parent %v trace %v; want %v in %v", server.Parent.SpanID(), server.SpanContext.TraceID(), clientSpan.SpanContext.SpanID(), parent.TraceID())
				}
				h := <-headers
				if tp := h.Get("Traceparent"); !strings.Contains(tp, parent.TraceID().String()) {
					t.Fatalf("the tool got traceparent %q, want trace %s", tp, parent.TraceID())
				}
			})
		}
	})
}

func TestTraceParkedCall(t *testing.T) {
	t.Parallel()
	teststores.Each(t, func(t *testing.T, open func(testing.TB) turn.Store) {
		tr := newTraced(t)
		keys := make(chan string, 1)
		reg := mustRegistry(t, deferring(keys, nil))
		svc := startService(t, turn.Config{Store: open(t), Tools: func() *tool.Registry { return reg }, TracerProvider: tr.tp})
		sub, err := svc.Submit(context.Background(), "s", turn.TurnRequest{ID: "t", Calls: []turn.Call{{ID: "d", Name: "defer"}}})
		if err != nil {
			t.Fatal(err)
		}
		key := <-keys
		k := turn.TurnKey{SessionID: "s", TurnID: sub.Turn.ID}
		if tt, err := svc.Await(context.Background(), k); err != nil || tt.Status != turn.StatusWaiting {
			t.Fatalf("%s %v", tt.Status, err)
		}
		// The sender posts the completion in a trace of its own.
		sender := remoteParent(t)
		ctx := trace.ContextWithRemoteSpanContext(context.Background(), sender)
		if _, err := svc.Complete(ctx, key, turn.Delivery{Output: json.RawMessage(`{"ok":true}`)}); err != nil {
			t.Fatal(err)
		}
		waitSettled(t, svc, "s", "t")
		tr.wait(t, "execute_tool defer", 2)
		spans := tr.named("execute_tool defer")
		if len(spans) != 2 {
			t.Fatalf("%d execute_tool defer spans, want 2 (park, completion)", len(spans))
		}
		park, done := spans[0], spans[1]
		wantAttrs(t, park, map[string]string{"turnd.call.status": "pending", "gen_ai.tool.call.id": "d"})
		if park.EndTime.After(done.StartTime) {
			t.Errorf("the park span ends at %v, after the completion's starts (%v)", park.EndTime, done.StartTime)
		}
		wantAttrs(t, done, map[string]string{"turnd.completion.result": "accepted", "gen_ai.tool.call.id": "d", "gen_ai.operation.name": "execute_tool"})
		if !done.Parent.Equal(sender) {
			t.Errorf("the completion's span's parent %v, want the sender's %v", done.Parent, sender)
		}
		if len(done.Links) != 1 || done.Links[0].SpanContext.SpanID() != park.SpanContext.SpanID() {
			t.Errorf("the completion's span links %v, want the park span %v", done.Links, park.SpanContext.SpanID())
		}
	})
}

// TestTraceLedgerUnchanged: tracing changes nothing of a turn's ledger.
func TestTraceLedgerUnchanged(t *testing.T) {
	t.Parallel()
	var ledgers [2]string
	for i, on := range []bool{false, true} {
		f := newFixture(t)
		cfg := turn.Config{Store: f.store, Tools: func() *tool.Registry { return f.reg }, Now: fixedNow}
		if on {
			cfg.TracerProvider = newTraced(t).tp
		}
		svc := newService(t, cfg)
		f.run(svc, "s", turn.TurnRequest{ID: "t", Calls: calls("a=read", "b=write")})
		lines, err := f.store.Ledger(context.Background(), "s", 0, 100, turn.MaxPageBytes)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range lines {
			ledgers[i] += fmt.Sprintf("%s:%s %s\n", l.Kind, l.CallID, l.Data)
		}
	}
	if ledgers[0] != ledgers[1] || !strings.Contains(ledgers[0], "attempt_started:b") {
		t.Fatalf("ledger without tracing\n%s\nwith tracing\n%s", ledgers[0], ledgers[1])
	}
}

func fixedNow() time.Time { return time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC) }

// TestTraceWebhook: the turn.settled webhook carries the trace context of
// its turn, in a client span that is a child of the turn's.
func TestTraceWebhook(t *testing.T) {
	t.Parallel()
	teststores.Each(t, func(t *testing.T, open func(testing.TB) turn.Store) {
		tr := newTraced(t)
		rc := newReceiver(t)
		f := &fixture{t: t, store: open(t)}
		f.reg = mustRegistry(t, f.counted("read", dispatch.EffectRead, echo))
		h := newHooked(t, f, newSigner(t), func(c *turn.Config) { c.TracerProvider = tr.tp })
		h.createSession(t, "s", rc.srv.URL+"/hooks")
		parent := remoteParent(t)
		sub, err := h.svc.Submit(trace.ContextWithRemoteSpanContext(context.Background(), parent), "s", turn.TurnRequest{ID: "t", Calls: calls("a=read")})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.svc.Await(context.Background(), turn.TurnKey{SessionID: "s", TurnID: sub.Turn.ID}); err != nil {
			t.Fatal(err)
		}
		r := rc.next(t)
		tp := r.header.Get("Traceparent")
		if !strings.HasPrefix(tp, "00-"+parent.TraceID().String()+"-") {
			t.Fatalf("the webhook's traceparent %q is not of the turn's trace %s", tp, parent.TraceID())
		}
		tr.wait(t, "webhook turn.settled", 1)
		hook, root := tr.one(t, "webhook turn.settled"), tr.one(t, "turn")
		if hook.Parent.SpanID() != root.SpanContext.SpanID() || hook.SpanKind != trace.SpanKindClient || !strings.Contains(tp, hook.SpanContext.SpanID().String()) {
			t.Fatalf("webhook span: parent %v kind %v id %v; want a client span under the turn's %v, named by traceparent %q",
				hook.Parent.SpanID(), hook.SpanKind, hook.SpanContext.SpanID(), root.SpanContext.SpanID(), tp)
		}
		wantAttrs(t, hook, map[string]string{"turnd.webhook.event": "turn.settled", "http.response.status_code": "200"})
	})
}
