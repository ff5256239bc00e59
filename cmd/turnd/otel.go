package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/turnd/turnd/tool"
)

// traceConfig is the tracing configuration: the standard OTEL_* variables
// (read by the SDK itself: endpoint, headers, service name, resource
// attributes, sampler, batching) and turnd's flag for content.
type traceConfig struct {
	// Enabled: an OTLP endpoint is configured (OTEL_EXPORTER_OTLP_ENDPOINT
	// or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, or OTEL_TRACES_EXPORTER=otlp),
	// and neither OTEL_SDK_DISABLED=true nor OTEL_TRACES_EXPORTER=none.
	Enabled bool
	// Content records calls' arguments and results on their spans
	// (--trace-content, TURND_TRACE_CONTENT): they may hold secrets.
	Content bool
}

// traceEnv are the standard OpenTelemetry variables turnd's tracing reads
// (the SDK reads all but the first three itself), for `turnd serve -h`.
var traceEnv = [][2]string{
	{"OTEL_SDK_DISABLED", "true turns tracing off"},
	{"OTEL_TRACES_EXPORTER", "otlp (the default once an endpoint is set) or none"},
	{"OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf, the one turnd speaks (also OTEL_EXPORTER_OTLP_TRACES_PROTOCOL)"},
	{"OTEL_EXPORTER_OTLP_ENDPOINT", "the collector's OTLP/HTTP base URL, e.g. http://collector:4318; set, tracing is on"},
	{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "the full URL for traces instead (…/v1/traces)"},
	{"OTEL_EXPORTER_OTLP_HEADERS", "headers for the collector (k=v,…; also _TRACES_)"},
	{"OTEL_SERVICE_NAME", "the service.name of turnd's spans (default turnd)"},
	{"OTEL_RESOURCE_ATTRIBUTES", "more resource attributes (k=v,…)"},
	{"OTEL_TRACES_SAMPLER", "e.g. parentbased_traceidratio (default parentbased_always_on), with OTEL_TRACES_SAMPLER_ARG"},
	{"OTEL_BSP_SCHEDULE_DELAY", "the batch exporter's delay in ms (default 5000)"},
}

// traceEnvHelp is the part of `turnd serve -h` about traceEnv.
func traceEnvHelp() string {
	var b strings.Builder
	b.WriteString("\nTracing (OpenTelemetry; off unless an OTLP endpoint is set):\n")
	for _, v := range traceEnv {
		fmt.Fprintf(&b, "  %-34s %s\n", v[0], v[1])
	}
	return b.String()
}

// traceFlags adds the flags of tracing.
func traceFlags(fs *flag.FlagSet, env envLookup, c *config, _ *flagText) error {
	return env.boolFlag(fs, &c.Tracing.Content, "trace-content", "TURND_TRACE_CONTENT", false,
		"record tool calls' arguments and results on their execute_tool spans (gen_ai.tool.call.arguments, gen_ai.tool.call.result); they may hold secrets (TURND_TRACE_CONTENT)")
}

// parseTracing reads from env whether traces are exported.
func (c *config) parseTracing(env envLookup) error {
	if disabled, err := env.bool("OTEL_SDK_DISABLED", false); err != nil || disabled {
		return err
	}
	switch exp := strings.TrimSpace(env.get("OTEL_TRACES_EXPORTER", "")); exp {
	case "none":
		return nil
	case "otlp":
		c.Tracing.Enabled = true
	case "":
		c.Tracing.Enabled = env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "") != "" || env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "") != ""
	default:
		return usageError{fmt.Sprintf("OTEL_TRACES_EXPORTER: %q is not supported; use otlp or none", exp)}
	}
	if !c.Tracing.Enabled {
		return nil
	}
	protocol := env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", env.get("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"))
	if protocol != "http/protobuf" {
		return usageError{fmt.Sprintf("OTEL_EXPORTER_OTLP_PROTOCOL: %q is not supported; turnd exports OTLP over HTTP (http/protobuf, port 4318)", protocol)}
	}
	return nil
}

// telemetry is the process's tracing: a tracer provider exporting over
// OTLP, or nothing (every method is then a no-op and nothing is wrapped,
// so tracing off costs the hot path nothing).
type telemetry struct {
	tp   *sdktrace.TracerProvider // nil: off
	prop propagation.TextMapPropagator
}

// newTelemetry builds the tracing c configures; with exporter set (tests)
// it exports there instead of over OTLP.
func newTelemetry(ctx context.Context, c traceConfig, exporter sdktrace.SpanExporter) (*telemetry, error) {
	t := &telemetry{prop: propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})}
	if !c.Enabled && exporter == nil {
		return t, nil
	}
	if exporter == nil {
		// Endpoint, headers, timeout and TLS come from OTEL_EXPORTER_OTLP_*.
		exp, err := otlptracehttp.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("creating the OTLP trace exporter: %w", err)
		}
		exporter = exp
	}
	// Service name and attributes come from OTEL_SERVICE_NAME and
	// OTEL_RESOURCE_ATTRIBUTES; the sampler from OTEL_TRACES_SAMPLER(_ARG).
	// Later detectors win: the environment's name over turnd's default.
	res, err := resource.New(ctx, resource.WithAttributes(attribute.String("service.name", "turnd")),
		resource.WithTelemetrySDK(), resource.WithFromEnv())
	if err != nil {
		return nil, fmt.Errorf("building the trace resource: %w", err)
	}
	t.tp = sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	return t, nil
}

// provider is the tracer provider for the turn service; nil when off.
func (t *telemetry) provider() trace.TracerProvider {
	if t.tp == nil {
		return nil
	}
	return t.tp
}

// handler wraps the API's handler in a server span per request, a child
// of the request's traceparent when it has one.
func (t *telemetry) handler(h http.Handler) http.Handler {
	if t.tp == nil {
		return h
	}
	return otelhttp.NewHandler(h, "turnd", otelhttp.WithTracerProvider(t.tp), otelhttp.WithPropagators(t.prop),
		otelhttp.WithFilter(traced))
}

// traced reports whether a request gets a span: not the probes and
// scrapes (/healthz, /readyz, /metrics), which would bury the turns.
func traced(r *http.Request) bool {
	switch r.URL.Path {
	case "/healthz", "/readyz", "/metrics":
		return false
	}
	return true
}

// toolClient is the HTTP client of HTTP tools and MCP servers: nil (the
// tool package's own) when off; else tool.NewHTTPClient's, whose requests
// make client spans and carry the trace context.
func (t *telemetry) toolClient() *http.Client {
	if t.tp == nil {
		return nil
	}
	c := tool.NewHTTPClient()
	c.Transport = otelhttp.NewTransport(c.Transport, otelhttp.WithTracerProvider(t.tp), otelhttp.WithPropagators(t.prop))
	return c
}

// shutdown flushes the spans still batched and stops the provider.
func (t *telemetry) shutdown(ctx context.Context) error {
	if t.tp == nil {
		return nil
	}
	return t.tp.Shutdown(ctx)
}

// flushTraces shuts tel down at the end of serve, exporting what is left
// (bounded: an unreachable collector does not hold the exit).
func flushTraces(tel *telemetry, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tel.shutdown(ctx); err != nil {
		log.Warn("exporting the last traces failed", "err", err)
	}
}
