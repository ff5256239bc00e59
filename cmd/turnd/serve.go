package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/lmittmann/tint"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/turnd/turnd/api"
	"github.com/turnd/turnd/completion"
	"github.com/turnd/turnd/metrics"
	"github.com/turnd/turnd/store/postgres"
	"github.com/turnd/turnd/store/sqlite"
	"github.com/turnd/turnd/tool"
	"github.com/turnd/turnd/turn"
	"github.com/turnd/turnd/ui"
)

func newLogger(c config, w io.Writer) *slog.Logger {
	level := slog.LevelInfo
	_ = level.UnmarshalText([]byte(c.LogLevel))
	terminal := false
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			terminal = true
		}
	}
	format := c.LogFormat
	if format == "auto" {
		format = "json"
		if terminal {
			format = "text"
		}
	}
	// Records logged with a request's context carry its request id. Text
	// written to a file or a pipe carries no colour escapes.
	if format == "text" {
		return slog.New(api.LogHandler(tint.NewHandler(w, &tint.Options{Level: level, TimeFormat: time.TimeOnly, NoColor: !terminal})))
	}
	return slog.New(api.LogHandler(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level})))
}

func openStore(ctx context.Context, c config, log *slog.Logger) (turn.MigratedStore, error) {
	if c.DatabaseURL != "" {
		st, err := postgres.Open(ctx, c.DatabaseURL, postgres.Options{NotifyURL: c.NotifyDatabaseURL, Sharded: c.Citus})
		if err != nil {
			return nil, fmt.Errorf("opening Postgres: %w", err)
		}
		log.Info("store: Postgres")
		return st, nil
	}
	if c.Citus || c.NotifyDatabaseURL != "" {
		return nil, usageError{"--citus and --notify-database-url need a Postgres database (DATABASE_URL)"}
	}
	st, err := sqlite.Open(ctx, c.DataPath)
	if err != nil {
		return nil, fmt.Errorf("opening embedded store %s: %w", c.DataPath, err)
	}
	log.Info("store: embedded SQLite (one process only; set DATABASE_URL for Postgres and replicas)", "path", c.DataPath)
	return st, nil
}

// serveGCPercent is the garbage collector's target while serving, unless
// GOGC is set: a collection when the heap has grown by four times what was
// live after the last one, instead of Go's default of once. turnd's live heap
// is small (a few MiB of sessions, registries and in-flight turns) and
// every turn allocates a little, so at the default the collector runs many
// times a second under load; at 400 it ran a fifth as often and turnd used
// about a fifth less CPU per turn, for a resident size under load of about
// 60 MiB instead of 40 (idle: about 23 MiB either way). GOGC=100 restores
// Go's default; GOMEMLIMIT caps the heap whatever the target.
const serveGCPercent = 400

// serveMemoryLimit is the floor of the Go runtime's soft memory limit while
// serving, unless GOMEMLIMIT is set (memlimit.go). At GOGC=400 a burst of
// large bodies (late deliveries of 256 KiB, for instance) let the heap grow
// to five times what was live, over 400 MiB in the chaos suite; near the
// limit the collector runs sooner instead. Under ordinary load turnd stays
// far below it (about 60 MiB), where it changes nothing. Goroutine stacks
// are added to it (memoryLimitFor).
const serveMemoryLimit = 192 << 20

// serve runs turnd until ctx ends: it builds everything (tools, store,
// service, HTTP servers), serves, and shuts down in reverse order.
func serve(ctx context.Context, c config, stderr io.Writer) error {
	log := newLogger(c, stderr)
	defer tuneRuntime(c)()
	logStartWarnings(c, log)
	if err := checkTokens(c); err != nil {
		return err
	}
	if len(c.Tokens) == 0 {
		log.Warn("no API tokens configured: serving without authentication, on loopback only", "addr", c.Addr)
	}
	tel, err := newTelemetry(ctx, c.Tracing, nil)
	if err != nil {
		return err
	}
	defer flushTraces(tel, log)
	tools, stopReload, err := openTools(ctx, c, log, tel.toolClient())
	if err != nil {
		return fmt.Errorf("loading tool config: %w", err)
	}
	defer tools.Close()
	defer stopReload()

	st, err := openCurrentStore(ctx, c, log)
	if err != nil {
		return err
	}
	defer st.Close()
	// cancels carries cancel_url requests off the service's goroutines; they
	// are best effort with retries inside CancelExternal.
	cancelCtx, stopCancels := context.WithCancel(context.Background())
	defer stopCancels()
	srv, err := newServer(ctx, c, log, st, tools, cancelCtx, tel)
	if err != nil {
		return err
	}
	return srv.run(ctx)
}

