package bench

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Which tools a workload's calls go to.
const (
	// ToolHTTP: the ToolServer's bench_read, bench_write and
	// bench_deferred, which the bench serves itself (turnd's tool config
	// must register them: ToolConfig).
	ToolHTTP = "http"
	// ToolBuiltin: turnd's builtin echo (instant, its output the
	// arguments) and sleep (whole milliseconds) tools, both reads. For a
	// turnd whose tool config lists them and nothing of the bench's.
	ToolBuiltin = "builtin"
)

// Which client posts a workload's turns.
const (
	// ClientTuned writes each body with appends, keeps its connections
	// with a lean HTTP/1.1 client (loadtest.Client) and checks most
	// answers by their text: the least CPU per turn, so that the bench
	// takes little of what it measures.
	ClientTuned = "tuned"
	// ClientOrdinary is a user's program: encoding/json marshals each
	// request (client.TurnRequest, its arguments marshalled per call) and
	// decodes each answer whole (client.Turn), over net/http with the
	// default transport's settings but for enough idle connections to keep
	// one alive per client.
	ClientOrdinary = "ordinary"
)

// Limits of a workload.
const (
	// MaxCalls is turnd's default limit of calls per turn.
	MaxCalls = 128
	// MaxWait is the longest Prefer: wait the bench asks for (turnd's
	// default maximum wait).
	MaxWait = 10 * time.Minute
	// MaxOutputBytes bounds --output-bytes.
	MaxOutputBytes = maxOutputBytes
)

// Workload says what the bench posts.
type Workload struct {
	// Rate, when positive, posts turns open loop: turn i is due at
	// i/Rate seconds into the window whatever the answers' latency, and
	// its latency counts from when it was due. Zero runs closed loop.
	Rate float64
	// Concurrency is the number of closed-loop clients, each posting its
	// next turn when the previous one is answered. With Rate it must be 0.
	Concurrency int
	// MaxInFlight bounds the turns in flight open loop; a turn due while
	// that many are unanswered is not posted and counts as a
	// "client_overload" error. 0 means 1024.
	MaxInFlight int
	// Duration is the length of the window; Turns, when positive, ends
	// it after that many turns instead. Exactly one of them is set.
	Duration time.Duration
	Turns    int
	// Calls is the number of calls per turn (1…MaxCalls).
	Calls int
	// DeferredFraction of the calls (0…1) are deferred; of the others,
	// ReadFraction (0…1) are reads and the rest writes. turnd runs a
	// turn's leading reads at once and the rest one after the other.
	ReadFraction, DeferredFraction float64
	// Latency is how long a read or write call's tool works.
	Latency Dist
	// DeferredDelay is how long after parking a deferred call the tool
	// delivers its result.
	DeferredDelay Dist
	// OutputBytes is the size of every call's output (0: a small JSON
	// object). Over the session's budget (16 KiB by default) it is
	// truncated.
	OutputBytes int64
	// Tools is ToolHTTP or ToolBuiltin.
	Tools string
	// Wait is how long turnd holds each answer for the turn to settle
	// (Prefer: wait, whole seconds, capped by turnd's maximum wait of 10
	// minutes by default); a turn still running or waiting then counts as
	// an "unsettled" error. 0 means MaxWait.
	Wait time.Duration
	// Seed seeds the draws of call kinds and latencies (0: random).
	Seed uint64
	// Streamed posts each turn as a native streamed turn (NDJSON: its
	// header line, then a line per call) instead of one JSON body: the
	// same turns through turnd's stream path.
	Streamed bool
	// Client is ClientTuned ("" too) or ClientOrdinary.
	Client string
	// Completions runs the completion workload (RunCompletions) instead
	// of posting turns: each round parks Parked turns of one deferred call
	// (on the bench's HTTP tool, which hands their keys to the bench), then
	// Concurrency deliverers POST their results to /v1/complete/{key} as
	// fast as turnd answers, while a waiter per turn holds its answer.
	// Calls is 1; Duration and Turns are not used.
	Completions bool
	// Parked is the calls the completion workload parks and delivers a
	// round; 0 means DefaultParked.
	Parked int
}

// DefaultParked is the completion workload's calls a round.
const DefaultParked = 2000

// MaxParked bounds Workload.Parked: each parked turn's waiter holds a
// connection to turnd.
const MaxParked = 8000

// parked is the completion workload's calls a round.
func (w Workload) parked() int {
	if w.Parked == 0 {
		return DefaultParked
	}
	return w.Parked
}

// client is the client that posts w's turns.
func (w Workload) client() string {
	if w.Client == "" {
		return ClientTuned
	}
	return w.Client
}

// closedLoop reports whether w runs closed loop.
func (w Workload) closedLoop() bool { return w.Rate == 0 }

