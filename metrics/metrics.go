package metrics

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/turnd/turnd/turn"
)

// The metric families turnd exports, besides the Go and process collectors'.
const (
	DispatchDuration    = "turnd_dispatch_duration_seconds"
	AttemptDuration     = "turnd_tool_attempt_duration_seconds"
	CallsTotal          = "turnd_calls_total"
	CallsInFlight       = "turnd_calls_in_flight"
	WaveSize            = "turnd_wave_size"
	TurnDuration        = "turnd_turn_duration_seconds"
	TurnsTotal          = "turnd_turns_total"
	PendingCalls        = "turnd_pending_calls"
	CompletionsTotal    = "turnd_completions_total"
	TruncationsTotal    = "turnd_budget_truncations_total"
	DroppedBytesTotal   = "turnd_budget_dropped_bytes_total"
	StoreDuration       = "turnd_store_duration_seconds"
	WebhooksTotal       = "turnd_webhook_deliveries_total"
	HTTPRequestsTotal   = "turnd_http_requests_total"
	HTTPRequestDuration = "turnd_http_request_duration_seconds"
	StreamedTurnsTotal  = "turnd_streamed_turns_total"
	EarlyCallsTotal     = "turnd_early_calls_total"
	EarlyLead           = "turnd_early_lead_seconds"
	BuildInfo           = "turnd_build_info"
)

var turndNames = []string{
	DispatchDuration, AttemptDuration, CallsTotal, CallsInFlight, WaveSize,
	TurnDuration, TurnsTotal, PendingCalls, CompletionsTotal, TruncationsTotal,
	DroppedBytesTotal, StoreDuration, WebhooksTotal, HTTPRequestsTotal, HTTPRequestDuration,
	StreamedTurnsTotal, EarlyCallsTotal, EarlyLead, BuildInfo,
}

// Names returns the names of the metric families turnd exports, sorted:
// its own and those of the Go and process collectors (which depend on the
// Go version and the platform). A histogram family X is scraped as the
// series X_bucket, X_sum and X_count.
func Names() []string {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	names := slices.Clone(turndNames)
	if mfs, err := reg.Gather(); err == nil {
		for _, mf := range mfs {
			names = append(names, mf.GetName())
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// Buckets of the classic histograms, in seconds (or calls for the wave).
var (
	latencyBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}
	storeBuckets   = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 5}
	turnBuckets    = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 86400}
	httpBuckets    = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 600}
	waveBuckets    = []float64{1, 2, 4, 8, 16, 32, 64, 128, 256}
)

// Options configures New.
type Options struct {
	// PendingCount counts the calls parked on a completion key in the whole
	// store (turn.CompletionStore.PendingCount); it backs turnd_pending_calls,
	// which is then right across replicas and restarts. Nil leaves the
	// gauge out.
	PendingCount func(ctx context.Context) (int64, error)
	// PendingTTL is how long a count is reused before a scrape queries the
	// store again, so that many scrapers (or replicas scraped together) do
	// not each cost a query. Default 5s; a negative value queries on every
	// scrape.
	PendingTTL time.Duration
	// PendingTimeout bounds the count query of a scrape. Default 2s.
	PendingTimeout time.Duration
	// Runtime registers the Go and process collectors. cmd sets it; tests
	// that compare whole scrapes leave it off.
	Runtime bool
	// Build, when set, is exported as turnd_build_info{version, revision,
	// goversion} 1.
	Build *Build
}

// Build identifies the running binary.
type Build struct {
	Version, Revision, GoVersion string
}

// Metrics is turnd's metrics on one registry. It implements turn.Observer
// and observes HTTP requests and store calls; build it with New.
type Metrics struct {
	dispatch    *prometheus.HistogramVec
	attempt     *prometheus.HistogramVec
	calls       *prometheus.CounterVec
	inFlight    *prometheus.GaugeVec
	waveSize    prometheus.Histogram
	turnTime    *prometheus.HistogramVec
	turns       *prometheus.CounterVec
	completions *prometheus.CounterVec
	truncations *prometheus.CounterVec
	dropped     prometheus.Counter
	store       *prometheus.HistogramVec
	webhooks    *prometheus.CounterVec
	requests    *prometheus.CounterVec
	requestTime *prometheus.HistogramVec
	streamed    *prometheus.CounterVec
	early       *prometheus.CounterVec
	earlyLead   prometheus.Histogram

	// Caches of the children the hot path touches (series.go).
	callS     *series[[2]string, callSeries]
	attemptS  *series[[2]string, attemptSeries]
	inFlightS *series[string, prometheus.Gauge]
	requestS  *series[requestKey, requestSeries]
}

