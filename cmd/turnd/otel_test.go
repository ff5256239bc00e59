package main

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

func TestParseTracing(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		env     map[string]string
		enabled bool
		err     string
	}{
		{"nothing configured", nil, false, ""},
		{"endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, true, ""},
		{"traces endpoint", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, true, ""},
		{"exporter otlp", map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true, ""},
		{"exporter none", map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, false, ""},
		{"sdk disabled", map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, false, ""},
		{"sdk disabled garbage", map[string]string{"OTEL_SDK_DISABLED": "maybe"}, false, "OTEL_SDK_DISABLED"},
		{"exporter zipkin", map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, false, "not supported"},
		{"grpc", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, false, "http/protobuf"},
		{"traces protocol wins", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}, true, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := parseConfig("serve", nil, io.Discard, func(k string) (string, bool) {
				v, ok := c.env[k]
				return v, ok
			})
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want one saying %q", err, c.err)
				}
				return
			}
			if err != nil || cfg.Tracing.Enabled != c.enabled {
				t.Fatalf("enabled %v (err %v), want %v", cfg.Tracing.Enabled, err, c.enabled)
			}
		})
	}
}

// otlpReceiver is an OTLP/HTTP trace endpoint that keeps what it receives.
type otlpReceiver struct {
	mu      sync.Mutex
	spans   []*tracepb.Span
	service string
}

func newOTLPReceiver(t *testing.T) (*otlpReceiver, string) {
	t.Helper()
	rc := &otlpReceiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if err != nil || r.URL.Path != "/v1/traces" || proto.Unmarshal(body, &req) != nil {
			http.Error(w, "bad export", http.StatusBadRequest)
			return
		}
		rc.mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, a := range rs.GetResource().GetAttributes() {
				if a.Key == "service.name" {
					rc.service = a.GetValue().GetStringValue()
				}
			}
			for _, ss := range rs.ScopeSpans {
				rc.spans = append(rc.spans, ss.Spans...)
			}
		}
		rc.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	return rc, srv.URL
}

