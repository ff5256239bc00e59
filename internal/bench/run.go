package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/turnd/turnd/client"
	"github.com/turnd/turnd/internal/loadtest"
)

// Target is the turnd a run drives.
type Target struct {
	// URL is turnd's base URL, such as http://127.0.0.1:8080.
	URL string
	// Token is a bearer token for the API; empty sends none.
	Token string
}

// Snapshot is the state of a run, handed to the progress callback.
type Snapshot struct {
	Elapsed  time.Duration
	OK       int64 // turns answered completed, every call ok
	Failed   int64 // turns that failed (any error kind)
	InFlight int64
	// Fraction is how much of the run is done, 0…1.
	Fraction float64
}

// Load is the outcome of a run.
type Load struct {
	// Result holds the completed turns (Ops), the failed ones (Errors),
	// the window (Elapsed) and the latencies of the completed turns.
	Result loadtest.Result
	// Errors counts the failed turns by kind: "transport", "timeout",
	// "client_overload", "unsettled" (still running or waiting when the
	// wait ran out), "http_<status>[:<code>]", "turn_<status>",
	// "call_<status>[:<code>]", "bad_answer". They add up to
	// Result.Errors.
	Errors map[string]int
	// FirstError describes the first failure.
	FirstError string
	// Calls counts the calls of the turns posted, by kind.
	Calls, Reads, Writes, Deferred int64
	// Truncated counts the results of completed turns whose output the
	// budget truncated.
	Truncated int64
}

// Run posts w's turns to t and measures them. progress, when not nil, is
// called every interval from a goroutine of Run's and once at the end. Run
// stops early when ctx is done, returning what it measured and ctx's
// error. A window hook in ctx (loadtest.WithWindow) is called as the
// measured window opens, after the warm-up, and as it closes.
func Run(ctx context.Context, t Target, w Workload, progress func(Snapshot), interval time.Duration) (Load, error) {
	if err := w.Validate(); err != nil {
		return Load{}, err
	}
	if _, err := parseBase(t.URL); err != nil {
		return Load{}, err
	}
	r, err := newRunner(t, w)
	if err != nil {
		return Load{}, err
	}
	defer r.close()
	return r.run(ctx, progress, interval)
}

func parseBase(u string) (string, error) {
	if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		return "", fmt.Errorf("url %q: want an http(s) URL such as http://127.0.0.1:8080", u)
	}
	return strings.TrimRight(u, "/"), nil
}

type runner struct {
	w         Workload
	base      string
	token     string
	transport *http.Transport
	client    *http.Client
	// h1 posts to an http:// turnd, with less CPU than client (see
	// loadtest.Client); client posts to an https:// one.
	h1     *loadtest.Client
	prefix string // the path of the run's sessions, up to their number
	// ordinary posts every turn with postOrdinary (ClientOrdinary).
	ordinary bool

	seed1, seed2 uint64
	pad          string // echo's pad argument: its output is OutputBytes

	ok, failed, inFlight atomic.Int64
	checked              atomic.Int64 // answers checked, see loadtest.FullCheckEvery
	reads, writes, defs  atomic.Int64
	truncated            atomic.Int64

	mu       sync.Mutex
	lat      []time.Duration
	errs     map[string]int
	firstErr string
}

func newRunner(t Target, w Workload) (*runner, error) {
	base, _ := parseBase(t.URL)
	n := w.maxInFlight()
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        n + 16,
		MaxIdleConnsPerHost: n + 16,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	ordinary := w.client() == ClientOrdinary
	if ordinary {
		tr = ordinaryTransport(n)
	}
	r := &runner{
		w: w, base: base, token: t.Token, transport: tr,
		client: &http.Client{Transport: tr, Timeout: time.Duration(w.waitSeconds()+60) * time.Second},
		prefix: "/v1/sessions/bench-" + randomID(4) + "-",
		errs:   map[string]int{},
		seed1:  w.Seed, seed2: w.Seed ^ 0x9e3779b97f4a7c15,
		pad:      strings.Repeat("x", int(max(w.OutputBytes-10, 0))),
		ordinary: ordinary,
	}
	if w.Seed == 0 {
		r.seed1, r.seed2 = mrand.Uint64(), mrand.Uint64()
	}
	if strings.HasPrefix(base, "http://") && !ordinary {
		h := http.Header{}
		if t.Token != "" {
			h.Set("Authorization", "Bearer "+t.Token)
		}
		var err error
		ct := ""
		if w.Streamed {
			ct = "application/x-ndjson"
		}
		r.h1, err = loadtest.NewClient(base, loadtest.ClientOptions{Header: h, Timeout: r.client.Timeout, MaxBody: maxAnswer, ContentType: ct})
		if err != nil {
			return nil, err
		}
	}
	return r, nil
}