var (
	_ turn.Observer       = (*Metrics)(nil)
	_ turn.StreamObserver = (*Metrics)(nil)
)

// New registers turnd's metrics on reg (built in cmd: nothing registers
// globally) and returns them.
func New(reg prometheus.Registerer, o Options) (*Metrics, error) {
	m := &Metrics{}
	m.newCallFamilies()
	m.newTurnFamilies()
	m.newServingFamilies()
	m.cacheSeries()
	for _, c := range m.collectors(o) {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	m.zeroSeries()
	return m, nil
}

// newCallFamilies makes the families of calls, their attempts and waves.
func (m *Metrics) newCallFamilies() {
	m.dispatch = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: DispatchDuration,
		Help: "Time from a call's admission to the accounting of its result, by tool and result status.",
		// Also a native histogram, for scrapers that negotiate the
		// protobuf format; the classic buckets stay for the others.
		Buckets:                         latencyBuckets,
		NativeHistogramBucketFactor:     1.1,
		NativeHistogramMaxBucketNumber:  160,
		NativeHistogramMinResetDuration: time.Hour,
	}, []string{"tool", "outcome"})
	m.attempt = histogramVec(AttemptDuration, "Time one attempt of a tool took, by tool and the attempt's status.", latencyBuckets, "tool", "outcome")
	m.calls = counterVec(CallsTotal, "Calls accounted, by tool and result status.", "tool", "outcome")
	m.inFlight = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: CallsInFlight,
		Help: "Tool attempts running in this process, by tool.",
	}, []string{"tool"})
	m.waveSize = histogram(WaveSize, "Calls in each wave started (new and resumed turns).", waveBuckets)
}

// newTurnFamilies makes the families of turns, completions, the budget,
// streamed turns and early reads.
func (m *Metrics) newTurnFamilies() {
	m.turnTime = histogramVec(TurnDuration, "Time from a turn's receipt to its settlement, by settled status.", turnBuckets, "status")
	m.turns = counterVec(TurnsTotal, "Turns settled by this process, by settled status.", "status")
	m.completions = counterVec(CompletionsTotal, "Deliveries to completion keys by what they came to, and parked calls timed out or cancelled.", "result")
	m.truncations = counterVec(TruncationsTotal, "Outputs the budget truncated, by the unit its marker counts.", "unit")
	m.dropped = prometheus.NewCounter(prometheus.CounterOpts{
		Name: DroppedBytesTotal,
		Help: "Bytes of outputs left out of the previews the model got.",
	})
	m.streamed = counterVec(StreamedTurnsTotal, "Streamed turns by format and how their stream ended (completed, incomplete, replayed).", "format", "outcome")
	m.early = counterVec(EarlyCallsTotal, "Reads started while the model was generating, by whether their turn used the result or discarded it.", "outcome")
	m.earlyLead = histogram(EarlyLead, "How long before its stream ended each used early result was ready (0 when it was not ready yet).", latencyBuckets)
}

// newServingFamilies makes the families of the store, webhooks and HTTP
// requests.
func (m *Metrics) newServingFamilies() {
	m.store = histogramVec(StoreDuration, "Time of each store operation, by operation.", storeBuckets, "op")
	m.webhooks = counterVec(WebhooksTotal, "Webhook delivery attempts recorded, by result (delivered, retry, dead).", "result")
	m.requests = counterVec(HTTPRequestsTotal, "HTTP requests served, by method, route pattern and status code.", "method", "route", "code")
	m.requestTime = histogramVec(HTTPRequestDuration, "Time to serve HTTP requests, by method, route pattern and status code.", httpBuckets, "method", "route", "code")
}

