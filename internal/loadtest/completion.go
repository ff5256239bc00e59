package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/turnd/turnd/turn"
)

// This file measures deferred completion: calls parked on completion keys
// by a deferred HTTP tool (PendingTool), parked in bulk over HTTP (Park),
// then completed through POST /v1/complete/{key}, either as fast as
// senders can (Completions) or one at a time while clients hold
// `Prefer: wait` on their turns (CompletionLatency).

// PendingTool is the far end of a deferred HTTP tool for benchmarks: it
// answers every call at once with
//
//	202 {"pending": <Pending>}
//
// and keeps the completion key the call's request carried, so that the
// benchmark can deliver the call's result later. It is an http.Handler, to
// be served on loopback; turnd reaches it through the tool config
// DeferredToolConfig writes.
type PendingTool struct {
	pending []byte
	calls   atomic.Int64
	bad     atomic.Int64

	mu   sync.Mutex
	keys map[callRef]string
}

type callRef struct{ session, turn, call string }

// NewPendingTool returns a tool whose pending answers carry the pending
// options pending (a JSON object such as {"deadline": "24h"}; empty means
// that one).
func NewPendingTool(pending string) *PendingTool {
	if pending == "" {
		pending = `{"deadline":"24h"}`
	}
	return &PendingTool{pending: []byte(`{"pending":` + pending + `}`), keys: map[callRef]string{}}
}

// ServeHTTP parks the call: it records the request's completion key and
// answers pending. A request without a key (a tool config without
// deferred: true) is answered 400, which turnd reports as the call's error.
func (p *PendingTool) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		SessionID  string `json:"session_id"`
		TurnID     string `json:"turn_id"`
		CallID     string `json:"call_id"`
		Completion *struct {
			Key string `json:"key"`
		} `json:"completion"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil || req.Completion == nil || req.Completion.Key == "" {
		p.bad.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":{"code":"no_completion_key","message":"the request carries no completion key"}}`))
		return
	}
	p.mu.Lock()
	p.keys[callRef{req.SessionID, req.TurnID, req.CallID}] = req.Completion.Key
	p.mu.Unlock()
	p.calls.Add(1)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	_, _ = w.Write(p.pending)
}

// Key returns the completion key of a call the tool has parked.
func (p *PendingTool) Key(sessionID, turnID, callID string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k, ok := p.keys[callRef{sessionID, turnID, callID}]
	return k, ok
}

// Calls returns how many calls the tool has parked, and how many requests
// it refused for want of a completion key.
func (p *PendingTool) Calls() (parked, refused int64) { return p.calls.Load(), p.bad.Load() }

// DeferredToolConfig returns a turnd tool config (YAML) with one deferred
// HTTP tool named name whose endpoint is url (a PendingTool), of effect
// "read" or "write". The calls of a turn to a read tool run at once (up to
// turnd's per-turn concurrency), each costing one store transaction to
// issue its key before the turn's final commit; those to a write tool run
// one after the other, each also journaled by a commit of its own before
// the tool is asked. Parked, both are the same rows.
func DeferredToolConfig(name, url, effect string) []byte {
	return fmt.Appendf(nil, `tools:
  - name: %s
    description: A deferred job for load tests; parks every call.
    effect: %s
    idempotent: true
    deferred: true
    pending:
      deadline: 24h
    http:
      url: %s
      timeout: 30s
`, name, effect, url)
}

// DeferredTurn returns a body function for Park: ToolTurn's turns of
// calls calls of the deferring tool.
func DeferredTurn(tool string, calls int) func(i int) []byte { return ToolTurn(tool, calls) }

// ParkedTurn is a turn in status waiting, with the completion keys of its
// parked calls in call order.
type ParkedTurn struct {
	SessionID, TurnID string
	Keys              []string
}

