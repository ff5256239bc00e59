package tool

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/turnd/turnd/dispatch"
)

func builtinRegistry(t *testing.T, now time.Time) *Registry {
	t.Helper()
	reg, err := Parse([]byte("builtin: [echo, sleep, now]"), Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

func run(ctx context.Context, s *Spec, args string) dispatch.Outcome {
	return s.Impl.Invoke(ctx, dispatch.Call{ID: "c", Name: s.Name, Arguments: json.RawMessage(args)}, nil)
}

func TestBuiltinSpecs(t *testing.T) {
	t.Parallel()
	if got, want := BuiltinNames(), []string{"approval", "echo", "now", "sleep"}; !reflect.DeepEqual(got, want) {
		t.Errorf("BuiltinNames() = %v, want %v", got, want)
	}
	reg, err := Parse([]byte("builtin: [approval, echo, sleep, now]"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range reg.List() {
		// approval alone writes (it asks a person) and defers.
		wantEffect, deferred := dispatch.EffectRead, false
		if s.Name == "approval" {
			wantEffect, deferred = dispatch.EffectWrite, true
		}
		if s.Description == "" || len(s.InputSchema) == 0 || s.Effect != wantEffect || !s.Idempotent || s.Retry.MaxAttempts != 1 || s.Deferred != deferred {
			t.Errorf("builtin %s = %+v", s.Name, s)
		}
		if !json.Valid(s.InputSchema) {
			t.Errorf("builtin %s schema %s", s.Name, s.InputSchema)
		}
		// echo and now neither wait nor do I/O: dispatch may run them on
		// the wave's goroutine. sleep waits; approval parks.
		it, ok := s.Impl.(dispatch.InlineTool)
		if inline, want := ok && it.Inline(), s.Name == "echo" || s.Name == "now"; inline != want {
			t.Errorf("builtin %s inline %v, want %v", s.Name, inline, want)
		}
	}
}

func TestEcho(t *testing.T) {
	t.Parallel()
	echo := lookup(t, builtinRegistry(t, time.Time{}), "echo")
	tests := []struct{ args, want string }{
		{`{"a": [1, {"b": null}], "s": "x y"}`, `{"a":[1,{"b":null}],"s":"x y"}`},
		{`null`, `{}`},
		{``, `{}`},
	}
	for _, tt := range tests {
		if err := echo.Validate(json.RawMessage(tt.args)); err != nil {
			t.Errorf("Validate(%s) = %v", tt.args, err)
		}
		out := run(t.Context(), echo, tt.args)
		if out.Status != dispatch.StatusOK || !out.JSON || string(out.Output) != tt.want {
			t.Errorf("echo(%s) = %+v (%s), want %s", tt.args, out, out.Output, tt.want)
		}
	}
	if out := run(t.Context(), echo, `{`); out.Status != dispatch.StatusError || out.Err.Code != dispatch.CodeInvalidArguments {
		t.Errorf("echo({) = %+v", out)
	}
}

func TestSleep(t *testing.T) {
	t.Parallel()
	sleep := lookup(t, builtinRegistry(t, time.Time{}), "sleep")

	for _, args := range []string{`{"ms": 0}`, `{"ms": 600000}`, `{"ms": 5.0}`} {
		if err := sleep.Validate(json.RawMessage(args)); err != nil {
			t.Errorf("Validate(%s) = %v", args, err)
		}
	}
	for args, want := range map[string]string{
		`{}`:                    "missing property 'ms'",
		`{"ms": -1}`:            "at /ms: minimum: got -1, want 0",
		`{"ms": 600001}`:        "at /ms: maximum: got 600,001, want 600,000",
		`{"ms": 1.5}`:           "at /ms: got number, want integer",
		`{"ms": "1"}`:           "at /ms: got string, want integer",
		`{"ms": 1, "extra": 1}`: "additional properties 'extra' not allowed",
	} {
		if err := sleep.Validate(json.RawMessage(args)); err == nil || err.Error() != want {
			t.Errorf("Validate(%s) = %v, want %q", args, err, want)
		}
	}

	// The tool checks its arguments itself too: dispatch does not validate.
	for _, args := range []string{`{}`, `{"ms": -1}`, `{"ms": 1.5}`, `{"ms": 600001}`, `[`} {
		if out := run(t.Context(), sleep, args); out.Status != dispatch.StatusError || out.Err.Code != dispatch.CodeInvalidArguments {
			t.Errorf("sleep(%s) = %+v", args, out)
		}
	}

	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		out := run(t.Context(), sleep, `{"ms": 600000}`)
		if out.Status != dispatch.StatusOK || string(out.Output) != `{"slept_ms":600000}` {
			t.Errorf("sleep = %+v (%s)", out, out.Output)
		}
		if d := time.Since(start); d != 10*time.Minute {
			t.Errorf("slept %v, want 10m", d)
		}
	})

	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan dispatch.Outcome)
		start := time.Now()
		go func() { done <- run(ctx, sleep, `{"ms": 60000}`) }()
		synctest.Wait() // the sleeper is blocked on its timer
		cancel()
		out := <-done
		if out.Status != dispatch.StatusCancelled || out.Err.Code != dispatch.CodeCancelled {
			t.Errorf("cancelled sleep = %+v", out)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("cancelled sleep took %v of fake time, want 0", d)
		}
	})
}

func TestNow(t *testing.T) {
	t.Parallel()
	at := time.Date(2025, 3, 4, 5, 6, 7, 80, time.FixedZone("X", 3600))
	now := lookup(t, builtinRegistry(t, at), "now")
	out := run(t.Context(), now, `{}`)
	if out.Status != dispatch.StatusOK || !out.JSON || string(out.Output) != `{"now":"2025-03-04T04:06:07.000000080Z"}` {
		t.Errorf("now = %+v (%s)", out, out.Output)
	}
	if err := now.Validate(json.RawMessage(`{"tz": "UTC"}`)); err == nil || !strings.Contains(err.Error(), "additional properties") {
		t.Errorf("Validate({tz}) = %v", err)
	}

	// Without a clock in Options, now is the real time.
	reg, err := Parse([]byte("builtin: [now]"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got struct{ Now string }
	if err := json.Unmarshal(run(t.Context(), lookup(t, reg, "now"), ``).Output, &got); err != nil {
		t.Fatal(err)
	}
	if ts, err := time.Parse(time.RFC3339Nano, got.Now); err != nil || time.Since(ts) > time.Hour || ts.Location() != time.UTC {
		t.Errorf("now = %q (%v)", got.Now, err)
	}
}
