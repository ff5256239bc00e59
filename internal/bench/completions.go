package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/turnd/turnd/client"
	"github.com/turnd/turnd/internal/loadtest"
)

// The completion workload (`turnd bench --completions`, Workload.Completions):
// how fast turnd takes deliveries to POST /v1/complete/{key}. A round
// first parks Parked turns, each of one call of bench_deferred held by the
// tool server (it answers pending and hands the call's key to the bench
// instead of delivering), each turn in a session of its own and posted with
// Prefer: wait by a waiter that holds its answer; it checks that every
// turn is waiting; then the measured window opens and Concurrency
// deliverers POST the calls' results, each a key after the other as fast
// as turnd answers. A completion counts when its delivery was answered
// accepted and its turn's waiter was answered completed with the delivered
// output; its latency runs from the delivery's POST to the end of the
// waiter's answer. The window closes when every waiter has its answer.

// RunCompletions runs w's completion workload (w.Completions) against t,
// whose bench_deferred tool tools serves, and measures it as Run measures
// turns: Load's operations are completions, its latencies delivery →
// answer. A warm-up of Concurrency calls parked and delivered comes first,
// before the window (loadtest.WithWindow) opens.
func RunCompletions(ctx context.Context, t Target, tools *ToolServer, w Workload, progress func(Snapshot), interval time.Duration) (Load, error) {
	if err := w.Validate(); err != nil {
		return Load{}, err
	}
	if !w.Completions || tools == nil {
		return Load{}, errors.New("completions: a completion workload and the tool server its calls park on are needed")
	}
	if _, err := parseBase(t.URL); err != nil {
		return Load{}, err
	}
	r, err := newRunner(t, w)
	if err != nil {
		return Load{}, err
	}
	defer r.close()
	c := &completions{runner: r, tools: tools}
	if err := c.warm(ctx); err != nil {
		return Load{}, fmt.Errorf("warming up (parking and delivering %d calls before the window): %w", w.Concurrency, err)
	}
	return c.measure(ctx, progress, interval)
}

// completions is one RunCompletions.
type completions struct {
	*runner
	tools *ToolServer
}

// parkedCall is one parked turn of the workload: its session's turns path
// and its call's key, and how its delivery and its waiter ended.
type parkedCall struct {
	n       int
	session string
	key     string
	// sent is when the delivery's POST began (unix nanoseconds, 0 before).
	sent atomic.Int64
	// delivered is closed once the delivery was answered: kind "" when
	// accepted, else its failure kind and msg.
	delivered chan struct{}
	kind, msg string
	// answered is closed when the waiter has its answer, which failed
	// with answerKind and answerMsg unless answerKind is ""; stop ends the
	// waiter's request (a delivery that failed leaves nothing to wait for).
	answered              chan struct{}
	answerKind, answerMsg string
	stop                  context.CancelFunc
}

// cycle is one batch of parked calls: parked, then delivered.
type cycle struct {
	calls   []parkedCall
	waiters sync.WaitGroup
	// outcome receives each call's outcome once both its delivery and its
	// waiter ended.
	outcome func(c *parkedCall, answerAt time.Time, kind, msg string)
}

// warm parks and delivers Concurrency calls, outside the window: the
// connections, prepared statements and caches of both paths are then
// warm. Any failure fails the run.
func (c *completions) warm(ctx context.Context) error {
	var (
		mu    sync.Mutex
		first error
	)
	cy := &cycle{calls: make([]parkedCall, c.w.Concurrency), outcome: func(p *parkedCall, _ time.Time, kind, msg string) {
		if kind == "" {
			return
		}
		mu.Lock()
		if first == nil {
			first = fmt.Errorf("call %d: %s: %s", p.n, kind, msg)
		}
		mu.Unlock()
	}}
	if err := c.park(ctx, cy, "w"); err != nil {
		return err
	}
	var wg sync.WaitGroup
	for i := range cy.calls {
		wg.Go(func() { c.deliver(ctx, &cy.calls[i]) })
	}
	wg.Wait()
	cy.waiters.Wait()
	return first
}