// maxAnswer is the largest turn answer read.
const maxAnswer = 256 << 20

func (r *runner) close() {
	r.transport.CloseIdleConnections()
	if r.h1 != nil {
		r.h1.Close()
	}
}

func randomID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (r *runner) run(ctx context.Context, progress func(Snapshot), interval time.Duration) (Load, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// Warm up: the first turn of a session creates it and opens a
	// connection; each session the window will use gets one first.
	warm := r.w.Concurrency
	if !r.w.closedLoop() {
		warm = min(r.w.maxInFlight(), 16, max(1, int(r.w.Rate)))
	}
	sessions := make(chan int, r.w.maxInFlight())
	var wg sync.WaitGroup
	warmErrs := make([]error, warm)
	for s := range warm {
		wg.Go(func() { warmErrs[s] = r.warm(ctx, s) })
	}
	wg.Wait()
	if err := errors.Join(warmErrs...); err != nil {
		return Load{}, fmt.Errorf("warming up (one turn per session before the window): %w", err)
	}
	for s := range warm {
		sessions <- s
	}
	nextSession := warm

	// The measured window opens (see loadtest.WithWindow).
	closeWindow := loadtest.OpenWindow(ctx)
	t0 := time.Now()
	var stopProgress func()
	if progress != nil {
		stopProgress = r.reportProgress(t0, progress, interval)
	}
	if r.w.closedLoop() {
		var next atomic.Int64
		for c := range r.w.Concurrency {
			wg.Go(func() {
				for ctx.Err() == nil {
					i := int(next.Add(1) - 1)
					if r.over(i, t0) {
						return
					}
					r.turn(ctx, c, i, time.Now())
				}
			})
		}
	} else {
		period := float64(time.Second) / r.w.Rate
		timer := time.NewTimer(0)
	schedule:
		for i := 0; ; i++ {
			due := t0.Add(time.Duration(float64(i) * period))
			if r.over(i, t0) || (r.w.Duration > 0 && !due.Before(t0.Add(r.w.Duration))) {
				break
			}
			if d := time.Until(due); d > 0 {
				timer.Reset(d)
				select {
				case <-timer.C:
				case <-ctx.Done():
					break schedule
				}
			}
			var s int
			select {
			case s = <-sessions:
			default:
				if nextSession >= r.w.maxInFlight() {
					r.fail("client_overload", fmt.Sprintf("turn %d was due while %d turns were in flight (--max-in-flight)", i, nextSession))
					continue
				}
				s = nextSession
				nextSession++
			}
			wg.Go(func() {
				r.turn(ctx, s, i, due)
				sessions <- s
			})
		}
		timer.Stop()
	}
	wg.Wait()
	elapsed := time.Since(t0)
	closeWindow()
	if stopProgress != nil {
		stopProgress()
	}
	return r.load(elapsed), ctx.Err()
}

// over reports whether turn i is past the end of the window.
func (r *runner) over(i int, t0 time.Time) bool {
	if r.w.Turns > 0 {
		return i >= r.w.Turns
	}
	return time.Since(t0) >= r.w.Duration
}

func (r *runner) load(elapsed time.Duration) Load {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := Load{
		Result:     loadtest.Summarize(r.lat, int(r.failed.Load()), elapsed),
		Errors:     r.errs,
		FirstError: r.firstErr,
		Reads:      r.reads.Load(), Writes: r.writes.Load(), Deferred: r.defs.Load(),
		Truncated: r.truncated.Load(),
	}
	l.Calls = l.Reads + l.Writes + l.Deferred
	return l
}

func (r *runner) reportProgress(t0 time.Time, progress func(Snapshot), interval time.Duration) (stop func()) {
	if interval <= 0 {
		interval = time.Second
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	snap := func() Snapshot {
		s := Snapshot{Elapsed: time.Since(t0), OK: r.ok.Load(), Failed: r.failed.Load(), InFlight: r.inFlight.Load()}
		if r.w.Turns > 0 {
			s.Fraction = float64(s.OK+s.Failed) / float64(r.w.Turns)
		} else {
			s.Fraction = s.Elapsed.Seconds() / r.w.Duration.Seconds()
		}
		// 1 is for the end: turns still in flight when the window closed
		// are not done yet.
		s.Fraction = min(max(s.Fraction, 0), 0.999)
		return s
	}
	go func() {
		defer close(finished)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				progress(snap())
			case <-done:
				s := snap()
				s.Fraction = 1
				progress(s)
				return
			}
		}
	}()
	return func() { close(done); <-finished }
}

func (r *runner) fail(kind, msg string) {
	r.failed.Add(1)
	r.mu.Lock()
	r.errs[kind]++
	if r.firstErr == "" {
		r.firstErr = kind + ": " + msg
	}
	r.mu.Unlock()
}

