package turn

import (
	"strconv"

	"github.com/turnd/turnd/budget"
	"github.com/turnd/turnd/dispatch"
	"github.com/turnd/turnd/tool"
)

// Projection says how a truncated output was projected when that is not
// the session's plain per-output budget: its window, the limit it was
// projected within (the turn budget's share, when that lowered it) and the
// spans of the output it kept. The call's call_answered line carries it
// as "projection"; it is not stored with the result.
type Projection struct {
	Window budget.Window
	Limit  int
	Kept   []budget.Span
}

// turnBudget projects the outputs of one turn's calls: with the session's
// projector, refined by the tool's own projection (tool config
// projection:) and lowered to the call's share of the turn budget
// (budget.Share, in call order). It is used by Account only, on the
// dispatcher's driving goroutine.
type turnBudget struct {
	base  *budget.Projector
	share *budget.Share
	tools map[string]*budget.Projector // by tool name
}

func newTurnBudget(base *budget.Projector, calls int) *turnBudget {
	return &turnBudget{base: base, share: budget.NewShare(base.Config().TurnLimit, calls)}
}

// toolProjector is the session's projector refined by spec's projection.
func (b *turnBudget) toolProjector(spec *tool.Spec) *budget.Projector {
	if spec == nil || spec.Projection.IsZero() {
		return b.base
	}
	if p, ok := b.tools[spec.Name]; ok {
		return p
	}
	p, err := b.base.With(spec.Projection)
	if err != nil {
		p = b.base // the config loader validated it
	}
	if b.tools == nil {
		b.tools = make(map[string]*budget.Projector)
	}
	b.tools[spec.Name] = p
	return p
}

// next returns the projector of the next call's output (call order).
func (b *turnBudget) next(spec *tool.Spec) *budget.Projector {
	p := b.toolProjector(spec)
	if l := b.share.Limit(); l >= 0 {
		p = p.Within(l)
	}
	return p
}

// spend accounts the call's result, whose output next's projector made
// (or which was recorded earlier: a replay or a resumed call).
func (b *turnBudget) spend(res Result, projected bool) {
	mode := b.base.Config().Mode
	switch {
	case projected:
		b.share.Spend(budget.Result{OriginalBytes: res.keptBytes}, mode)
		return
	case res.Output == nil:
		b.share.Spend(budget.Result{}, mode)
		return
	}
	// Recorded before: what it kept is at most its original size.
	b.share.SpendAtMost(res.OriginalBytes, mode)
}

// projectCall projects the outcome of the call at spec into res with the
// turn's budget, and accounts it; see Service.project for the output.
func (r *run) projectCall(spec *tool.Spec, res *Result, o dispatch.Outcome) *Output {
	if r.budget == nil {
		r.budget = newTurnBudget(r.proj, len(r.turn.Calls))
	}
	p := r.budget.next(spec)
	out := r.svc.project(r.key, p, res, o)
	if res.Truncated && p != r.proj && res.Projection == nil {
		res.Projection = &Projection{Window: p.Config().Window, Limit: p.Config().Limit, Kept: res.kept}
	}
	r.budget.spend(*res, true)
	return out
}

// noteProjection records in res what proj's projection pr kept: its
// bytes for the turn budget, and its Projection when the window is errors.
func noteProjection(res *Result, proj *budget.Projector, pr budget.Result) {
	res.keptBytes = pr.OriginalBytes - pr.DroppedBytes
	res.kept = pr.Kept
	if pr.Truncated && pr.Window == budget.WindowErrors {
		res.Projection = &Projection{Window: pr.Window, Limit: proj.Config().Limit, Kept: pr.Kept}
	}
}

// spendRecorded accounts a call whose result was not projected in this
// wave (replayed, resumed, refused or never run).
func (r *run) spendRecorded(res Result) {
	if r.budget == nil {
		r.budget = newTurnBudget(r.proj, len(r.turn.Calls))
	}
	r.budget.spend(res, false)
}

// appendProjection adds p to call_answered data as "projection".
func appendProjection(b []byte, p *Projection) []byte {
	b = append(b, `,"projection":{"kept":[`...)
	for i, s := range p.Kept {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		b = strconv.AppendInt(b, s.Offset, 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, s.Length, 10)
		b = append(b, ']')
	}
	b = append(b, `],"limit":`...)
	b = strconv.AppendInt(b, int64(p.Limit), 10)
	b = append(b, `,"window":`...)
	b = appendJSONString(b, string(p.Window))
	return append(b, '}')
}

// completionProjector projects the delivered output of a call of tool
// name, of a turn of calls calls, which was accounted (pending) before:
// with the tool's projection and, under a turn budget, within the least
// share of any of the turn's calls (budget.Floor), whatever the other
// calls kept.
func (s *Service) completionProjector(sess Session, calls int, name string) *budget.Projector {
	p := projectorFor(s, sess)
	if spec, ok := s.cfg.Tools().Lookup(name); ok {
		if q, err := p.With(spec.Projection); err == nil {
			p = q
		}
	}
	if l := budget.Floor(p.Config().TurnLimit, calls); l >= 0 {
		p = p.Within(l)
	}
	return p
}