// measure parks a round's calls, then delivers them in the window.
func (c *completions) measure(ctx context.Context, progress func(Snapshot), interval time.Duration) (Load, error) {
	n := c.w.parked()
	cy := &cycle{calls: make([]parkedCall, n), outcome: c.account}
	if err := c.park(ctx, cy, "p"); err != nil {
		return Load{}, err
	}
	// The window's progress counts the round's calls (reportProgress
	// reads a count of turns).
	c.w.Turns = n
	closeWindow := loadtest.OpenWindow(ctx)
	t0 := time.Now()
	var stopProgress func()
	if progress != nil {
		stopProgress = c.reportProgress(t0, progress, interval)
	}
	_ = c.each(ctx, n, func(ctx context.Context, i int) error {
		c.deliver(ctx, &cy.calls[i])
		return nil
	})
	// Calls a stopped run did not deliver: their waiters give up.
	for i := range cy.calls {
		if p := &cy.calls[i]; p.sent.Load() == 0 {
			p.fail("cancelled", "the run was stopped before the delivery")
		}
	}
	cy.waiters.Wait()
	elapsed := time.Since(t0)
	closeWindow()
	if stopProgress != nil {
		stopProgress()
	}
	l := c.load(elapsed)
	l.Calls, l.Deferred = int64(n), int64(n)
	return l, ctx.Err()
}

// account counts a measured call's outcome.
func (c *completions) account(p *parkedCall, answerAt time.Time, kind, msg string) {
	if kind != "" {
		c.fail(kind, msg)
		return
	}
	c.ok.Add(1)
	d := answerAt.Sub(time.Unix(0, p.sent.Load()))
	c.mu.Lock()
	c.lat = append(c.lat, d)
	c.mu.Unlock()
}

// park parks cy's calls from Concurrency parkers, each starting a waiter
// and waiting for its call's key before the next, then checks that every
// turn is waiting. tag names the turns' sessions. On an error the waiters
// it started are stopped and waited for.
func (c *completions) park(ctx context.Context, cy *cycle, tag string) error {
	err := c.each(ctx, len(cy.calls), func(ctx context.Context, i int) error { return c.parkOne(ctx, cy, i, tag) })
	if err == nil {
		err = c.each(ctx, len(cy.calls), func(ctx context.Context, i int) error { return c.untilWaiting(ctx, cy.calls[i].session) })
	}
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		for i := range cy.calls {
			if p := &cy.calls[i]; p.delivered != nil {
				p.fail("cancelled", "parking failed")
			}
		}
		cy.waiters.Wait()
		return fmt.Errorf("parking: %w", err)
	}
	return nil
}

// each runs f for 0 … n-1 from Concurrency goroutines, each taking the
// next index, until every index ran or f failed; it returns the first
// error. f's context ends at the first error.
func (c *completions) each(ctx context.Context, n int, f func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for range c.w.Concurrency {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := f(ctx, i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					cancel()
				}
			}
		})
	}
	wg.Wait()
	return first
}

