package turn

import (
	"context"
	"net/http"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/turnd/turnd/completion"
	"github.com/turnd/turnd/dispatch"
	"github.com/turnd/turnd/tool"
)

// Attribute keys of the spans the service makes: the OpenTelemetry GenAI
// semantic conventions' for tool execution, and turnd's own.
const (
	attrOperation    = attribute.Key("gen_ai.operation.name")
	attrToolName     = attribute.Key("gen_ai.tool.name")
	attrToolCallID   = attribute.Key("gen_ai.tool.call.id")
	attrToolType     = attribute.Key("gen_ai.tool.type")
	attrToolArgs     = attribute.Key("gen_ai.tool.call.arguments")
	attrToolResult   = attribute.Key("gen_ai.tool.call.result")
	attrErrorType    = attribute.Key("error.type")
	attrSessionID    = attribute.Key("turnd.session.id")
	attrTurnID       = attribute.Key("turnd.turn.id")
	attrTurnCalls    = attribute.Key("turnd.turn.calls")
	attrTurnStatus   = attribute.Key("turnd.turn.status")
	attrTurnResumed  = attribute.Key("turnd.turn.resumed")
	attrCallIndex    = attribute.Key("turnd.call.index")
	attrAttempt      = attribute.Key("turnd.call.attempt")
	attrCallStatus   = attribute.Key("turnd.call.status")
	attrToolKind     = attribute.Key("turnd.tool.kind")
	attrCompletion   = attribute.Key("turnd.completion.result")
	attrWebhookEvent = attribute.Key("turnd.webhook.event")
)

// maxTracedContent caps the bytes of arguments and results a span holds
// when Config.TraceContent records them.
const maxTracedContent = 8 << 10

// spanMemory is how many span contexts the service remembers for links:
// of parked calls (for the span of their completion) and of turns (for
// their webhooks). Past it the oldest are forgotten, and their later spans
// have no link or parent.
const spanMemory = 4096

// tracing is the service's tracer and what it remembers of its spans; nil
// when Config.TracerProvider is nil, which costs the hot path a nil check.
type tracing struct {
	tracer  trace.Tracer
	prop    propagation.TextMapPropagator
	content bool

	parked spanIndex[[32]byte] // park span of a parked call, by key hash
	turns  spanIndex[TurnKey]  // latest turn span of a turn
}

func newTracing(cfg Config) *tracing {
	if cfg.TracerProvider == nil {
		return nil
	}
	prop := cfg.Propagator
	if prop == nil {
		prop = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	}
	return &tracing{
		tracer:  cfg.TracerProvider.Tracer("github.com/turnd/turnd/turn"),
		prop:    prop,
		content: cfg.TraceContent,
		parked:  newSpanIndex[[32]byte](spanMemory),
		turns:   newSpanIndex[TurnKey](spanMemory),
	}
}

// spanIndex is a bounded map of span contexts, forgetting the oldest.
type spanIndex[K comparable] struct {
	mu    sync.Mutex
	m     map[K]trace.SpanContext
	order []K // insertion ring
	next  int
}

func newSpanIndex[K comparable](n int) spanIndex[K] {
	return spanIndex[K]{m: make(map[K]trace.SpanContext), order: make([]K, 0, n)}
}

func (x *spanIndex[K]) put(k K, sc trace.SpanContext) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if _, ok := x.m[k]; !ok {
		if len(x.order) < cap(x.order) {
			x.order = append(x.order, k)
		} else {
			delete(x.m, x.order[x.next])
			x.order[x.next] = k
			x.next = (x.next + 1) % len(x.order)
		}
	}
	x.m[k] = sc
}

func (x *spanIndex[K]) get(k K) (trace.SpanContext, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	sc, ok := x.m[k]
	return sc, ok
}

