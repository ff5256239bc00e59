package dispatch_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/turnd/turnd/dispatch"
)

// benchHost admits every call to one no-op read tool and accounts nothing,
// so that the benchmark measures the dispatcher alone.
type benchHost struct{ tool dispatch.Tool }

func (h benchHost) Admit(context.Context, dispatch.Call) dispatch.Admission {
	return dispatch.Admission{Verdict: dispatch.Run, Tool: h.tool, Effect: dispatch.EffectRead}
}

func (benchHost) Account(context.Context, dispatch.Accounted) error { return nil }

type noop struct{}

func (noop) Invoke(context.Context, dispatch.Call, *dispatch.Attempt) dispatch.Outcome {
	return dispatch.Outcome{Status: dispatch.StatusOK}
}

// inlineNoop is noop run on the wave's goroutine (dispatch.InlineTool).
type inlineNoop struct{ noop }

func (inlineNoop) Inline() bool { return true }

// BenchmarkWave measures the dispatcher's overhead per call for a 64-call
// wave of no-op reads: admission, goroutine start, reorder buffer and
// accounting; "inline" runs the reads on the wave's goroutine
// (dispatch.InlineTool), the baseline of what the workers cost.
func BenchmarkWave(b *testing.B) {
	for _, bc := range []struct {
		name string
		wave dispatch.Wave
		tool dispatch.Tool
	}{
		{"ordered", dispatch.Wave{}, noop{}},
		{"ordered-inline", dispatch.Wave{}, inlineNoop{}},
		{"ordered-fail-fast", dispatch.Wave{FailurePolicy: dispatch.PolicyFailFast}, noop{}},
		{"concurrent", dispatch.Wave{Mode: dispatch.ModeConcurrent}, noop{}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			const n = 64
			cs := make([]dispatch.Call, n)
			for i := range cs {
				cs[i] = dispatch.Call{ID: "call_" + strconv.Itoa(i), Name: "noop", Arguments: []byte(`{}`)}
			}
			w := bc.wave
			w.Calls = cs
			h := benchHost{tool: bc.tool}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := w.Run(ctx, h); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			perWave := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			b.ReportMetric(perWave/n, "ns/call")
			b.ReportMetric(testing.AllocsPerRun(20, func() { _, _ = w.Run(ctx, h) })/n, "allocs/call")
		})
	}
}