// Parking describes the turns Park posts.
type Parking struct {
	// Clients is how many clients post turns at once.
	Clients int
	// Turns is how many turns are posted: Body(0) … Body(Turns-1).
	Turns int
	// Body is the i-th turn's request body (DeferredTurn, say).
	Body func(i int) []byte
	// Tool is the PendingTool the turns' calls park on.
	Tool *PendingTool
	// TurnsPerSession is how many consecutive turns share a session
	// (created by the first). Default 1: every turn is in a session of its
	// own, as a conversation has one turn outstanding at a time; turns of
	// one session share its ledger, whose sequence every resolution of
	// each of them writes.
	TurnsPerSession int
}

// Park posts p.Turns turns from p.Clients concurrent clients, each with
//
//	Prefer: respond-async
//
// and each client polls its turn until it leaves status running before it
// posts its next one, so that at most p.Clients turns run at once. Every
// turn must end waiting, with every call parked on p.Tool; Park returns
// them, in the order of their bodies, with their keys. The Result times
// each turn from its POST until it was seen waiting (so its latencies are
// rounded up by the polling, which backs off from 2ms to 50ms).
func Park(ctx context.Context, baseURL string, p Parking) ([]ParkedTurn, Result, error) {
	if p.Clients < 1 || p.Turns < 1 || p.Body == nil || p.Tool == nil {
		return nil, Result{}, fmt.Errorf("park: %d clients, %d turns: want positive numbers, a body and a tool", p.Clients, p.Turns)
	}
	perSession := max(p.TurnsPerSession, 1)
	client, done := newClient(p.Clients)
	defer done()
	base := strings.TrimSuffix(baseURL, "/") + "/v1/sessions/lp-" + randomID(4) + "-"
	out := make([]ParkedTurn, p.Turns)
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		mu       sync.Mutex
		lat      []time.Duration
		firstErr error
		errCount int
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	t0 := time.Now()
	for range p.Clients {
		wg.Go(func() {
			var mine []time.Duration
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= p.Turns {
					break
				}
				start := time.Now()
				pt, err := parkOne(ctx, client, base+strconv.Itoa(i/perSession), p.Body(i), p.Tool)
				if err != nil {
					mu.Lock()
					errCount++
					if firstErr == nil {
						firstErr = fmt.Errorf("turn %d: %w", i, err)
						cancel() // a broken server would only fail the rest
					}
					mu.Unlock()
					continue
				}
				mine = append(mine, time.Since(start))
				out[i] = pt
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	r := Summarize(lat, errCount, time.Since(t0))
	if firstErr != nil {
		return nil, r, fmt.Errorf("park: %w", firstErr)
	}
	if err := ctx.Err(); err != nil {
		return nil, r, fmt.Errorf("park: %w", err)
	}
	return out, r, nil
}

// parkOne posts one turn asynchronously and polls it until it is waiting.
func parkOne(ctx context.Context, client *http.Client, sessionURL string, body []byte, tool *PendingTool) (ParkedTurn, error) {
	var sent struct {
		ID    string `json:"id"`
		Calls []struct {
			ID string `json:"id"`
		} `json:"calls"`
	}
	if err := json.Unmarshal(body, &sent); err != nil {
		return ParkedTurn{}, fmt.Errorf("request body: %w", err)
	}
	status, code, err := turnRequest(ctx, client, http.MethodPost, sessionURL+"/turns", body, "respond-async")
	if err != nil {
		return ParkedTurn{}, err
	}
	if code != http.StatusAccepted && code != http.StatusOK {
		return ParkedTurn{}, fmt.Errorf("posting the turn: answer %d, turn %s", code, status)
	}
	for delay := 2 * time.Millisecond; status == "running"; delay = min(2*delay, 50*time.Millisecond) {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return ParkedTurn{}, ctx.Err()
		}
		if status, code, err = turnRequest(ctx, client, http.MethodGet, sessionURL+"/turns/"+url.PathEscape(sent.ID), nil, ""); err != nil {
			return ParkedTurn{}, err
		}
		if code != http.StatusOK {
			return ParkedTurn{}, fmt.Errorf("reading the turn: answer %d", code)
		}
	}
	if status != "waiting" {
		return ParkedTurn{}, fmt.Errorf("the turn ended %s, not waiting", status)
	}
	sid := sessionURL[strings.LastIndexByte(sessionURL, '/')+1:]
	pt := ParkedTurn{SessionID: sid, TurnID: sent.ID, Keys: make([]string, len(sent.Calls))}
	for k, c := range sent.Calls {
		key, ok := tool.Key(sid, sent.ID, c.ID)
		if !ok {
			return ParkedTurn{}, fmt.Errorf("call %s is parked but the tool never saw its key", c.ID)
		}
		pt.Keys[k] = key
	}
	return pt, nil
}

// turnRequest sends a request that answers a turn, and returns the turn's
// status and the HTTP status. prefer, when set, is sent as Prefer.
func turnRequest(ctx context.Context, client *http.Client, method, target string, body []byte, prefer string) (string, int, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return "", 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if prefer != "" {
		req.Header.Set("Prefer", prefer)
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return "", resp.StatusCode, fmt.Errorf("reading answer: %w", err)
	}
	var t struct {
		Status string `json:"status"`
	}
	if resp.StatusCode >= 300 {
		return "", resp.StatusCode, fmt.Errorf("answer %d: %.300s", resp.StatusCode, got)
	}
	if err := json.Unmarshal(got, &t); err != nil {
		return "", resp.StatusCode, fmt.Errorf("answer %d: %w: %.300s", resp.StatusCode, err, got)
	}
	return t.Status, resp.StatusCode, nil
}

// Deliver posts output (a JSON value) as the result of the call parked on
// key:
//
//	POST {baseURL}/v1/complete/{key}  {"output": <output>}
//
// and wants 200 {"status": "accepted"}.
func Deliver(ctx context.Context, client *http.Client, baseURL, key string, output []byte) error {
	body := make([]byte, 0, len(output)+12)
	body = append(append(append(body, `{"output":`...), output...), '}')
	req, err := http.NewRequestWithContext(ctx, http.MethodPost,
		strings.TrimSuffix(baseURL, "/")+"/v1/complete/"+url.PathEscape(key), bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return fmt.Errorf("reading answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("delivery answered %d: %.300s", resp.StatusCode, got)
	}
	var a struct {
		Status string `json:"status"`
	}
	if err := json.Unmarshal(got, &a); err != nil || a.Status != "accepted" {
		return fmt.Errorf("delivery answered %.300s", got)
	}
	return nil
}

// AwaitTurn holds `GET {baseURL}/v1/sessions/{sid}/turns/{tid}` with
// `Prefer: wait=<wait in seconds>` and returns the turn's status.
func AwaitTurn(ctx context.Context, client *http.Client, baseURL, sessionID, turnID string, wait time.Duration) (string, error) {
	status, code, err := turnRequest(ctx, client, http.MethodGet, turnURL(baseURL, sessionID, turnID), nil,
		"wait="+strconv.Itoa(int(wait/time.Second)))
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("answer %d", code)
	}
	return status, err
}

func turnURL(baseURL, sessionID, turnID string) string {
	return strings.TrimSuffix(baseURL, "/") + "/v1/sessions/" + url.PathEscape(sessionID) + "/turns/" + url.PathEscape(turnID)
}

// Completions measures the delivery rate of completions: clients senders
// deliver the keys of turns (parked, e.g. by Park) for d, each sender
// taking the next turn not yet taken and delivering its keys one after
// the other, so that no two senders race on one turn and every turn
// settles with its last key. An operation is one delivery. When every key
// is delivered before d has passed the window closes early and exhausted
// is true: park more calls for a full window.
func Completions(ctx context.Context, baseURL string, clients int, d time.Duration, turns []ParkedTurn) (r Result, exhausted bool, err error) {
	client, done := newClient(clients)
	defer done()
	// Keys are handed out one by one, not a turn per sender: when the
	// last key is taken the loop stops, and no sender is left holding
	// keys it would never deliver.
	type job struct {
		turn int
		key  string
	}
	var jobs []job
	for i, t := range turns {
		for _, k := range t.Keys {
			jobs = append(jobs, job{i, k})
		}
	}
	outputs := make([][]byte, clients)
	var next atomic.Int64
	var out atomic.Bool
	parent := ctx
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	warm := func(ctx context.Context, _ int) error {
		return ping(ctx, client, baseURL)
	}
	op := func(ctx context.Context, c int) error {
		i := int(next.Add(1) - 1)
		if i >= len(jobs) {
			out.Store(true)
			stop()
			return context.Canceled // Loop counts nothing for a cancelled operation
		}
		j := jobs[i]
		o := strconv.AppendInt(append(outputs[c][:0], `{"ok":true,"turn":`...), int64(j.turn), 10)
		outputs[c] = append(o, '}')
		// A delivery in flight when another sender runs out of keys still
		// finishes and counts: it was sent within the window.
		return Deliver(context.WithoutCancel(ctx), client, baseURL, j.key, outputs[c])
	}
	r, err = Loop(ctx, clients, d, warm, op)
	if err != nil && out.Load() && parent.Err() == nil && errors.Is(err, context.Canceled) {
		err = nil
		if r.Errors > 0 {
			err = fmt.Errorf("%d of %d deliveries failed", r.Errors, r.Errors+r.Ops)
		}
	}
	if err != nil {
		return r, out.Load(), fmt.Errorf("completions: %w", err)
	}
	return r, out.Load(), nil
}

// LatencyOptions tunes CompletionLatency.
type LatencyOptions struct {
	// Wait is the `Prefer: wait` the waiters send. Default 30s.
	Wait time.Duration
	// Hold is how long the sender lets the server take up the waiters'
	// requests, once they are all written, before its first delivery.
	// Default 200ms.
	Hold time.Duration
	// Stagger spreads the waiters' requests of a round at random over this
	// long before the sender's Hold begins, so that a server which notices
	// settled turns by polling each waiter on a period (a replica learning
	// of another's delivery) is caught at a random point of its period, as
	// it would be by a client that came at any time. 0: all at once.
	Stagger time.Duration
}

// CompletionLatency measures how long a waiting client learns of a
// completion: turns (each parked, e.g. by Park) are taken in rounds of
// batch; in a round, batch waiters each hold
//
//	GET {waitURL}/v1/sessions/{sid}/turns/{tid}    Prefer: wait=30
//
// on a turn of their own, then one sender delivers the turns' keys to
// deliverURL one after the other (the last key of a turn settles it). A
// sample is the time from just before the POST of a turn's last key until
// its waiter's answer is read. waitURL and deliverURL may be two replicas.
// A waiter that answers before its turn's delivery, or with the turn not
// completed, counts as an error. The Result's Elapsed is the time spent in
// rounds, pauses included; its rate means nothing.
func CompletionLatency(ctx context.Context, waitURL, deliverURL string, turns []ParkedTurn, batch int, o LatencyOptions) (Result, error) {
	if batch < 1 {
		return Result{}, fmt.Errorf("latency: batch %d must be positive", batch)
	}
	if o.Wait <= 0 {
		o.Wait = 30 * time.Second
	}
	if o.Hold <= 0 {
		o.Hold = 200 * time.Millisecond
	}
	waiters, doneW := newClient(batch)
	defer doneW()
	sender, doneS := newClient(1)
	defer doneS()
	if err := ping(ctx, sender, deliverURL); err != nil {
		return Result{}, fmt.Errorf("latency: %w", err)
	}
	var (
		lat      []time.Duration
		errCount int
		firstErr error
		elapsed  time.Duration
		mu       sync.Mutex
	)
	fail := func(err error) {
		mu.Lock()
		errCount++
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
	}
	for lo := 0; lo < len(turns) && ctx.Err() == nil; lo += batch {
		round := turns[lo:min(lo+batch, len(turns))]
		t0s := make([]atomic.Int64, len(round))
		var wrote, answered sync.WaitGroup
		wrote.Add(len(round))
		start := time.Now()
		for i, pt := range round {
			var once sync.Once
			trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { once.Do(wrote.Done) }}
			var stagger time.Duration
			if o.Stagger > 0 {
				stagger = rand.N(o.Stagger)
			}
			answered.Go(func() {
				defer once.Do(wrote.Done) // never leave the sender waiting
				if stagger > 0 {
					select {
					case <-time.After(stagger):
					case <-ctx.Done():
					}
				}
				status, err := AwaitTurn(httptrace.WithClientTrace(ctx, trace), waiters, waitURL, pt.SessionID, pt.TurnID, o.Wait)
				t1 := time.Now()
				t0 := t0s[i].Load()
				switch {
				case err != nil:
					fail(fmt.Errorf("waiting on turn %s/%s: %w", pt.SessionID, pt.TurnID, err))
				case t0 == 0:
					fail(fmt.Errorf("the wait on turn %s/%s answered %s before its completion was posted", pt.SessionID, pt.TurnID, status))
				case status != "completed":
					fail(fmt.Errorf("the wait on turn %s/%s answered %s after %v", pt.SessionID, pt.TurnID, status, t1.Sub(time.Unix(0, t0))))
				default:
					mu.Lock()
					lat = append(lat, t1.Sub(time.Unix(0, t0)))
					mu.Unlock()
				}
			})
		}
		wrote.Wait()
		// There is no event for "the server holds the request": give it a
		// moment, which no sample includes.
		select {
		case <-time.After(o.Hold):
		case <-ctx.Done():
		}
		for i, pt := range round {
			for k, key := range pt.Keys {
				if k == len(pt.Keys)-1 {
					t0s[i].Store(time.Now().UnixNano())
				}
				if err := Deliver(ctx, sender, deliverURL, key, []byte(`{"ok":true}`)); err != nil {
					fail(fmt.Errorf("delivering to turn %s/%s: %w", pt.SessionID, pt.TurnID, err))
				}
			}
		}
		answered.Wait()
		elapsed += time.Since(start)
	}
	r := Summarize(lat, errCount, elapsed)
	if err := ctx.Err(); err != nil {
		return r, err
	}
	if errCount > 0 {
		return r, fmt.Errorf("latency: %d of %d samples failed; the first: %w", errCount, errCount+r.Ops, firstErr)
	}
	return r, nil
}

// newClient returns a client whose transport keeps conns connections per
// host alive, and a function that closes them.
func newClient(conns int) (*http.Client, func()) {
	transport := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        2 * conns,
		MaxIdleConnsPerHost: 2 * conns,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	return &http.Client{Transport: transport, Timeout: 2 * time.Minute}, transport.CloseIdleConnections
}

// ping opens a connection to baseURL (GET /healthz), to keep it alive.
func ping(ctx context.Context, client *http.Client, baseURL string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(baseURL, "/")+"/healthz", nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /healthz answered %d", resp.StatusCode)
	}
	return nil
}