// warm posts one turn of a single instant call to session s.
func (r *runner) warm(ctx context.Context, s int) error {
	name, args := ToolRead, `{"latency_us":0,"bytes":0}`
	if r.w.Tools == ToolBuiltin {
		name, args = "echo", `{"warm":true}`
	}
	body := `{"id":"warm","calls":[{"id":"warm.0","name":"` + name + `","arguments":` + args + `}]}`
	if r.w.Streamed {
		body = `{"id":"warm"}` + "\n" + `{"id":"warm.0","name":"` + name + `","arguments":` + args + "}\n"
	}
	_, kind, msg := r.post(ctx, r.sessionPath(s), []byte(body), 1)
	if kind != "" {
		return fmt.Errorf("session %d: %s: %s", s, kind, msg)
	}
	return nil
}

func (r *runner) sessionPath(s int) string { return r.prefix + strconv.Itoa(s) + "/turns" }

// turn builds, posts and accounts turn i on session s; its latency counts
// from start.
func (r *runner) turn(ctx context.Context, s, i int, start time.Time) {
	r.inFlight.Add(1)
	defer r.inFlight.Add(-1)
	var truncated int
	var kind, msg string
	if r.ordinary {
		truncated, kind, msg = r.postOrdinary(ctx, r.sessionPath(s), i)
	} else {
		truncated, kind, msg = r.post(ctx, r.sessionPath(s), r.body(i), r.w.Calls)
	}
	if kind == "" {
		d := time.Since(start)
		r.ok.Add(1)
		r.truncated.Add(int64(truncated))
		r.mu.Lock()
		r.lat = append(r.lat, d)
		r.mu.Unlock()
		return
	}
	if ctx.Err() != nil {
		r.fail("cancelled", "the run was stopped")
		return
	}
	r.fail(kind, msg)
}

// body is turn i's request: its calls' kinds and latencies are drawn from
// a generator seeded with i (rng), so that a run is reproducible by its
// seed.
func (r *runner) body(i int) []byte {
	rng := r.rng(i)
	b := make([]byte, 0, 64+96*r.w.Calls)
	appendTurn := loadtest.AppendTurn
	if r.w.Streamed {
		appendTurn = appendNDJSONTurn
	}
	return appendTurn(b, i, r.w.Calls, func(b []byte, _ int) []byte {
		c := r.draw(rng)
		b = append(b, c.name...)
		switch c.name {
		case "echo":
			// echo answers {"pad":"…"}: 10 bytes around the pad.
			b = append(b, `","arguments":{"pad":"`...)
			b = append(b, r.pad...)
			return append(b, `"}}`...)
		case "sleep":
			b = append(b, `","arguments":{"ms":`...)
			b = strconv.AppendInt(b, c.n, 10)
			return append(b, "}}"...)
		}
		b = append(b, `","arguments":{"latency_us":`...)
		b = strconv.AppendInt(b, c.n, 10)
		b = append(b, `,"bytes":`...)
		b = strconv.AppendInt(b, r.w.OutputBytes, 10)
		return append(b, "}}"...)
	})
}

// rng is the generator of turn i's draws.
func (r *runner) rng(i int) *mrand.Rand {
	return mrand.New(mrand.NewPCG(r.seed1+uint64(i), r.seed2))
}

// drawnCall is a call drawn for a turn: its tool and the one argument
// that varies (sleep's milliseconds, the HTTP tools' latency in
// microseconds; none for echo, whose pad is the runner's).
type drawnCall struct {
	name string
	n    int64
}

// draw draws the next call of a turn from rng and counts it by kind: to
// echo (instant; with a pad argument of about OutputBytes, which echo
// returns) or, with a latency, to sleep (whole milliseconds, rounded); or
// to one of the bench's HTTP tools.
func (r *runner) draw(rng *mrand.Rand) drawnCall {
	w := r.w
	if w.Tools == ToolBuiltin {
		r.reads.Add(1)
		if w.Latency.IsZero() {
			return drawnCall{name: "echo"}
		}
		return drawnCall{name: "sleep", n: w.Latency.Sample(rng).Round(time.Millisecond).Milliseconds()}
	}
	name, lat := ToolWrite, w.Latency
	switch {
	case w.DeferredFraction > 0 && rng.Float64() < w.DeferredFraction:
		name, lat = ToolDeferred, w.DeferredDelay
		r.defs.Add(1)
	case rng.Float64() < w.ReadFraction:
		name = ToolRead
		r.reads.Add(1)
	default:
		r.writes.Add(1)
	}
	return drawnCall{name: name, n: lat.Sample(rng).Microseconds()}
}

