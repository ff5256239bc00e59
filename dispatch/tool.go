package dispatch

import (
	"context"
	"fmt"
	"sync"
)

// Tool executes calls. Invoke runs one attempt; it must honour ctx, which is
// cancelled when the wave is cancelled or aborted, when a fail_fast wave is
// tainted by an earlier call, and when a speculative run is discarded. An
// error returned after ctx was cancelled is accounted as cancelled; an OK or
// pending outcome is kept, since what it did happened.
type Tool interface {
	Invoke(ctx context.Context, call Call, at *Attempt) Outcome
}

// InlineTool is implemented by a Tool whose calls compute their outcome
// from the call alone, without I/O or waiting; a read of one whose Inline
// reports true may run on the wave's goroutine (see Inline), so it must
// not block, take long or end its goroutine. See ARCHITECTURE.md, "The
// inline rule".
type InlineTool interface {
	Tool
	Inline() bool
}

// Inline reports whether a call admitted to run tool with effect and
// policy may run on the wave's goroutine (see InlineTool): a read of an
// inline tool, tried at most once. Dispatch runs it so unless it must be
// able to cancel the run alone (a fail_fast wave, a speculative run).
func Inline(tool Tool, effect Effect, policy RetryPolicy) bool {
	if effect != EffectRead || policy.attempts() > 1 {
		return false
	}
	t, ok := tool.(InlineTool)
	return ok && t.Inline()
}

// runsInline reports whether r runs on the wave's goroutine.
func runsInline(r *run) bool {
	return !r.own && r.prev == nil && (r.gated == nil || len(r.gated.gates) == 0) && Inline(r.tool, r.effect, r.policy)
}

// ToolFunc adapts a function to Tool.
type ToolFunc func(ctx context.Context, call Call, at *Attempt) Outcome

// Invoke calls f.
func (f ToolFunc) Invoke(ctx context.Context, call Call, at *Attempt) Outcome {
	return f(ctx, call, at)
}

// KeyIssuer issues the completion key through which a deferred result is
// completed later. The caller of Wave.Run supplies it.
type KeyIssuer interface {
	IssueKey(ctx context.Context, call Call) (string, error)
}

// Attempt is the attempt context handed to a tool. It is safe for use by
// several goroutines.
type Attempt struct {
	number int
	call   *Call
	keys   KeyIssuer
	cache  *keyCache
}

// keyCache holds the completion key of one call, shared by all attempts of
// the call so that retries keep the key the first attempt took.
type keyCache struct {
	mu    sync.Mutex
	key   string
	taken bool
}

// Number is the attempt number, starting at 1.
func (a *Attempt) Number() int { return a.number }

// CompletionKey returns the call's completion key, asking the wave's
// KeyIssuer only the first time for the call; later requests, in this or a
// later attempt of the call, return the same key. It fails with
// ErrNoKeyIssuer when the wave has no KeyIssuer.
func (a *Attempt) CompletionKey(ctx context.Context) (string, error) {
	a.cache.mu.Lock()
	defer a.cache.mu.Unlock()
	if a.cache.taken {
		return a.cache.key, nil
	}
	if a.keys == nil {
		return "", ErrNoKeyIssuer
	}
	key, err := a.keys.IssueKey(ctx, *a.call)
	if err != nil {
		return "", fmt.Errorf("dispatch: issuing completion key for call %s: %w", a.call.ID, err)
	}
	if key == "" {
		return "", ErrEmptyKey
	}
	a.cache.key, a.cache.taken = key, true
	return key, nil
}

// KeyTaken reports whether the call took a completion key.
func (a *Attempt) KeyTaken() bool {
	a.cache.mu.Lock()
	defer a.cache.mu.Unlock()
	return a.cache.taken
}

// sameTool reports whether a speculative tool is the admitted one.
func sameTool(a, b Tool) (same bool) {
	if a == nil || b == nil {
		return false
	}
	ia, okA := a.(IdentifiedTool)
	ib, okB := b.(IdentifiedTool)
	if okA && okB {
		return ia.ToolID() == ib.ToolID()
	}
	// Comparing interfaces panics when the dynamic type is not comparable
	// (funcs, or structs holding them); such tools are simply not the same.
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return a == b
}