// counterVec makes a family of counters with labels.
func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

// histogram makes a classic histogram without labels.
func histogram(name, help string, buckets []float64) prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
}

// histogramVec makes a family of classic histograms with labels.
func histogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
}

// cacheSeries makes the caches of the children the hot path touches.
func (m *Metrics) cacheSeries() {
	m.callS = newSeries(func(k [2]string) callSeries {
		return callSeries{dispatch: m.dispatch.WithLabelValues(k[0], k[1]), calls: m.calls.WithLabelValues(k[0], k[1])}
	})
	m.attemptS = newSeries(func(k [2]string) attemptSeries {
		return attemptSeries{inFlight: m.inFlight.WithLabelValues(k[0]), attempt: m.attempt.WithLabelValues(k[0], k[1])}
	})
	m.inFlightS = newSeries(func(tool string) prometheus.Gauge { return m.inFlight.WithLabelValues(tool) })
	m.requestS = newSeries(func(k requestKey) requestSeries {
		c := statusCode(k.code)
		return requestSeries{
			requests:    m.requests.WithLabelValues(k.method, k.route, c),
			requestTime: m.requestTime.WithLabelValues(k.method, k.route, c),
		}
	})
}

// collectors returns every collector New registers, in order: m's
// families, then those o asks for.
func (m *Metrics) collectors(o Options) []prometheus.Collector {
	cs := []prometheus.Collector{
		m.dispatch, m.attempt, m.calls, m.inFlight, m.waveSize, m.turnTime, m.turns,
		m.completions, m.truncations, m.dropped, m.store, m.webhooks, m.requests, m.requestTime,
		m.streamed, m.early, m.earlyLead,
	}
	if o.PendingCount != nil {
		cs = append(cs, newPendingCollector(o))
	}
	if b := o.Build; b != nil {
		info := prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: BuildInfo,
			Help: "Always 1; its labels name the running turnd's version, VCS revision and Go version.",
		}, []string{"version", "revision", "goversion"})
		info.WithLabelValues(b.Version, b.Revision, b.GoVersion).Set(1)
		cs = append(cs, info)
	}
	if o.Runtime {
		cs = append(cs, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	return cs
}

// zeroSeries makes the series of every known label value exist from the
// start at zero, so that rates and alerts see the first event.
func (m *Metrics) zeroSeries() {
	for _, r := range []turn.CompletionResult{turn.CompletionAccepted, turn.CompletionDuplicate, turn.CompletionConflict,
		turn.CompletionUnknown, turn.CompletionLate, turn.CompletionExpired, turn.CompletionAborted} {
		m.completions.WithLabelValues(string(r))
	}
	for _, s := range []turn.Status{turn.StatusCompleted, turn.StatusFailed, turn.StatusCancelled} {
		m.turns.WithLabelValues(string(s))
	}
	for _, o := range []turn.WebhookOutcome{turn.WebhookDelivered, turn.WebhookRetry, turn.WebhookDead} {
		m.webhooks.WithLabelValues(string(o))
	}
	m.early.WithLabelValues("used")
	m.early.WithLabelValues("discarded")
}

// Handler serves the registry's metrics in the format the scraper asks for
// (text, OpenMetrics, or protobuf with native histograms).
func Handler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{EnableOpenMetrics: true})
}

// WaveStarted implements turn.Observer.
func (m *Metrics) WaveStarted(calls int) { m.waveSize.Observe(float64(calls)) }

// CallAccounted implements turn.Observer.
func (m *Metrics) CallAccounted(tool string, status turn.CallStatus, took time.Duration) {
	c := m.callS.of([2]string{tool, string(status)})
	c.dispatch.Observe(took.Seconds())
	c.calls.Inc()
}

// AttemptStarted implements turn.Observer.
func (m *Metrics) AttemptStarted(tool string) { m.inFlightS.of(tool).Inc() }

// AttemptFinished implements turn.Observer.
func (m *Metrics) AttemptFinished(tool, outcome string, took time.Duration) {
	a := m.attemptS.of([2]string{tool, outcome})
	a.inFlight.Dec()
	a.attempt.Observe(took.Seconds())
}

