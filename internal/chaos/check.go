package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"time"
)

// Recorder remembers every turn an experiment posted and every result
// turnd answered, to hold later reads to them. It is safe for concurrent
// use.
type Recorder struct {
	mu       sync.Mutex
	sessions map[string][]string       // session → turn ids, in the order posted
	acked    map[[2]string]bool        // (session, turn) → a 2xx answered its POST
	answers  map[[3]string]string      // (session, turn, call) → canonical result
	statuses map[string]map[string]int // tool name → call status → count
	errors   map[string]int            // error code → count
	changed  []string
}

// NewRecorder returns an empty recorder.
func NewRecorder() *Recorder {
	return &Recorder{
		sessions: map[string][]string{},
		acked:    map[[2]string]bool{},
		answers:  map[[3]string]string{},
		statuses: map[string]map[string]int{},
		errors:   map[string]int{},
	}
}

// Posted notes a turn about to be posted.
func (r *Recorder) Posted(session, turn string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := [2]string{session, turn}
	if _, ok := r.acked[k]; !ok {
		r.acked[k] = false
		r.sessions[session] = append(r.sessions[session], turn)
	}
}

// Answered notes a turn as turnd answered it (a POST's 2xx or a GET):
// every final result is kept the first time and compared afterwards.
func (r *Recorder) Answered(t Turn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.acked[[2]string{t.SessionID, t.ID}] = true
	if t.Status == "running" {
		return // results may still be in flight
	}
	for _, raw := range t.Results {
		var res Result
		if json.Unmarshal(raw, &res) != nil || !answered(res.Status) {
			continue
		}
		k := [3]string{t.SessionID, t.ID, res.CallID}
		canon := canonical(raw)
		prev, seen := r.answers[k]
		if !seen {
			r.answers[k] = canon
			if r.statuses[res.Name] == nil {
				r.statuses[res.Name] = map[string]int{}
			}
			r.statuses[res.Name][res.Status]++
			if res.Error != nil {
				r.errors[res.Error.Code]++
			}
			continue
		}
		if prev != canon {
			r.changed = append(r.changed, fmt.Sprintf("%s/%s/%s: first %s, then %s", t.SessionID, t.ID, res.CallID, prev, canon))
		}
	}
}

// canonical re-encodes a JSON value with sorted keys.
func canonical(raw json.RawMessage) string {
	var v any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if d.Decode(&v) != nil {
		return string(raw)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

// Statuses returns, per tool, how many calls ended in each status.
func (r *Recorder) Statuses() map[string]map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := map[string]map[string]int{}
	for tool, s := range r.statuses {
		m[tool] = map[string]int{}
		for k, v := range s {
			m[tool][k] = v
		}
	}
	return m
}

// ErrorCodes returns how many answered calls carried each error code.
func (r *Recorder) ErrorCodes() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := map[string]int{}
	for k, v := range r.errors {
		m[k] = v
	}
	return m
}

// Turns returns how many turns were posted and how many a 2xx answered.
func (r *Recorder) Turns() (posted, acked int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ok := range r.acked {
		posted++
		if ok {
			acked++
		}
	}
	return posted, acked
}

// CheckOptions says what an experiment leaves on purpose.
type CheckOptions struct {
	// Waiting allows turns still waiting on calls the experiment never
	// delivers.
	Waiting bool
	// SettleWithin bounds how long turns may take to settle before the
	// check reads them.
	SettleWithin time.Duration
}

// Report is what Check found.
type Report struct {
	Sessions, Turns, Settled, Waiting int
	Lines                             int
	Writes                            int // write and poison calls executed
	Violations                        []string
}

func (rep *Report) violate(format string, args ...any) {
	if len(rep.Violations) < 200 {
		rep.Violations = append(rep.Violations, fmt.Sprintf(format, args...))
	}
}