// Threads returns the number of OS threads of process pid: Threads in
// /proc/<pid>/status (Linux only). A Go process does not show its
// goroutines outside; its threads bound those running or blocked in a
// system call.
func Threads(pid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return 0, fmt.Errorf("no Threads in /proc/%d/status", pid)
}

// TimedCompletions wraps a turn.Store and counts and times the methods of
// its turn.CompletionStore, the way TimedStore does the others; the rest
// pass through. Put it under a TimedStore to time both:
//
//	timed := NewTimedStore(NewTimedCompletions(pg))
type TimedCompletions struct {
	turn.Store
	stats [numCompletionOps]struct{ calls, errors, nanos atomic.Int64 }
}

// NewTimedCompletions wraps s.
func NewTimedCompletions(s turn.Store) *TimedCompletions { return &TimedCompletions{Store: s} }

type completionOp int

const (
	opIssueCompletion completionOp = iota
	opGetCompletion
	opGetDelivery
	opDeliverEarly
	opResolve
	opTurnCompletions
	opDueCompletions
	numCompletionOps
)

var completionOpNames = [numCompletionOps]string{
	"IssueCompletion", "GetCompletion", "GetDelivery", "DeliverEarly", "Resolve", "TurnCompletions", "DueCompletions",
}

func (s *TimedCompletions) record(op completionOp, t0 time.Time, err error) {
	st := &s.stats[op]
	st.calls.Add(1)
	st.nanos.Add(int64(time.Since(t0)))
	if err != nil {
		st.errors.Add(1)
	}
}

