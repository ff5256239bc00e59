package turn

import (
	"context"
	"encoding/json"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/turnd/turnd/dispatch"
)

// BenchmarkTracedAttempt is the cost of one execute_tool span around an
// attempt of an inline tool (echo), without a store: bare, traced by a
// provider with no exporter, and traced to an in-memory exporter.
func BenchmarkTracedAttempt(b *testing.B) {
	echo := dispatch.ToolFunc(func(_ context.Context, c dispatch.Call, _ *dispatch.Attempt) dispatch.Outcome {
		return dispatch.OK(c.Arguments, true)
	})
	call := dispatch.Call{ID: "c1", Name: "echo", Arguments: json.RawMessage(`{"q":"what is the weather in Lisbon today?"}`)}
	exp := tracetest.NewInMemoryExporter()
	for _, c := range []struct {
		name string
		tp   *sdktrace.TracerProvider
	}{
		{"bare", nil},
		{"traced, no exporter", sdktrace.NewTracerProvider()},
		{"traced, in-memory exporter", sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))},
	} {
		b.Run(c.name, func(b *testing.B) {
			var tool dispatch.Tool = echo
			if c.tp != nil {
				r := &run{svc: &Service{trace: newTracing(Config{TracerProvider: c.tp})}, key: TurnKey{"s", "t"}}
				_, r.span = r.svc.trace.tracer.Start(context.Background(), "turn")
				tool = &tracedTool{inner: echo, r: r, kind: "builtin"}
			}
			ctx := context.Background()
			b.ReportAllocs()
			for i := range b.N {
				if o := tool.Invoke(ctx, call, nil); o.Status != dispatch.StatusOK {
					b.Fatal(o)
				}
				if i%4096 == 0 {
					exp.Reset()
				}
			}
		})
	}
}
