package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/turnd/turnd/dispatch"
)

// MaxSleep is the longest the sleep builtin sleeps.
const MaxSleep = 10 * time.Minute

// nowLayout is RFC 3339 with all nine digits of nanoseconds, so that the
// strings have one width and sort as the times do.
const nowLayout = "2006-01-02T15:04:05.000000000Z07:00"

// builtins makes each builtin's spec. They are turnd's own demo tools, off
// unless the config lists them; all are read-only and idempotent, and are
// tried once.
var builtins = map[string]func(Options) *Spec{
	"echo":  echoSpec,
	"sleep": sleepSpec,
	"now":   nowSpec,
}

// BuiltinNames lists the builtin tools, sorted.
func BuiltinNames() []string {
	return slices.Sorted(maps.Keys(builtins))
}

// builtin is a builtin's implementation. A pointer, so that dispatch can
// compare tools (a ToolFunc cannot be compared).
type builtin struct {
	run func(ctx context.Context, call dispatch.Call) dispatch.Outcome
}

func (b *builtin) Invoke(ctx context.Context, call dispatch.Call, _ *dispatch.Attempt) dispatch.Outcome {
	return b.run(ctx, call)
}

func builtinSpec(name, desc, schema string, run func(context.Context, dispatch.Call) dispatch.Outcome) *Spec {
	s := &Spec{
		Name: name, Description: desc, Effect: dispatch.EffectRead, Idempotent: true,
		Retry: noRetry, Impl: &builtin{run: run},
	}
	if err := s.CompileSchema(json.RawMessage(schema)); err != nil {
		panic(fmt.Sprintf("tool: builtin %s: %v", name, err)) // a bug in this file
	}
	return s
}

func echoSpec(Options) *Spec {
	return builtinSpec("echo",
		"Returns its arguments unchanged, as JSON. A demo tool for trying out turnd.",
		`{"type":"object","description":"Any JSON object; it is returned as is."}`,
		func(_ context.Context, call dispatch.Call) dispatch.Outcome {
			var out bytes.Buffer
			if err := json.Compact(&out, normalizeArguments(call.Arguments)); err != nil {
				return dispatch.Fail(dispatch.CodeInvalidArguments, "arguments are not valid JSON")
			}
			return dispatch.OK(out.Bytes(), true)
		})
}

func sleepSpec(Options) *Spec {
	schema := fmt.Sprintf(`{"type":"object","properties":{"ms":{"type":"integer","minimum":0,"maximum":%d,`+
		`"description":"How long to sleep, in milliseconds."}},"required":["ms"],"additionalProperties":false}`,
		MaxSleep.Milliseconds())
	return builtinSpec("sleep",
		fmt.Sprintf("Waits the given number of milliseconds (at most %d), then returns {\"slept_ms\": n}. A demo tool for trying out turnd's concurrency and cancellation.", MaxSleep.Milliseconds()),
		schema,
		func(ctx context.Context, call dispatch.Call) dispatch.Outcome {
			var args struct {
				Ms *float64 `json:"ms"`
			}
			if err := json.Unmarshal(normalizeArguments(call.Arguments), &args); err != nil || args.Ms == nil {
				return dispatch.Fail(dispatch.CodeInvalidArguments, `arguments must be {"ms": integer}`)
			}
			ms := *args.Ms
			if ms != math.Trunc(ms) || ms < 0 || ms > float64(MaxSleep.Milliseconds()) {
				return dispatch.Fail(dispatch.CodeInvalidArguments,
					fmt.Sprintf("ms must be an integer from 0 to %d", MaxSleep.Milliseconds()))
			}
			d := time.Duration(ms) * time.Millisecond
			timer := time.NewTimer(d)
			defer timer.Stop()
			select {
			case <-timer.C:
			case <-ctx.Done():
				return dispatch.Cancelled("the sleep was cancelled: " + context.Cause(ctx).Error())
			}
			return dispatch.OK(fmt.Appendf(nil, `{"slept_ms":%d}`, int64(ms)), true)
		})
}

func nowSpec(opts Options) *Spec {
	clock := opts.withDefaults().Now
	return builtinSpec("now",
		"Returns the current UTC time in RFC 3339 with nanoseconds, as {\"now\": \"2006-01-02T15:04:05.000000000Z\"}.",
		`{"type":"object","properties":{},"additionalProperties":false}`,
		func(context.Context, dispatch.Call) dispatch.Outcome {
			out, _ := json.Marshal(struct {
				Now string `json:"now"`
			}{clock().UTC().Format(nowLayout)})
			return dispatch.OK(out, true)
		})
}