// Check waits (bounded) for every turn the recorder saw to settle, then
// reads every turn and every ledger from base and checks the invariants:
// every turn settled (or waiting, when allowed); every answered result the
// same on the re-read as first answered; each ledger's seqs 1..N with no
// gap, exactly one turn_settled per settled turn (none for others) and at
// most one call_answered per call; no write or poison call executed twice
// (the tool server's counts).
func Check(ctx context.Context, c *Client, base string, rec *Recorder, ts *ToolServer, opt CheckOptions) Report {
	if opt.SettleWithin == 0 {
		opt.SettleWithin = 60 * time.Second
	}
	var rep Report
	rec.mu.Lock()
	sessions := make(map[string][]string, len(rec.sessions))
	for s, turns := range rec.sessions {
		sessions[s] = append([]string(nil), turns...)
	}
	acked := make(map[[2]string]bool, len(rec.acked))
	for k, v := range rec.acked {
		acked[k] = v
	}
	rec.mu.Unlock()
	names := make([]string, 0, len(sessions))
	for s := range sessions {
		names = append(names, s)
	}
	sort.Strings(names)

	deadline := time.Now().Add(opt.SettleWithin)
	for _, s := range names {
		rep.Sessions++
		status := map[string]string{}
		for _, id := range sessions[s] {
			t, err := settle(ctx, c, base, s, id, opt.Waiting, deadline)
			if err != nil {
				var gone bool
				if a, ok := err.(notFound); ok && a.status == http.StatusNotFound {
					gone = true
				}
				if gone && !acked[[2]string{s, id}] {
					continue // never acknowledged: the crash took the POST
				}
				rep.violate("turn %s/%s: %v", s, id, err)
				continue
			}
			rep.Turns++
			status[id] = t.Status
			switch {
			case Settled(t.Status):
				rep.Settled++
			case t.Status == "waiting" && opt.Waiting:
				rep.Waiting++
			default:
				rep.violate("turn %s/%s is %s after %v", s, id, t.Status, opt.SettleWithin)
			}
			rec.Answered(t) // compares every answered result with its first answer
		}
		lines, err := c.Ledger(ctx, base, s)
		if err != nil {
			rep.violate("ledger of %s: %v", s, err)
			continue
		}
		rep.Lines += len(lines)
		settledLines := map[string]int{}
		answeredLines := map[[2]string]int{}
		for i, l := range lines {
			if l.Seq != int64(i+1) {
				rep.violate("ledger of %s: line %d has seq %d (a gap or a repeat)", s, i+1, l.Seq)
				break
			}
			switch l.Kind {
			case "turn_settled":
				settledLines[l.TurnID]++
			case "call_answered":
				if l.CallID != nil {
					answeredLines[[2]string{l.TurnID, *l.CallID}]++
				}
			}
		}
		for id, st := range status {
			want := 0
			if Settled(st) {
				want = 1
			}
			if settledLines[id] != want {
				rep.violate("ledger of %s: turn %s (%s) has %d turn_settled lines, want %d", s, id, st, settledLines[id], want)
			}
		}
		for k, n := range answeredLines {
			if n > 1 {
				rep.violate("ledger of %s: call %s/%s answered %d times", s, k[0], k[1], n)
			}
		}
	}
	rec.mu.Lock()
	for _, ch := range rec.changed {
		rep.violate("result changed on a re-read: %s", ch)
	}
	rec.changed = nil
	rec.mu.Unlock()
	twice, writes := ts.Twice()
	rep.Writes = writes
	for _, k := range twice {
		rep.violate("write executed more than once: %s", k)
	}
	return rep
}

type notFound struct{ status int }

func (e notFound) Error() string { return fmt.Sprintf("status %d", e.status) }

// settle reads a turn until it is settled (or waiting, when allowed) or
// the deadline passes, holding each read with Prefer: wait.
func settle(ctx context.Context, c *Client, base, session, id string, waiting bool, deadline time.Time) (Turn, error) {
	for {
		t, a, err := c.GetTurn(ctx, base, session, id, "Prefer", "wait=5")
		if err != nil && a.Status == http.StatusNotFound {
			return Turn{}, notFound{a.Status}
		}
		if err == nil && (Settled(t.Status) || (waiting && t.Status == "waiting")) {
			return t, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			if err != nil {
				return Turn{}, err
			}
			return t, nil
		}
		if err != nil {
			time.Sleep(100 * time.Millisecond)
		}
	}
}