// IssueCompletion implements turn.CompletionStore.
func (s *TimedCompletions) IssueCompletion(ctx context.Context, c turn.Completion) error {
	t0 := time.Now()
	err := s.Store.IssueCompletion(ctx, c)
	s.record(opIssueCompletion, t0, err)
	return err
}

// GetCompletion implements turn.CompletionStore.
func (s *TimedCompletions) GetCompletion(ctx context.Context, sessionID string, keyHash [32]byte) (turn.Completion, error) {
	t0 := time.Now()
	c, err := s.Store.GetCompletion(ctx, sessionID, keyHash)
	s.record(opGetCompletion, t0, err)
	return c, err
}

// GetDelivery implements turn.CompletionStore.
func (s *TimedCompletions) GetDelivery(ctx context.Context, sessionID string, keyHash [32]byte) (turn.DeliveryTarget, error) {
	t0 := time.Now()
	d, err := s.Store.GetDelivery(ctx, sessionID, keyHash)
	s.record(opGetDelivery, t0, err)
	return d, err
}

// DeliverEarly implements turn.CompletionStore.
func (s *TimedCompletions) DeliverEarly(ctx context.Context, sessionID string, keyHash [32]byte, payload json.RawMessage, payloadHash [32]byte, now time.Time) (turn.Completion, error) {
	t0 := time.Now()
	c, err := s.Store.DeliverEarly(ctx, sessionID, keyHash, payload, payloadHash, now)
	s.record(opDeliverEarly, t0, err)
	return c, err
}