// tuneRuntime sets the garbage collector's target and the soft memory
// limit to turnd's defaults, unless GOGC and GOMEMLIMIT are set; stop ends
// the limit's governing (governMemory).
func tuneRuntime(c config) (stop func()) {
	if !c.KeepGC {
		debug.SetGCPercent(serveGCPercent)
	}
	if c.GOMEMLIMIT != "" {
		return func() {}
	}
	_, stop = governMemory(serveMemoryLimit)
	return stop
}

// logStartWarnings logs what an operator should know about the settings:
// demo mode and deprecated variables.
func logStartWarnings(c config, log *slog.Logger) {
	if c.Demo {
		log.Warn("demo mode: the approval tool shows each call's complete_url, which carries its completion key, in the log and as the parked call's output; never run a deployment with --demo")
	}
	for _, d := range c.Deprecated {
		log.Warn("a deprecated environment variable is set; use the new name", "old", d[0], "new", d[1])
	}
}

// openCurrentStore opens the store and migrates it (unless --no-migrate);
// it fails when the schema is still behind this turnd.
func openCurrentStore(ctx context.Context, c config, log *slog.Logger) (turn.MigratedStore, error) {
	st, err := openStore(ctx, c, log)
	if err != nil {
		return nil, err
	}
	if err := checkSchema(ctx, c, st); err != nil {
		st.Close()
		return nil, err
	}
	return st, nil
}

// checkSchema migrates st unless --no-migrate and fails when its schema is
// behind this turnd.
func checkSchema(ctx context.Context, c config, st turn.MigratedStore) error {
	if !c.NoMigrate {
		if err := st.Migrate(ctx); err != nil {
			return fmt.Errorf("migrating at start: %w", err)
		}
	}
	cur, latest, err := st.SchemaVersion(ctx)
	if err != nil {
		return fmt.Errorf("reading schema version: %w", err)
	}
	if cur < latest {
		return fmt.Errorf("the database schema is at version %d, this turnd needs %d: run `turnd migrate`", cur, latest)
	}
	return nil
}

// server is a built turnd, ready to listen: the service, its metrics and
// the HTTP server in front of it.
type server struct {
	c        config
	log      *slog.Logger
	svc      *turn.Service
	promReg  *prometheus.Registry
	http     *http.Server
	draining *atomic.Bool // /readyz answers 503 once set
	tel      *telemetry
}

// newServer builds the metrics, the turn service (started) and the HTTP
// server of a turnd on store st with the given tools; cancelCtx bounds the
// cancel_url requests the service makes.
func newServer(ctx context.Context, c config, log *slog.Logger, st turn.MigratedStore, tools *tool.Live, cancelCtx context.Context, tel *telemetry) (*server, error) {
	webhookSigner, completionSigner, err := signers(c, log)
	if err != nil {
		return nil, err
	}
	// One registry for the process, passed down: nothing registers globally.
	promReg := prometheus.NewRegistry()
	v, rev, goVersion := thisBuild()
	m, err := metrics.New(promReg, metrics.Options{PendingCount: st.PendingCount, Runtime: true,
		Build: &metrics.Build{Version: v, Revision: rev, GoVersion: goVersion}})
	if err != nil {
		return nil, fmt.Errorf("registering metrics: %w", err)
	}
	svc, err := newService(ctx, c, log, st, m, tools, webhookSigner, cancelCtx, tel)
	if err != nil {
		return nil, err
	}
	if err := svc.Start(ctx); err != nil {
		return nil, err
	}
	s := &server{c: c, log: log, svc: svc, promReg: promReg, draining: new(atomic.Bool), tel: tel}
	s.http = s.newHTTPServer(m, completionSigner)
	return s, nil
}

// signers makes the signers of turn.settled webhooks and of completion
// deliveries; either is nil when its secret is not set.
func signers(c config, log *slog.Logger) (webhook, completions *completion.Signer, err error) {
	if c.WebhookSecret != "" {
		if webhook, err = completion.NewSigner(c.WebhookSecret); err != nil {
			return nil, nil, fmt.Errorf("TURND_WEBHOOK_SIGNING_SECRET: %w", err)
		}
	} else {
		log.Info("TURND_WEBHOOK_SIGNING_SECRET is not set: turn.settled webhooks to sessions' callback URLs go out unsigned")
	}
	if c.CompletionSigningSecret != "" {
		if completions, err = completion.NewSigner(c.CompletionSigningSecret); err != nil {
			return nil, nil, fmt.Errorf("TURND_COMPLETION_SIGNING_SECRET: %w", err)
		}
	}
	return webhook, completions, nil
}

