package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/turnd/turnd/completion"
	"github.com/turnd/turnd/dispatch"
)

// codeInvalidToolConfig marks a deferred tool whose pending defaults do not
// resolve. The loader validates them, so only a hand-built tool gets it.
const codeInvalidToolConfig = "invalid_tool_config"

// deferral is what a deferred HTTP tool settled before its request: the
// call's completion key, the instant the attempt parks at (durations in a
// pending answer count from it, as the announced deadline does) and the
// default deadline it announced.
type deferral struct {
	key      string
	now      time.Time
	deadline time.Time
}

// takeKey takes the call's completion key and resolves the tool's default
// pending options. On failure it returns nil and the call's outcome.
func (t *httpTool) takeKey(ctx context.Context, at *dispatch.Attempt) (*deferral, dispatch.Outcome) {
	key, fail := completionKey(ctx, at)
	if key == "" {
		return nil, fail
	}
	now := t.now()
	r, err := completion.Resolve(now, t.pending, completion.Options{})
	if err != nil {
		return nil, dispatch.Fail(codeInvalidToolConfig, "the tool's pending defaults do not resolve: "+err.Error())
	}
	return &deferral{key: key, now: now, deadline: r.Deadline}, dispatch.Outcome{}
}

// completionKey takes the call's completion key from its attempt. On
// failure it returns "" and the call's outcome: nothing could ever complete
// a call parked without a key, so the tool must not start its work.
func completionKey(ctx context.Context, at *dispatch.Attempt) (string, dispatch.Outcome) {
	if at == nil {
		return "", dispatch.Fail(CodeCompletionKeyUnavailable, "the call runs outside a dispatch attempt, which would issue its completion key")
	}
	key, err := at.CompletionKey(ctx)
	switch {
	case errors.Is(err, dispatch.ErrNoKeyIssuer):
		return "", dispatch.Fail(CodeCompletionKeyUnavailable, "this turn cannot park calls: it issues no completion keys")
	case err != nil:
		// The issuer's error says what failed (a store error, say); a key it
		// never handed out cannot be in it.
		return "", dispatch.Fail(CodeCompletionKeyUnavailable, "could not take a completion key: "+err.Error())
	}
	return key, dispatch.Outcome{}
}

// pendingAnswer settles a JSON {"pending": {...}} answer: the options given
// override the tool's defaults.
func (t *httpTool) pendingAnswer(status int, raw json.RawMessage, d *deferral) dispatch.Outcome {
	if d == nil {
		return dispatch.Fail(dispatch.CodePendingMissingKey, "the tool answered pending but is not configured with deferred: true")
	}
	if status != http.StatusOK && status != http.StatusAccepted {
		return dispatch.Fail(CodeInvalidToolResponse,
			fmt.Sprintf("a pending answer must have status 200 or 202, not %d", status))
	}
	over, msg := decodePending(raw)
	if msg != "" {
		return dispatch.Fail(CodeInvalidToolResponse, msg)
	}
	r, err := completion.Resolve(d.now, t.pending, over)
	if err != nil {
		_, msg := optionsProblem(err)
		return dispatch.Fail(CodeInvalidToolResponse, "the tool's pending options are invalid: "+msg)
	}
	return dispatch.Defer(PendingOf(r))
}

// decodePending reads the options of a pending answer strictly: a field
// turnd does not know is more likely a typo than something to ignore.
func decodePending(raw json.RawMessage) (completion.Options, string) {
	const want = `the tool's "pending" must be an object of pending options (deadline, heartbeat_timeout, on_timeout, on_cancel)`
	var o completion.Options
	if b := bytes.TrimSpace(raw); len(b) == 0 || b[0] != '{' {
		return o, want
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) {
			return o, fmt.Sprintf(`the tool's "pending" options are invalid: %s must be a string`, ute.Field)
		}
		return o, `the tool's "pending" options are invalid: ` + err.Error()
	}
	return o, ""
}

// PendingOf is the dispatch form of resolved options.
func PendingOf(r completion.Resolved) dispatch.Pending {
	return dispatch.Pending{
		Deadline:         r.Deadline,
		HeartbeatTimeout: r.HeartbeatTimeout,
		OnTimeout:        string(r.OnTimeout),
		OnCancel:         string(r.OnCancel),
	}
}