// Resolve implements turn.CompletionStore.
func (s *TimedCompletions) Resolve(ctx context.Context, b turn.ResolveBatch) (bool, error) {
	t0 := time.Now()
	settled, err := s.Store.Resolve(ctx, b)
	s.record(opResolve, t0, err)
	return settled, err
}

// TurnCompletions implements turn.CompletionStore.
func (s *TimedCompletions) TurnCompletions(ctx context.Context, k turn.TurnKey) ([]turn.Completion, error) {
	t0 := time.Now()
	cs, err := s.Store.TurnCompletions(ctx, k)
	s.record(opTurnCompletions, t0, err)
	return cs, err
}

// DueCompletions implements turn.CompletionStore.
func (s *TimedCompletions) DueCompletions(ctx context.Context, now time.Time, limit int) ([]turn.Completion, error) {
	t0 := time.Now()
	cs, err := s.Store.DueCompletions(ctx, now, limit)
	s.record(opDueCompletions, t0, err)
	return cs, err
}

// Snapshot returns the counters so far, one entry per timed method in a
// fixed order (StoreCalls.Sub subtracts an earlier one).
func (s *TimedCompletions) Snapshot() StoreCalls {
	out := make(StoreCalls, numCompletionOps)
	for i := range out {
		st := &s.stats[i]
		out[i] = StoreCall{
			Name: completionOpNames[i], Calls: st.calls.Load(), Errors: st.errors.Load(),
			Total: time.Duration(st.nanos.Load()),
		}
	}
	return out
}
