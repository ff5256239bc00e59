package loadtest

import "context"

// A measured window is the part of a run that its numbers cover: Loop's
// operations after the warm-up, a pgbench run. Whoever wants to take
// readings at its edges (the CPU time of the processes involved, say) puts
// a window hook in the context of the run, as net/http/httptrace puts its
// hooks in a request's.

type windowKey struct{}

// WithWindow returns a copy of ctx whose runs call open as their measured
// window opens, and the function open returns as it closes. Runs on ctx
// one after another each call it for their own window. A hook already on
// ctx runs inside this one: opened after it, closed before it.
func WithWindow(ctx context.Context, open func() (closed func())) context.Context {
	inner, ok := ctx.Value(windowKey{}).(func() func())
	if !ok || inner == nil {
		return context.WithValue(ctx, windowKey{}, open)
	}
	return context.WithValue(ctx, windowKey{}, func() func() {
		closeOuter, closeInner := open(), inner()
		return func() {
			if closeInner != nil {
				closeInner()
			}
			if closeOuter != nil {
				closeOuter()
			}
		}
	})
}

// OpenWindow calls ctx's window hook (see WithWindow), if any, and returns
// the function to call as the window closes (a no-op without a hook).
func OpenWindow(ctx context.Context) (closed func()) {
	if open, ok := ctx.Value(windowKey{}).(func() func()); ok && open != nil {
		if closed := open(); closed != nil {
			return closed
		}
	}
	return func() {}
}