// newService makes the turn service (not started) on store st, observed
// by m; a turn's cancellation calls its tools' cancel_url within cancelCtx.
func newService(ctx context.Context, c config, log *slog.Logger, st turn.MigratedStore, m *metrics.Metrics,
	tools *tool.Live, webhookSigner *completion.Signer, cancelCtx context.Context, tel *telemetry) (*turn.Service, error) {
	// Replicas on one Postgres tell each other about turn changes; the
	// embedded store serves one process and needs no notifier.
	var notifier turn.Notifier
	if pg, ok := st.(*postgres.Store); ok {
		n, err := postgres.NewNotifier(ctx, pg, postgres.NotifierOptions{Logger: log})
		if err != nil {
			return nil, err
		}
		notifier = n
	}
	return turn.New(turn.Config{
		Store:            m.Store(st),
		Observer:         m,
		Notifier:         notifier,
		Tools:            tools.Registry,
		Logger:           log,
		TracerProvider:   tel.provider(),
		Propagator:       tel.prop,
		TraceContent:     c.Tracing.Content,
		LeaseTTL:         c.LeaseTTL,
		MaxCalls:         c.MaxCalls,
		CompletionSecret: c.CompletionSecret,
		// Signs the turn.settled webhooks POSTed to sessions' callback URLs;
		// without TURND_WEBHOOK_SIGNING_SECRET they go out unsigned.
		WebhookSigner:  webhookSigner,
		CallbackPolicy: turn.CallbackPolicy{Allow: c.CallbackAllowNets, Deny: c.CallbackDenyNets},
		CompleteURL:    func(key string) string { return c.PublicURL + "/v1/complete/" + key },
		CancelHook: func(cp turn.Completion, key string) {
			go func() {
				err := tools.Registry().CancelExternal(cancelCtx, cp.CallName, tool.CancelRequest{
					Key: key, SessionID: cp.SessionID, TurnID: cp.TurnID, CallID: cp.CallID,
				}, webhookSigner)
				if err != nil {
					log.Warn("cancelling external work failed", "session_id", cp.SessionID, "turn_id", cp.TurnID, "call_id", cp.CallID, "err", err)
				}
			}()
		},
	})
}

