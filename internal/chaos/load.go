package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Load posts turns of reads and writes from concurrent workers, one
// session each, until its context ends or each worker posted Turns turns.
// A POST that fails (a connection refused or cut by a crash, a 5xx while
// the database is away) is posted again, the same turn, until it is
// answered: turnd must replay it or run it, never run a write twice. Every
// answer goes to the Recorder.
type Load struct {
	Client  *Client
	Bases   []string // the turnd URLs; worker w posts to Bases[w%len]
	Rec     *Recorder
	Prefix  string // of the session ids
	Workers int
	Turns   int           // per worker; 0: until the context ends
	MaxMS   int           // tool latency, uniform in [0, MaxMS]
	Retry   time.Duration // the pause before posting a failed turn again

	posts, retries, replays atomic.Int64
	mu                      sync.Mutex
	fails                   map[string]int // why a POST was retried → count
	unexpected              []string
}

// LoadStats is what a Load did.
type LoadStats struct {
	Posts, Retries, Replays int64
	Fails                   map[string]int // retried POSTs by cause
	Unexpected              []string       // answers no retry explains (4xx)
}

// Run runs the load until ctx ends (a turn in flight then is left to the
// checker) and returns its figures.
func (l *Load) Run(ctx context.Context) LoadStats {
	l.fails = map[string]int{}
	if l.Retry == 0 {
		l.Retry = 100 * time.Millisecond
	}
	var wg sync.WaitGroup
	for w := 0; w < l.Workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.worker(ctx, w)
		}()
	}
	wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return LoadStats{l.posts.Load(), l.retries.Load(), l.replays.Load(), l.fails, l.unexpected}
}

// turnBody is a turn of two reads then two writes (reads run at once,
// writes one at a time), with call ids unique in the session.
func turnBody(id string, maxMS int, rng *rand.Rand) []byte {
	ms := func() int {
		if maxMS <= 0 {
			return 0
		}
		return rng.IntN(maxMS + 1)
	}
	var calls []string
	for i, name := range []string{ToolRead, ToolRead, ToolWrite, ToolWrite} {
		calls = append(calls, fmt.Sprintf(`{"id":"%s-c%d","name":%q,"arguments":{"ms":%d}}`, id, i, name, ms()))
	}
	return []byte(fmt.Sprintf(`{"id":%q,"calls":[%s]}`, id, strings.Join(calls, ",")))
}

func (l *Load) worker(ctx context.Context, w int) {
	rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
	session := fmt.Sprintf("%s-%d", l.Prefix, w)
	base := l.Bases[w%len(l.Bases)]
	for i := 0; l.Turns == 0 || i < l.Turns; i++ {
		if ctx.Err() != nil {
			return
		}
		id := fmt.Sprintf("t%d", i)
		body := turnBody(id, l.MaxMS, rng)
		l.Rec.Posted(session, id)
		for attempt := 0; ; attempt++ {
			if ctx.Err() != nil {
				return
			}
			if attempt > 0 {
				l.retries.Add(1)
				select {
				case <-ctx.Done():
					return
				case <-time.After(l.Retry):
				}
			}
			l.posts.Add(1)
			a, err := l.Client.Do(ctx, http.MethodPost, base+"/v1/sessions/"+session+"/turns", body)
			if err != nil {
				if ctx.Err() == nil {
					l.fail("connection")
				}
				continue
			}
			if a.Status >= 500 {
				l.fail(fmt.Sprintf("%d", a.Status))
				continue
			}
			if a.Status != http.StatusOK && a.Status != http.StatusAccepted {
				l.odd(fmt.Sprintf("POST %s/%s: status %d: %s", session, id, a.Status, clip(a.Body)))
				break
			}
			if a.Header.Get("Turnd-Replayed") == "true" {
				l.replays.Add(1)
			}
			var t Turn
			if err := json.Unmarshal(a.Body, &t); err != nil {
				l.odd(fmt.Sprintf("POST %s/%s: %v: %s", session, id, err, clip(a.Body)))
				break
			}
			l.Rec.Answered(t)
			if !Settled(t.Status) {
				l.follow(ctx, base, session, id)
			}
			break
		}
	}
}

// follow reads a turn that was not settled when answered until it is (or
// the context ends), recording what it reads.
func (l *Load) follow(ctx context.Context, base, session, id string) {
	for ctx.Err() == nil {
		t, _, err := l.Client.GetTurn(ctx, base, session, id, "Prefer", "wait=10")
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(l.Retry):
			}
			continue
		}
		l.Rec.Answered(t)
		if Settled(t.Status) {
			return
		}
	}
}

func (l *Load) fail(why string) {
	l.mu.Lock()
	l.fails[why]++
	l.mu.Unlock()
}

func (l *Load) odd(what string) {
	l.mu.Lock()
	if len(l.unexpected) < 50 {
		l.unexpected = append(l.unexpected, what)
	}
	l.mu.Unlock()
}
