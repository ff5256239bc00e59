package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/turnd/turnd/completion"
	"github.com/turnd/turnd/dispatch"
)

// MaxSleep is the longest the sleep builtin sleeps.
const MaxSleep = 10 * time.Minute

// nowLayout is RFC 3339 with all nine digits of nanoseconds, so that the
// strings have one width and sort as the times do.
const nowLayout = "2006-01-02T15:04:05.000000000Z07:00"

// builtins makes each builtin's spec. They are turnd's own demo tools, off
// unless the config lists them; all are idempotent and tried once, and all
// but approval are read-only.
var builtins = map[string]func(Options) *Spec{
	"echo":     echoSpec,
	"sleep":    sleepSpec,
	"now":      nowSpec,
	"approval": approvalSpec,
}

// BuiltinNames lists the builtin tools, sorted.
func BuiltinNames() []string {
	return slices.Sorted(maps.Keys(builtins))
}

// builtin is a builtin's implementation. A pointer, so that dispatch can
// compare tools (a ToolFunc cannot be compared).
type builtin struct {
	run func(ctx context.Context, call dispatch.Call) dispatch.Outcome
	// inline: the builtin computes its outcome from the call alone, and
	// dispatch may run it on the wave's goroutine (dispatch.InlineTool).
	inline bool
}

func (b *builtin) Invoke(ctx context.Context, call dispatch.Call, _ *dispatch.Attempt) dispatch.Outcome {
	return b.run(ctx, call)
}

// Inline implements dispatch.InlineTool.
func (b *builtin) Inline() bool { return b.inline }

// inlineBuiltins are the builtins that neither wait nor do I/O.
var inlineBuiltins = map[string]bool{"echo": true, "now": true}

func builtinSpec(name, desc, schema string, run func(context.Context, dispatch.Call) dispatch.Outcome) *Spec {
	s := &Spec{
		Name: name, Description: desc, Effect: dispatch.EffectRead, Idempotent: true,
		Retry: noRetry, Impl: &builtin{run: run, inline: inlineBuiltins[name]},
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

// maxLoggedPrompt bounds the bytes of an approval prompt put in the log.
const maxLoggedPrompt = 2000

// approvalSpec is the approval builtin: a write tool that parks its call
// until someone delivers the decision to the call's complete URL. It is
// the whole deferred-completion loop with nothing but turnd and curl:
//
//	turnd logs:  approval requested ... complete_url=http://turnd/v1/complete/ck_...
//	a person:    curl -X POST <complete_url> -d '{"output": {"approved": true}}'
//
// It is idempotent: running it again takes the same key and logs again.
func approvalSpec(opts Options) *Spec {
	opts = opts.withDefaults()
	defaults := completion.Options{
		OnTimeout: completion.OnTimeoutErrorAsResult,
		// There is no external work to cancel, only a person to tell.
		OnCancel: completion.OnCancelIgnore,
	}
	s := &Spec{
		Name: "approval",
		Description: "Asks a person to approve something and waits for the answer, which arrives later as the result of this call. " +
			"Optional: prompt, what to approve; deadline, how long to wait (a Go duration such as \"30m\" or an RFC 3339 time; default 24h).",
		Effect: dispatch.EffectWrite, Idempotent: true, Retry: noRetry,
		Deferred: true, Pending: defaults,
		Impl: &approvalTool{logger: opts.Logger, now: opts.Now, defaults: defaults, logURL: opts.LogCompletionURLs},
	}
	schema := fmt.Sprintf(`{"type":"object","properties":{`+
		`"prompt":{"type":"string","description":"What the person is asked to approve."},`+
		`"deadline":{"type":"string","description":"How long to wait: a Go duration such as \"30m\" (at most %s) or an RFC 3339 time."}},`+
		`"additionalProperties":false}`, completion.MaxDeadline)
	if err := s.CompileSchema(json.RawMessage(schema)); err != nil {
		panic(fmt.Sprintf("tool: builtin approval: %v", err)) // a bug in this file
	}
	return s
}

// approvalTool parks each call and logs where to complete it.
type approvalTool struct {
	logger   *slog.Logger
	now      func() time.Time
	defaults completion.Options // the config's pending: over the builtin's
	logURL   bool               // Options.LogCompletionURLs
}

// Invoke logs "approval requested" and answers pending. With
// Options.LogCompletionURLs (turnd serve --demo) the log line carries the
// call's complete_url, and so its completion key, a bearer credential, and
// so does the parked call's output ({"complete_url": …}, in the turn's
// pending result until the answer replaces it): the one place turnd shows
// a key, on purpose, because it is how the demo's person learns where to
// answer. Without it neither does.
func (a *approvalTool) Invoke(ctx context.Context, call dispatch.Call, at *dispatch.Attempt) dispatch.Outcome {
	var args struct {
		Prompt   string `json:"prompt"`
		Deadline string `json:"deadline"`
	}
	if err := json.Unmarshal(normalizeArguments(call.Arguments), &args); err != nil {
		return dispatch.Fail(dispatch.CodeInvalidArguments, `arguments must be {"prompt": string, "deadline": string}, both optional`)
	}
	// Check the deadline before taking a key: a bad argument parks nothing.
	r, err := completion.Resolve(a.now(), a.defaults, completion.Options{Deadline: args.Deadline})
	if err != nil {
		_, msg := optionsProblem(err)
		return dispatch.Fail(dispatch.CodeInvalidArguments, strings.TrimPrefix(msg, "pending."))
	}
	key, fail := completionKey(ctx, at)
	if key == "" {
		return fail
	}
	cc, _ := CallContextFrom(ctx)
	attrs := []slog.Attr{
		slog.String("session_id", cc.SessionID),
		slog.String("turn_id", cc.TurnID),
		slog.String("call_id", call.ID),
		slog.String("tool", call.Name),
		slog.String("prompt", truncateUTF8(args.Prompt, maxLoggedPrompt)),
		slog.Time("deadline", r.Deadline),
	}
	msg := "approval requested; its completion key is not logged (turnd serve --demo logs the complete_url)"
	parked := dispatch.Defer(PendingOf(r))
	if a.logURL {
		u := cc.completeURL(key)
		msg = "approval requested; complete_url carries the completion key: POST the answer to it"
		attrs = append(attrs, slog.String("complete_url", u))
		parked.Output, _ = json.Marshal(struct {
			CompleteURL string `json:"complete_url"`
		}{u})
		parked.JSON = true
	}
	a.logger.LogAttrs(ctx, slog.LevelInfo, msg, attrs...)
	return parked
}

// truncateUTF8 cuts s to at most n bytes without splitting a rune.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