// host returns the dispatch.Host of r's wave: r itself, or with tracing r
// wrapped so that every attempt runs in an execute_tool span, child of the
// turn's span, which this starts (endTurnSpan ends it).
func (r *run) host() dispatch.Host {
	tr := r.svc.trace
	if tr == nil {
		return r
	}
	_, r.span = tr.tracer.Start(r.logCtx, "turn", trace.WithAttributes(
		attrSessionID.String(r.key.SessionID),
		attrTurnID.String(r.key.TurnID),
		attrTurnCalls.Int(len(r.turn.Calls)),
		attrTurnResumed.Bool(r.resumed),
	))
	tr.turns.put(r.key, r.span.SpanContext())
	return tracedHost{r}
}

// endTurnSpan ends the span host started, with the turn's status.
func (r *run) endTurnSpan() {
	if r.span == nil {
		return
	}
	status := r.final.Status
	if r.settleErr != nil {
		r.span.SetStatus(codes.Error, r.settleErr.Error())
	} else if status == StatusFailed {
		r.span.SetStatus(codes.Error, string(status))
	}
	r.span.SetAttributes(attrTurnStatus.String(string(status)))
	r.span.End()
}

// tracedHost is a run whose admitted tools run in execute_tool spans.
type tracedHost struct{ *run }

// Admit implements dispatch.Host.
func (h tracedHost) Admit(ctx context.Context, call dispatch.Call) dispatch.Admission {
	adm := h.run.Admit(ctx, call)
	if adm.Verdict == dispatch.Run && adm.Tool != nil {
		i := h.index[call.ID]
		kind := "builtin"
		if spec := h.calls[i].spec; spec != nil {
			kind = tool.Kind(spec)
		}
		adm.Tool = &tracedTool{inner: adm.Tool, r: h.run, index: i, kind: kind}
	}
	return adm
}

// tracedTool runs its tool's attempts in execute_tool spans.
type tracedTool struct {
	inner dispatch.Tool
	r     *run
	index int
	kind  string
}

// Inline implements dispatch.InlineTool as the tool it wraps does.
func (t *tracedTool) Inline() bool {
	it, ok := t.inner.(dispatch.InlineTool)
	return ok && it.Inline()
}

// Invoke implements dispatch.Tool: the attempt's span is the parent of
// what the tool does (its HTTP request, its MCP call's _meta).
func (t *tracedTool) Invoke(ctx context.Context, call dispatch.Call, at *dispatch.Attempt) (o dispatch.Outcome) {
	tr := t.r.svc.trace
	attempt := 1
	if at != nil {
		attempt = at.Number()
	}
	typ := "extension" // a tool turnd calls on the agent's side
	if t.kind == "builtin" {
		typ = "function"
	}
	attrs := []attribute.KeyValue{
		attrOperation.String("execute_tool"),
		attrToolName.String(call.Name),
		attrToolCallID.String(call.ID),
		attrToolType.String(typ),
		attrToolKind.String(t.kind),
		attrSessionID.String(t.r.key.SessionID),
		attrTurnID.String(t.r.key.TurnID),
		attrCallIndex.Int(t.index),
		attrAttempt.Int(attempt),
	}
	if tr.content {
		attrs = append(attrs, attrToolArgs.String(clip(call.Arguments)))
	}
	ctx, span := tr.tracer.Start(trace.ContextWithSpan(ctx, t.r.span), "execute_tool "+call.Name, trace.WithAttributes(attrs...))
	defer func() {
		if v := recover(); v != nil {
			span.SetStatus(codes.Error, "panic")
			span.SetAttributes(attrErrorType.String("panic"))
			span.End()
			panic(v) // dispatch recovers it, as without a span
		}
		t.finish(ctx, span, at, o)
	}()
	return t.inner.Invoke(ctx, call, at)
}