// byName returns the spans received called name.
func (rc *otlpReceiver) byName(name string) []*tracepb.Span {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []*tracepb.Span
	for _, s := range rc.spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

func spanAttr(s *tracepb.Span, key string) string {
	for _, a := range s.Attributes {
		if a.Key == key {
			return a.GetValue().GetStringValue()
		}
	}
	return ""
}

// TestTraceCrossesTurnd follows one trace from a frontend's traceparent
// through turnd (its request span, the turn's, the call's) into an HTTP
// tool, as exported over OTLP/HTTP by the real binary.
func TestTraceCrossesTurnd(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		rc, endpoint := newOTLPReceiver(t)
		toolHeaders := make(chan http.Header, 1)
		toolSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case toolHeaders <- r.Header.Clone():
			default:
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"output":"sunny"}`))
		}))
		t.Cleanup(toolSrv.Close)
		cfgPath := filepath.Join(t.TempDir(), "tools.yaml")
		if err := os.WriteFile(cfgPath, fmt.Appendf(nil, "tools:\n  - name: weather\n    effect: read\n    http: {url: %q}\n", toolSrv.URL), 0o600); err != nil {
			t.Fatal(err)
		}
		p := startTurnd(t, procOptions{
			args: append([]string{"--config", cfgPath}, b.args(t)...),
			env:  []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + endpoint, "OTEL_BSP_SCHEDULE_DELAY=20", "OTEL_SERVICE_NAME=turnd-e2e"},
		})
		const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
		p.must(http.StatusOK, "POST", "/v1/sessions/s/turns", `{"id":"t1","calls":[{"id":"c1","name":"weather","arguments":{}}]}`,
			"Traceparent", "00-"+traceID+"-"+parentID+"-01", "Tracestate", "frontend=t61rcWkgMzE")
		h := <-toolHeaders
		if tp := h.Get("Traceparent"); !strings.HasPrefix(tp, "00-"+traceID+"-") {
			t.Fatalf("the HTTP tool got traceparent %q, want one of trace %s", tp, traceID)
		}
		if ts := h.Get("Tracestate"); ts != "frontend=t61rcWkgMzE" {
			t.Errorf("the HTTP tool got tracestate %q, want the caller's", ts)
		}
		want := []string{"POST /v1/sessions/{session_id}/turns", "turn", "execute_tool weather"}
		poll(t, settleTimeout, func() error {
			for _, name := range want {
				if len(rc.byName(name)) == 0 {
					return fmt.Errorf("no span %q exported yet", name)
				}
			}
			return nil
		})
		request, tspan, call := rc.byName(want[0])[0], rc.byName(want[1])[0], rc.byName(want[2])[0]
		for _, s := range []*tracepb.Span{request, tspan, call} {
			if hex.EncodeToString(s.TraceId) != traceID {
				t.Errorf("span %q is in trace %x, want the caller's %s", s.Name, s.TraceId, traceID)
			}
		}
		parents := []struct {
			child  *tracepb.Span
			parent []byte
		}{{request, mustHex(t, parentID)}, {tspan, request.SpanId}, {call, tspan.SpanId}}
		for _, c := range parents {
			if hex.EncodeToString(c.child.ParentSpanId) != hex.EncodeToString(c.parent) {
				t.Errorf("span %q has parent %x, want %x", c.child.Name, c.child.ParentSpanId, c.parent)
			}
		}
		if got := spanAttr(call, "gen_ai.operation.name"); got != "execute_tool" {
			t.Errorf("gen_ai.operation.name = %q", got)
		}
		if got := spanAttr(call, "gen_ai.tool.call.arguments"); got != "" {
			t.Errorf("arguments recorded without --trace-content: %q", got)
		}
		// The tool's traceparent names turnd's client span, a child of the call's.
		toolParent := strings.Split(h.Get("Traceparent"), "-")[2]
		var client *tracepb.Span
		poll(t, settleTimeout, func() error {
			rc.mu.Lock()
			defer rc.mu.Unlock()
			for _, s := range rc.spans {
				if hex.EncodeToString(s.SpanId) == toolParent {
					client = s
					return nil
				}
			}
			return errors.New("the span the tool's traceparent names is not exported yet")
		})
		if client.Kind != tracepb.Span_SPAN_KIND_CLIENT || hex.EncodeToString(client.ParentSpanId) != hex.EncodeToString(call.SpanId) {
			t.Errorf("the tool's parent span is %q (kind %v, parent %x), want a client span under execute_tool", client.Name, client.Kind, client.ParentSpanId)
		}
		rc.mu.Lock()
		service := rc.service
		rc.mu.Unlock()
		if service != "turnd-e2e" {
			t.Errorf("service.name %q, want OTEL_SERVICE_NAME's", service)
		}

		// A malformed traceparent starts a trace of turnd's own; probes
		// make no spans.
		p.must(http.StatusOK, "GET", "/readyz", nil)
		p.must(http.StatusOK, "POST", "/v1/sessions/s/turns", `{"id":"t2","calls":[{"id":"c2","name":"weather","arguments":{}}]}`,
			"Traceparent", "00-not-a-trace-01")
		<-toolHeaders
		poll(t, settleTimeout, func() error {
			if len(rc.byName("turn")) < 2 {
				return errors.New("the second turn's span is not exported yet")
			}
			return nil
		})
		second := rc.byName("turn")[1]
		if hex.EncodeToString(second.TraceId) == traceID {
			t.Errorf("the turn posted with a malformed traceparent is in the first trace")
		}
		for _, r := range rc.byName(want[0]) {
			if hex.EncodeToString(r.TraceId) == hex.EncodeToString(second.TraceId) && len(r.ParentSpanId) != 0 {
				t.Errorf("the request with a malformed traceparent has parent %x, want none", r.ParentSpanId)
			}
		}
		if got := rc.byName("GET /readyz"); len(got) != 0 {
			t.Errorf("/readyz made %d spans", len(got))
		}
	})
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
