package dispatch

import (
	"context"
	"fmt"
)

// InvokeEarly runs the first attempt of call on tool outside any wave, on
// the calling goroutine, for a read started while the model is still
// generating, before its turn exists. A panic is answered as dispatch
// answers one in a wave (CodeToolPanic); a tool that ends its goroutine
// (runtime.Goexit) ends the caller's, whose deferred calls must then
// answer for it. The attempt has no KeyIssuer: a tool that asks for a
// completion key gets ErrNoKeyIssuer, so only tools that never defer may
// be started this way. The outcome is the attempt's raw one; the wave that
// later adopts it settles it as its own first attempt (retries,
// cancellation, normalisation).
func InvokeEarly(ctx context.Context, tool Tool, call Call) (out Outcome) {
	at := &Attempt{number: 1, call: &call, cache: &keyCache{}}
	defer func() {
		if v := recover(); v != nil {
			out = Fail(CodeToolPanic, fmt.Sprintf("tool %s panicked: %v", call.Name, v))
		}
	}()
	return tool.Invoke(ctx, call, at)
}