// finish records an attempt's outcome on its span and ends it. A pending
// outcome ends the span at park; its key remembers it, so that the span
// of the completion links to it (traceDelivery).
func (t *tracedTool) finish(ctx context.Context, span trace.Span, at *dispatch.Attempt, o dispatch.Outcome) {
	tr := t.r.svc.trace
	span.SetAttributes(attrCallStatus.String(string(o.Status)))
	switch o.Status {
	case dispatch.StatusOK:
	case dispatch.StatusPending:
		if at != nil && at.KeyTaken() {
			if key, err := at.CompletionKey(ctx); err == nil {
				tr.parked.put(completion.HashOf(key), span.SpanContext())
			}
		}
	default:
		etype := string(o.Status)
		msg := etype
		if o.Err != nil {
			msg = o.Err.Message
			switch {
			case o.Err.TimedOut:
				etype = "timed_out"
			case o.Err.Code != "":
				etype = o.Err.Code
			}
		}
		span.SetStatus(codes.Error, msg)
		span.SetAttributes(attrErrorType.String(etype))
	}
	if tr.content {
		if text, ok := outcomeText(o); ok {
			span.SetAttributes(attrToolResult.String(clip(text)))
		}
	}
	span.End()
}

// outcomeText is the output of an outcome as a span records it.
func outcomeText(o dispatch.Outcome) ([]byte, bool) {
	if p, ok := o.Detail.(*tool.Projected); ok {
		return p.Result.Text, true
	}
	return o.Output, o.Output != nil
}

// clip is b as a string of at most maxTracedContent bytes.
func clip(b []byte) string {
	if len(b) > maxTracedContent {
		b = b[:maxTracedContent]
	}
	return string(b)
}

// traceDelivery starts the span of a delivery to a parked call's key, a
// child of ctx's span (the request's) linked to the span that ended at
// park when this process remembers it; end records the delivery's result.
func (s *Service) traceDelivery(ctx context.Context, c Completion) (end func(*DeliveryResult, *error)) {
	tr := s.trace
	if tr == nil {
		return func(*DeliveryResult, *error) {}
	}
	opts := []trace.SpanStartOption{trace.WithAttributes(
		attrOperation.String("execute_tool"),
		attrToolName.String(c.CallName),
		attrToolCallID.String(c.CallID),
		attrSessionID.String(c.SessionID),
		attrTurnID.String(c.TurnID),
		attrCallIndex.Int(c.CallIndex),
	)}
	if sc, ok := tr.parked.get(c.KeyHash); ok {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
	}
	_, span := tr.tracer.Start(ctx, "execute_tool "+c.CallName, opts...)
	return func(res *DeliveryResult, err *error) {
		switch {
		case *err != nil:
			span.SetStatus(codes.Error, (*err).Error())
			span.SetAttributes(attrCompletion.String("refused"))
		default:
			span.SetAttributes(attrCompletion.String(res.Status))
		}
		span.End()
	}
}

// traceWebhook starts the client span of a webhook delivery attempt, a
// child of its turn's span when this process remembers it, and puts its
// context in req's headers; the returned func ends it with the attempt.
func (s *Service) traceWebhook(req *http.Request, w Webhook) func(attempt) {
	tr := s.trace
	if tr == nil {
		return func(attempt) {}
	}
	ctx := req.Context()
	if sc, ok := tr.turns.get(TurnKey{w.SessionID, w.TurnID}); ok {
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	ctx, span := tr.tracer.Start(ctx, "webhook "+w.Event, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attrWebhookEvent.String(w.Event),
		attrSessionID.String(w.SessionID),
		attrTurnID.String(w.TurnID),
		attribute.Int("turnd.webhook.attempt", w.Attempts),
	))
	tr.prop.Inject(ctx, propagation.HeaderCarrier(req.Header))
	return func(a attempt) {
		if a.status > 0 {
			span.SetAttributes(attribute.Int("http.response.status_code", a.status))
		}
		if a.err != nil || a.status >= 300 {
			span.SetStatus(codes.Error, "webhook not acknowledged")
		}
		span.End()
	}
}
