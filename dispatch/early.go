package dispatch

import (
	"context"
	"fmt"
	"runtime"
)

// InvokeEarly runs the first attempt of call on tool outside any wave, for
// a read started while the model is still generating, before its turn
// exists. A panic, or the tool ending its goroutine, is answered as
// dispatch answers them in a wave (CodeToolPanic). The attempt has no
// KeyIssuer: a tool that asks for a completion key gets ErrNoKeyIssuer, so
// only tools that never defer may be started this way. The outcome is the
// attempt's raw one; the wave that later adopts it settles it as its own
// first attempt (retries, cancellation, normalisation).
func InvokeEarly(ctx context.Context, tool Tool, call Call) (out Outcome) {
	at := &Attempt{number: 1, call: &call, cache: &keyCache{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		exited := true
		defer func() {
			if v := recover(); v != nil {
				out = Fail(CodeToolPanic, fmt.Sprintf("tool %s panicked: %v", call.Name, v))
				return
			}
			if exited {
				out = Fail(CodeToolPanic, fmt.Sprintf("tool %s exited its goroutine without an outcome", call.Name))
			}
		}()
		out = tool.Invoke(ctx, call, at)
		exited = false
	}()
	<-done
	runtime.KeepAlive(at)
	return out
}