// waitSeconds is the Prefer: wait the bench asks for.
func (w Workload) waitSeconds() int {
	if w.Wait == 0 {
		return int(MaxWait / time.Second)
	}
	return int(w.Wait / time.Second)
}

// maxInFlight is the bound on turns in flight.
func (w Workload) maxInFlight() int {
	if w.closedLoop() {
		return w.Concurrency
	}
	if w.MaxInFlight > 0 {
		return w.MaxInFlight
	}
	return 1024
}

// Validate reports every problem with w, joined.
func (w Workload) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	switch {
	case math.IsNaN(w.Rate) || math.IsInf(w.Rate, 0) || w.Rate < 0:
		bad("rate %v: must be a positive number of turns per second", w.Rate)
	case w.Rate > 0 && w.Concurrency != 0:
		bad("rate and concurrency are exclusive: --rate runs open loop, --concurrency closed loop")
	case w.Rate == 0 && w.Concurrency < 1:
		bad("concurrency %d: must be at least 1 (or give a rate)", w.Concurrency)
	case w.Rate > 1e6:
		bad("rate %v: over a million turns per second is not a load one machine can post", w.Rate)
	}
	if w.Concurrency > 10000 {
		bad("concurrency %d: at most 10000", w.Concurrency)
	}
	if w.MaxInFlight < 0 || w.MaxInFlight > 100000 {
		bad("max in flight %d: must be 0 (default) to 100000", w.MaxInFlight)
	}
	switch {
	case w.Completions:
		w.validateCompletions(bad)
	case w.Duration < 0:
		bad("duration %v: must be positive", w.Duration)
	case w.Turns < 0:
		bad("turns %d: must be positive", w.Turns)
	case w.Duration > 0 && w.Turns > 0:
		bad("duration and turns are exclusive: give one")
	case w.Duration == 0 && w.Turns == 0:
		bad("give a duration or a number of turns")
	}
	if w.Calls < 1 || w.Calls > MaxCalls {
		bad("calls %d: must be 1 to %d", w.Calls, MaxCalls)
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"read fraction", w.ReadFraction}, {"deferred fraction", w.DeferredFraction}} {
		if math.IsNaN(f.v) || f.v < 0 || f.v > 1 {
			bad("%s %v: must be between 0 and 1", f.name, f.v)
		}
	}
	if w.Wait < 0 || w.Wait > MaxWait || (w.Wait > 0 && w.Wait < time.Second) {
		bad("wait %v: must be 1s to %v", w.Wait, MaxWait)
	}
	if w.OutputBytes < 0 || w.OutputBytes > MaxOutputBytes {
		bad("output bytes %d: must be 0 to %d", w.OutputBytes, MaxOutputBytes)
	}
	switch w.Tools {
	case ToolHTTP:
	case ToolBuiltin:
		if w.ReadFraction < 1 {
			bad("read fraction %v: the builtin tools are all reads; use the bench's HTTP tools for writes", w.ReadFraction)
		}
		if w.DeferredFraction > 0 {
			bad("deferred fraction %v: the builtin tools cannot defer; use the bench's HTTP tools", w.DeferredFraction)
		}
		if !w.Latency.IsZero() && w.OutputBytes > 0 {
			bad("with the builtin tools a call has a latency (sleep) or an output size (echo), not both")
		}
	default:
		bad("tools %q: must be %q or %q", w.Tools, ToolHTTP, ToolBuiltin)
	}
	switch w.Client {
	case "", ClientTuned:
	case ClientOrdinary:
		if w.Streamed {
			bad("client ordinary: streamed turns are posted by the tuned client only")
		}
	default:
		bad("client %q: must be %q or %q", w.Client, ClientTuned, ClientOrdinary)
	}
	return errors.Join(errs...)
}

// validateCompletions reports, through bad, what the completion workload
// cannot run with.
func (w Workload) validateCompletions(bad func(string, ...any)) {
	switch {
	case w.Rate > 0:
		bad("completions: deliverers run closed loop; give --concurrency, not --rate")
	case w.Turns > 0:
		bad("completions: give the calls parked a round with --parked, not --turns")
	case w.Tools != ToolHTTP:
		bad("completions: the calls park on the bench's HTTP tool; use --tools http")
	case w.Calls != 1:
		bad("completions: a parked turn has 1 call, not %d", w.Calls)
	case w.Streamed || w.DeferredFraction > 0 || w.OutputBytes > 0:
		bad("completions: its turns are one deferred call each; drop --deferred-fraction, --output-bytes and streaming")
	case w.Client == ClientOrdinary:
		bad("completions: posted by the tuned client only")
	}
	if w.Parked < 0 || w.Parked > MaxParked {
		bad("parked %d: must be 1 to %d", w.Parked, MaxParked)
	}
}