// appendNDJSONTurn appends turn i as loadtest.AppendTurn does, as a native
// streamed turn: the header line, then each call on a line of its own.
func appendNDJSONTurn(b []byte, i, calls int, call func(b []byte, k int) []byte) []byte {
	id := strconv.AppendInt([]byte("t"), int64(i), 10)
	b = append(b, `{"id":"`...)
	b = append(b, id...)
	b = append(b, "\"}\n"...)
	for k := range calls {
		b = append(b, `{"id":"`...)
		b = append(b, id...)
		b = append(b, '.')
		b = strconv.AppendInt(b, int64(k), 10)
		b = append(b, `","name":"`...)
		b = call(b, k)
		b = append(b, '\n')
	}
	return b
}

// post posts a turn and checks its answer: 200, completed, one ok result
// per call. It returns the number of truncated results, or the kind of
// failure and a message.
func (r *runner) post(ctx context.Context, path string, body []byte, calls int) (truncated int, kind, msg string) {
	status, got, err := r.send(ctx, path, body)
	if err != nil {
		return failure(err)
	}
	// Most answers are checked by their text (see loadtest.FullCheckEvery),
	// their truncated results counted by it too.
	if status == http.StatusOK && r.checked.Add(1)%loadtest.FullCheckEvery != 0 &&
		loadtest.QuickCheck(got, calls) {
		return bytes.Count(got, []byte(`"truncated":true,`)), "", ""
	}
	if status != http.StatusOK {
		return r.statusFailure(status, got)
	}
	var t client.Turn
	if err := json.Unmarshal(got, &t); err != nil {
		return 0, "bad_answer", "the answer is not a turn: " + err.Error()
	}
	return checkTurn(&t, calls, func() string { return fmt.Sprintf("%.300s", got) })
}

// failure is the kind of failure and message of an error posting a turn.
func failure(err error) (truncated int, kind, msg string) {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return 0, "timeout", err.Error()
	}
	return 0, "transport", err.Error()
}

// statusFailure is the kind of failure and message of an answer of status
// other than 200, whose body is got.
func (r *runner) statusFailure(status int, got []byte) (truncated int, kind, msg string) {
	if status == http.StatusAccepted {
		return 0, "unsettled", fmt.Sprintf("the turn was not settled after a wait of %ds: %.300s", r.w.waitSeconds(), got)
	}
	var p struct {
		Code string `json:"code"`
	}
	kind = "http_" + strconv.Itoa(status)
	if json.Unmarshal(got, &p) == nil && p.Code != "" {
		kind += ":" + p.Code
	}
	return 0, kind, fmt.Sprintf("%.300s", got)
}

// checkTurn checks a decoded answer: completed, one ok result per call. It
// returns the number of truncated results, or the kind of failure and a
// message; answer says what the answer was, for a turn not completed.
func checkTurn(t *client.Turn, calls int, answer func() string) (truncated int, kind, msg string) {
	if t.Status != client.StatusCompleted {
		return 0, "turn_" + t.Status, answer()
	}
	if len(t.Results) != calls {
		return 0, "bad_answer", fmt.Sprintf("%d results for %d calls", len(t.Results), calls)
	}
	for _, res := range t.Results {
		if res.Status != "ok" {
			kind := "call_" + res.Status
			m := "call " + res.CallID + " answered " + res.Status
			if res.Error != nil {
				kind += ":" + res.Error.Code
				m += ": " + res.Error.Message
			}
			return 0, kind, m
		}
		if res.Truncated {
			truncated++
		}
	}
	return truncated, "", ""
}

// send posts body to path and reads the answer. turnd holds the answer
// until the turn settles, waiting for deferred calls included, or the wait
// runs out.
func (r *runner) send(ctx context.Context, path string, body []byte) (int, []byte, error) {
	prefer := "wait=" + strconv.Itoa(r.w.waitSeconds())
	if r.h1 != nil {
		return r.h1.Post(ctx, path, body, nil, "Prefer", prefer)
	}
	req, err := r.request(ctx, path, body)
	if err != nil {
		return 0, nil, err
	}
	if r.w.Streamed {
		req.Header.Set("Content-Type", "application/x-ndjson")
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return 0, nil, fmt.Errorf("reading the answer: %w", err)
	}
	return resp.StatusCode, got, nil
}

// ErrorKinds returns the kinds of errors counted, most frequent first.
func (l Load) ErrorKinds() []string {
	kinds := make([]string, 0, len(l.Errors))
	for k := range l.Errors {
		kinds = append(kinds, k)
	}
	sort.Slice(kinds, func(i, j int) bool {
		if l.Errors[kinds[i]] != l.Errors[kinds[j]] {
			return l.Errors[kinds[i]] > l.Errors[kinds[j]]
		}
		return kinds[i] < kinds[j]
	})
	return kinds
}