// newHTTPServer is the API's HTTP server (not listening yet).
func (s *server) newHTTPServer(m *metrics.Metrics, completionSigner *completion.Signer) *http.Server {
	c := s.c
	acfg := api.Config{
		Service:          s.svc,
		Tokens:           c.Tokens,
		Logger:           s.log,
		MaxBodyBytes:     c.MaxBodyBytes,
		CompletionSigner: completionSigner,
		// A streamed turn's body has deadlines of its own, which replace
		// the server's ReadTimeout and extend its WriteTimeout.
		StreamIdleTimeout: c.StreamIdleTimeout,
		StreamMaxDuration: c.StreamMaxDuration,
		ObserveRequest:    m.ObserveRequest,
		MetricsToken:      c.MetricsToken,
		Draining:          s.draining.Load,
		// On loopback without tokens any web page could otherwise reach
		// turnd through a rebound DNS name; --allowed-hosts restricts too.
		RestrictHosts: (len(c.Tokens) == 0 && isLoopback(c.Addr)) || len(c.AllowedHosts) > 0,
		AllowedHosts:  servedHosts(c),
		CORSOrigins:   c.CORSOrigins,
	}
	if c.MetricsAddr == "" {
		acfg.Metrics = metrics.Handler(s.promReg)
	}
	if c.UI {
		acfg.UI = ui.Handler()
	}
	return &http.Server{
		Addr:              c.Addr,
		Handler:           s.tel.handler(api.New(acfg)),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		// A synchronous POST of a turn holds its response while the turn
		// runs (up to api.Config.MaxWait, 10 minutes).
		WriteTimeout: 11 * time.Minute,
		IdleTimeout:  2 * time.Minute,
		// Above api.Config.MaxHeaderBytes (64 KiB), so that the handler
		// refuses large headers as a problem before net/http does in text.
		MaxHeaderBytes: api.ServerMaxHeaderBytes,
		ErrorLog:       slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
}

// run listens and serves until ctx ends or a listener fails, then shuts
// down: see shutdown. The service is shut down on every path.
func (s *server) run(ctx context.Context) error {
	c := s.c
	ln, err := net.Listen("tcp", c.Addr)
	if err != nil {
		_ = s.svc.Shutdown(context.Background())
		return fmt.Errorf("listening on %s: %w", c.Addr, err)
	}
	s.logServing(ln.Addr().String())
	errc := make(chan error, 2)
	go func() { errc <- s.http.Serve(ln) }()
	var metricsSrv *http.Server
	if c.MetricsAddr != "" {
		if metricsSrv, err = serveMetrics(c, s.promReg, s.log, errc); err != nil {
			_ = s.http.Close()
			_ = s.svc.Shutdown(context.Background())
			return err
		}
	}
	select {
	case err := <-errc:
		_ = s.http.Close()
		_ = s.svc.Shutdown(context.Background())
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	s.shutdown(errc, metricsSrv)
	return nil
}

// logServing logs the address served and the runtime's memory settings.
func (s *server) logServing(addr string) {
	c := s.c
	gomemlimit := c.GOMEMLIMIT
	if gomemlimit == "" {
		gomemlimit = fmt.Sprintf("%dMiB or more, following what turnd holds (turnd's default; GOMEMLIMIT overrides it)", serveMemoryLimit>>20)
	}
	gogc, gogcFrom := fmt.Sprint(serveGCPercent), "turnd's default (GOGC overrides it)"
	if c.KeepGC {
		gogc, gogcFrom = c.GOGC, "GOGC"
	}
	v, rev, _ := thisBuild()
	s.log.Info("turnd serving", "addr", addr, "version", v, "revision", rev,
		"gogc", gogc, "gogc_from", gogcFrom, "gomemlimit", gomemlimit)
}

// shutdown drains: /readyz fails at once, everything else serves for the
// shutdown delay; then the service and the HTTP server stop within the
// grace, and the metrics server last. A listener failure on errc during
// the delay is logged.
func (s *server) shutdown(errc <-chan error, metricsSrv *http.Server) {
	c, log := s.c, s.log
	log.Info("shutting down", "grace", c.ShutdownGrace, "delay", c.ShutdownDelay)
	// For the delay load balancers take the replica out before it stops
	// taking requests. A second signal ends the process (see main).
	s.draining.Store(true)
	if c.ShutdownDelay > 0 {
		t := time.NewTimer(c.ShutdownDelay)
		select {
		case <-t.C:
		case err := <-errc:
			log.Warn("a listener failed while draining", "err", err)
		}
		t.Stop()
	}
	graceCtx, cancel := context.WithTimeout(context.Background(), c.ShutdownGrace)
	defer cancel()
	// The service stops taking turns first and lets running waves finish
	// within the grace; the HTTP server meanwhile drains its requests,
	// which end when their waves do.
	svcDone := make(chan error, 1)
	go func() { svcDone <- s.svc.Shutdown(graceCtx) }()
	httpCtx, cancelHTTP := context.WithTimeout(context.Background(), c.ShutdownGrace+5*time.Second)
	defer cancelHTTP()
	if err := s.http.Shutdown(httpCtx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		log.Warn("http shutdown", "err", err)
	}
	if err := <-svcDone; err != nil {
		log.Warn("waves cancelled at the end of the grace period", "err", err)
	}
	// Metrics are scraped until the end, then the store closes (serve's
	// defer).
	if metricsSrv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = metricsSrv.Shutdown(ctx)
		cancel()
	}
	log.Info("stopped")
}

// serveMetrics serves /metrics (guarded by the metrics token, if any) on
// the metrics address; a failure of its Serve goes to errc.
func serveMetrics(c config, g prometheus.Gatherer, log *slog.Logger, errc chan<- error) (*http.Server, error) {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", api.MetricsHandler(metrics.Handler(g), c.MetricsToken))
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	ln, err := net.Listen("tcp", c.MetricsAddr)
	if err != nil {
		return nil, fmt.Errorf("listening on the metrics address %s: %w", c.MetricsAddr, err)
	}
	if c.MetricsToken == "" && !isLoopback(c.MetricsAddr) {
		log.Info("metrics served without a token; set TURND_METRICS_TOKEN to require one", "metrics_addr", c.MetricsAddr)
	}
	log.Info("metrics serving", "metrics_addr", ln.Addr().String())
	go func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("metrics listener: %w", err)
		}
	}()
	return srv, nil
}

// servedHosts is the Host names served besides the loopback ones: those
// configured and the public URL's, which external systems post
// completions to (through a tunnel to a loopback turnd, for instance).
func servedHosts(c config) []string {
	hosts := append([]string(nil), c.AllowedHosts...)
	if u, err := url.Parse(c.PublicURL); err == nil && u.Hostname() != "" {
		hosts = append(hosts, u.Hostname())
	}
	return hosts
}