// parkOne starts call i's waiter and returns once the tool has its key.
func (c *completions) parkOne(ctx context.Context, cy *cycle, i int, tag string) error {
	p := &cy.calls[i]
	*p = parkedCall{n: i, session: strings.TrimPrefix(c.prefix, "/v1/sessions/") + tag + strconv.Itoa(i),
		delivered: make(chan struct{}), answered: make(chan struct{})}
	keys, forget := c.tools.expect(p.session, "c")
	defer forget()
	// The waiter outlives parking: its context is the run's.
	wctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	p.stop = stop
	cy.waiters.Add(1)
	go c.wait(wctx, cy, p)
	select {
	case p.key = <-keys:
		return nil
	case <-p.answered:
		return fmt.Errorf("turn %s answered before its call parked (%s: %s)", p.session, p.answerKind, p.answerMsg)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// heldTurn is the body of every parked turn: one held call of the
// deferred tool.
const heldTurn = `{"id":"c","calls":[{"id":"c.0","name":"` + ToolDeferred + `","arguments":{"latency_us":0,"bytes":0,"hold":true}}]}`

// wait posts p's turn with Prefer: wait and holds its answer, then, once
// the delivery was answered too, hands p's outcome to cy.outcome.
func (c *completions) wait(ctx context.Context, cy *cycle, p *parkedCall) {
	defer cy.waiters.Done()
	defer p.stop()
	status, got, err := c.send(ctx, "/v1/sessions/"+p.session+"/turns", []byte(heldTurn))
	at := time.Now()
	var kind, msg string
	switch {
	case err != nil:
		_, kind, msg = failure(err)
	case status != http.StatusOK:
		_, kind, msg = c.statusFailure(status, got)
	default:
		kind, msg = c.checkCompleted(got, p.n)
	}
	p.answerKind, p.answerMsg = kind, msg
	close(p.answered)
	<-p.delivered
	switch {
	case p.kind != "":
		kind, msg = p.kind, p.msg
	case kind == "" && at.UnixNano() < p.sent.Load():
		kind, msg = "answered_before_delivery", fmt.Sprintf("turn %s answered before its delivery", p.session)
	}
	cy.outcome(p, at, kind, msg)
}

// checkCompleted checks a waiter's answer: the turn completed, its one
// call ok with the output {"n": n} its delivery carried. As workload 1's
// answers, most are checked by their text (loadtest.QuickCheck and the
// output's text), one in loadtest.FullCheckEvery, and any the text leaves
// in doubt, decoded.
func (c *completions) checkCompleted(got []byte, n int) (kind, msg string) {
	if c.checked.Add(1)%loadtest.FullCheckEvery != 0 && loadtest.QuickCheck(got, 1) &&
		bytes.Contains(got, append(strconv.AppendInt([]byte(`"output":{"n":`), int64(n), 10), '}')) {
		return "", ""
	}
	return checkCompleted(got, n)
}

// checkCompleted decodes and checks a waiter's answer (see
// completions.checkCompleted).
func checkCompleted(got []byte, n int) (kind, msg string) {
	var t client.Turn
	if err := json.Unmarshal(got, &t); err != nil {
		return "bad_answer", "the answer is not a turn: " + err.Error()
	}
	if _, kind, msg := checkTurn(&t, 1, func() string { return fmt.Sprintf("%.300s", got) }); kind != "" {
		return kind, msg
	}
	var out struct {
		N *int `json:"n"`
	}
	if json.Unmarshal(t.Results[0].Output, &out) != nil || out.N == nil || *out.N != n {
		return "wrong_result", fmt.Sprintf("turn %s answered output %.200s, delivered {\"n\":%d}", t.ID, t.Results[0].Output, n)
	}
	return "", ""
}

// acceptedAnswer is turnd's answer to an accepted delivery, as it writes
// it: compared as text, not decoded (any other answer is decoded).
var acceptedAnswer = []byte(`{"status":"accepted"}` + "\n")

// deliver POSTs p's result, {"output":{"n":<n>}}, and records how the
// delivery was answered; one that failed stops p's waiter.
func (c *completions) deliver(ctx context.Context, p *parkedCall) {
	body := strconv.AppendInt([]byte(`{"output":{"n":`), int64(p.n), 10)
	body = append(body, "}}"...)
	p.sent.Store(time.Now().UnixNano())
	status, got, err := c.send(ctx, "/v1/complete/"+url.PathEscape(p.key), body)
	switch {
	case err != nil:
		_, kind, msg := failure(err)
		p.fail("delivery_"+kind, msg)
	case status != http.StatusOK:
		_, kind, msg := c.statusFailure(status, got)
		p.fail("delivery_"+kind, msg)
	case bytes.Equal(got, acceptedAnswer):
		close(p.delivered)
	default:
		var a struct {
			Status string `json:"status"`
		}
		if json.Unmarshal(got, &a) != nil || a.Status != "accepted" {
			kind := "delivery_" + a.Status // already_completed, say
			if a.Status == "" {
				kind = "delivery_bad_answer"
			}
			p.fail(kind, fmt.Sprintf("the delivery was answered %.300s", got))
			return
		}
		close(p.delivered)
	}
}

// fail ends p's delivery with a failure of kind, and its waiter.
func (p *parkedCall) fail(kind, msg string) {
	p.kind, p.msg = kind, msg
	close(p.delivered)
	p.stop()
}

// untilWaiting polls GET of session's turn c until it is waiting, for up
// to 10 s.
func (c *completions) untilWaiting(ctx context.Context, session string) error {
	deadline := time.Now().Add(10 * time.Second)
	for delay := time.Millisecond; ; delay = min(2*delay, 100*time.Millisecond) {
		status, err := c.turnStatus(ctx, session)
		switch {
		case err != nil:
			return err
		case status == "waiting":
			return nil
		case status != "running" || time.Now().After(deadline):
			return fmt.Errorf("turn %s is %s, not waiting on its parked call", session, status)
		}
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// turnStatus reads the status of session's turn c.
func (c *completions) turnStatus(ctx context.Context, session string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/v1/sessions/"+session+"/turns/c", nil)
	if err != nil {
		return "", err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return "", err
	}
	var t struct {
		Status string `json:"status"`
	}
	if (resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusAccepted) || json.Unmarshal(got, &t) != nil {
		return "", fmt.Errorf("reading turn %s: answer %d: %.300s", session, resp.StatusCode, got)
	}
	return t.Status, nil
}
