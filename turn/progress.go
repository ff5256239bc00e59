package turn

import (
	"context"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/turnd/turnd/tool"
)

// ProgressInterval is the least time between two wakes of a call's
// watchers for its progress: a tool may report as often as it likes, the
// event stream shows at most a few values a second, and always the last.
const ProgressInterval = 250 * time.Millisecond

// progressIdle is how long a turn's progress is kept after its last
// report when nothing else drops it (a parked call whose turn settled on
// another replica, say).
const progressIdle = 10 * time.Minute

// MaxProgressMessage caps a progress message, in bytes.
const MaxProgressMessage = 512

// CallProgress is the latest progress of a running call. It lives in the
// memory of the process the progress reached, never in the ledger: a turn's
// record is the same whether or not its tools reported any.
type CallProgress struct {
	CallID   string
	Progress float64
	Total    float64 // 0: unknown
	Message  string
	At       time.Time
	// Seq grows with every report this service takes: a watcher shows a
	// call's progress again only when its Seq is past the one it showed.
	Seq uint64
}

// progressBoard holds the latest progress of the calls of turns here.
type progressBoard struct {
	mu    sync.Mutex
	seq   uint64
	turns map[TurnKey]*turnProgress
}

type turnProgress struct {
	calls   map[string]*callProgress
	updated time.Time
}

type callProgress struct {
	CallProgress
	woke  time.Time   // when its watchers were last woken for it
	timer *time.Timer // a wake pending for a report that came too soon
}

// CallProgress implements tool.ProgressReporter for the wave's calls.
func (r *run) CallProgress(callID string, p tool.Progress) {
	if _, ok := r.index[callID]; ok {
		r.svc.reportProgress(r.key, callID, p)
	}
}

// reportProgress keeps p as the latest progress of call callID of turn k
// and wakes k's watchers, at most once per ProgressInterval per call: a
// report that comes sooner wakes them once that interval has passed.
func (s *Service) reportProgress(k TurnKey, callID string, p tool.Progress) {
	b := &s.progress
	now := time.Now()
	b.mu.Lock()
	if b.turns == nil {
		b.turns = make(map[TurnKey]*turnProgress)
	}
	if len(b.turns) >= 1024 {
		b.sweepLocked(now)
	}
	tp := b.turns[k]
	if tp == nil {
		tp = &turnProgress{calls: make(map[string]*callProgress)}
		b.turns[k] = tp
	}
	tp.updated = now
	cp := tp.calls[callID]
	if cp == nil {
		cp = &callProgress{}
		tp.calls[callID] = cp
	}
	b.seq++
	cp.CallProgress = CallProgress{CallID: callID, Progress: p.Progress, Total: p.Total, Message: p.Message, At: s.now().UTC(), Seq: b.seq}
	wake := false
	switch since := now.Sub(cp.woke); {
	case since >= ProgressInterval:
		cp.woke, wake = now, true
	case cp.timer == nil:
		cp.timer = time.AfterFunc(ProgressInterval-since, func() {
			b.mu.Lock()
			cp.timer, cp.woke = nil, time.Now()
			b.mu.Unlock()
			s.note(k, false)
		})
	}
	b.mu.Unlock()
	if wake {
		s.note(k, false) // the watchers here; progress is not published
	}
}

// sweepLocked drops the progress of turns idle for progressIdle.
func (b *progressBoard) sweepLocked(now time.Time) {
	for k, tp := range b.turns {
		if now.Sub(tp.updated) >= progressIdle {
			b.dropLocked(k, "")
		}
	}
}

// drop forgets the progress of turn k's call callID, or of all its calls
// when callID is "".
func (b *progressBoard) drop(k TurnKey, callID string) {
	b.mu.Lock()
	b.dropLocked(k, callID)
	b.mu.Unlock()
}

func (b *progressBoard) dropLocked(k TurnKey, callID string) {
	tp := b.turns[k]
	if tp == nil {
		return
	}
	for id, cp := range tp.calls {
		if callID == "" || id == callID {
			if cp.timer != nil {
				cp.timer.Stop()
			}
			delete(tp.calls, id)
		}
	}
	if len(tp.calls) == 0 {
		delete(b.turns, k)
	}
}

// Progress returns the latest progress of the calls of turn k that
// reported any to this process and are still running, by call id. Watch
// wakes on a new value (at most every ProgressInterval per call).
func (s *Service) Progress(k TurnKey) []CallProgress {
	b := &s.progress
	b.mu.Lock()
	defer b.mu.Unlock()
	tp := b.turns[k]
	if tp == nil {
		return nil
	}
	out := make([]CallProgress, 0, len(tp.calls))
	for _, cp := range tp.calls {
		out = append(out, cp.CallProgress)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CallID < out[j].CallID })
	return out
}

// ReportProgress takes the progress of the deferred call of completion key
// rawKey from its sender, while the call runs or is parked, and returns
// the key's state. It fails with ErrNotFound for an unknown key,
// ErrCompletionGone (with the state) once the call has its result or
// timed out or was cancelled, and ErrInvalid for a progress whose numbers
// are negative or not finite or whose message is too long.
func (s *Service) ReportProgress(ctx context.Context, rawKey string, p tool.Progress) (CompletionInfo, error) {
	if bad := func(f float64) bool { return math.IsNaN(f) || math.IsInf(f, 0) || f < 0 }; bad(p.Progress) || bad(p.Total) {
		return CompletionInfo{}, invalid("progress", "progress and total must be finite numbers, not negative")
	}
	if len(p.Message) > MaxProgressMessage {
		return CompletionInfo{}, invalid("message", "at most %d bytes", MaxProgressMessage)
	}
	if err := checkText("message", p.Message); err != nil {
		return CompletionInfo{}, err
	}
	c, err := s.lookupKey(ctx, rawKey)
	if err != nil {
		return CompletionInfo{}, err
	}
	switch c.Status {
	case CompletionIssued, CompletionPending:
	default:
		return infoOf(c), ErrCompletionGone
	}
	s.reportProgress(TurnKey{c.SessionID, c.TurnID}, c.CallID, p)
	return infoOf(c), nil
}

// waveEnded is deferred by the wave's run: it ends the turn's span and,
// once the turn is settled, forgets its calls' progress.
func (r *run) waveEnded() {
	r.endTurnSpan()
	if r.final.Status.Settled() {
		r.svc.progress.drop(r.key, "")
	}
}

// delivering is deferred by Complete for a delivery to completion c: it
// traces the delivery (traceDelivery) and, once the call has its result,
// forgets its progress.
func (s *Service) delivering(ctx context.Context, c Completion) func(*DeliveryResult, *error) {
	end := s.traceDelivery(ctx, c)
	return func(res *DeliveryResult, err *error) {
		end(res, err)
		if *err == nil {
			s.progress.drop(TurnKey{c.SessionID, c.TurnID}, c.CallID)
		}
	}
}
