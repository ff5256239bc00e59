package tool

import "context"

// Progress is how far a running call has come, as its tool reports it: an
// MCP server's notifications/progress, an HTTP tool's progress line, or a
// deferred call's sender. Progress should grow with every report; Total
// is 0 when unknown; Message is free text for a person.
type Progress struct {
	Progress float64 `json:"progress"`
	Total    float64 `json:"total,omitempty"`
	Message  string  `json:"message,omitempty"`
}

// ProgressReporter receives the progress of a wave's calls. The turn
// service implements it (one per wave, see WithProgress). It is called on
// the tool's goroutines and on the MCP client's, so it must be safe for
// concurrent use, quick, and must not block.
type ProgressReporter interface {
	CallProgress(callID string, p Progress)
}

type progressKey struct{}

// WithProgress returns a context whose calls report their progress to r.
func WithProgress(ctx context.Context, r ProgressReporter) context.Context {
	return context.WithValue(ctx, progressKey{}, r)
}

// progressFrom returns the reporter of ctx's CallContext or, failing
// that, the one WithProgress set; nil without either.
func progressFrom(ctx context.Context) ProgressReporter {
	if cc, ok := CallContextFrom(ctx); ok && cc.Progress != nil {
		return cc.Progress
	}
	r, _ := ctx.Value(progressKey{}).(ProgressReporter)
	return r
}