// TurnSettled implements turn.Observer.
func (m *Metrics) TurnSettled(status turn.Status, took time.Duration) {
	m.turns.WithLabelValues(string(status)).Inc()
	m.turnTime.WithLabelValues(string(status)).Observe(took.Seconds())
}

// Completion implements turn.Observer.
func (m *Metrics) Completion(result turn.CompletionResult) {
	m.completions.WithLabelValues(string(result)).Inc()
}

// Truncated implements turn.Observer.
func (m *Metrics) Truncated(unit string, dropped int64) {
	m.truncations.WithLabelValues(unit).Inc()
	if dropped > 0 {
		m.dropped.Add(float64(dropped))
	}
}

// WebhookAttempt implements turn.Observer.
func (m *Metrics) WebhookAttempt(outcome turn.WebhookOutcome) {
	m.webhooks.WithLabelValues(string(outcome)).Inc()
}

// StreamedTurn implements turn.StreamObserver.
func (m *Metrics) StreamedTurn(format string, outcome turn.StreamOutcome) {
	m.streamed.WithLabelValues(format, string(outcome)).Inc()
}

// EarlyCall implements turn.StreamObserver.
func (m *Metrics) EarlyCall(used bool, lead time.Duration) {
	if !used {
		m.early.WithLabelValues("discarded").Inc()
		return
	}
	m.early.WithLabelValues("used").Inc()
	m.earlyLead.Observe(lead.Seconds())
}

// ObserveRequest records one HTTP request (api.Config.ObserveRequest).
// route is the matched route pattern, never the raw path.
func (m *Metrics) ObserveRequest(method, route string, code int, took time.Duration) {
	r := m.requestS.of(requestKey{knownMethod(method), route, code})
	r.requests.Inc()
	r.requestTime.Observe(took.Seconds())
}

// knownMethod bounds the method label: a client may send any token as a
// method (answered 405), and each would be a new series.
func knownMethod(m string) string {
	switch m {
	case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete,
		http.MethodHead, http.MethodOptions:
		return m
	}
	return "other"
}

// statusCode formats the usual codes without an allocation.
func statusCode(code int) string {
	switch code {
	case 200:
		return "200"
	case 201:
		return "201"
	case 202:
		return "202"
	case 204:
		return "204"
	case 400:
		return "400"
	case 401:
		return "401"
	case 404:
		return "404"
	case 409:
		return "409"
	case 410:
		return "410"
	case 500:
		return "500"
	case 503:
		return "503"
	}
	if code < 100 || code > 999 {
		return "other"
	}
	return string([]byte{byte('0' + code/100), byte('0' + code/10%10), byte('0' + code%10)})
}

// pendingCollector reports turnd_pending_calls from the store at scrape
// time, reusing a count for PendingTTL.
type pendingCollector struct {
	desc    *prometheus.Desc
	count   func(context.Context) (int64, error)
	ttl     time.Duration
	timeout time.Duration

	mu    sync.Mutex
	value int64
	at    time.Time // zero until a count succeeded
}

func newPendingCollector(o Options) *pendingCollector {
	c := &pendingCollector{
		desc:    prometheus.NewDesc(PendingCalls, "Calls parked on a completion key in the whole store (every replica's), counted at scrape time.", nil, nil),
		count:   o.PendingCount,
		ttl:     o.PendingTTL,
		timeout: o.PendingTimeout,
	}
	if c.ttl == 0 {
		c.ttl = 5 * time.Second
	}
	if c.timeout <= 0 {
		c.timeout = 2 * time.Second
	}
	return c
}

func (c *pendingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect counts anew when the last count is older than the TTL. When the
// store cannot answer, the last count is reported if there is one; with
// none the gauge is left out rather than reported as a false zero (the
// store's failure shows in turnd_store_duration_seconds and /readyz).
func (c *pendingCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at.IsZero() || time.Since(c.at) >= c.ttl {
		ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
		n, err := c.count(ctx)
		cancel()
		if err == nil {
			c.value, c.at = n, time.Now()
		}
	}
	if c.at.IsZero() {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(c.value))
}
