package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	turnd "github.com/turnd/turnd"
	"github.com/turnd/turnd/completion"
	"github.com/turnd/turnd/turn"
)

// Config configures the HTTP handler. Zero fields take the defaults
// WithDefaults documents.
type Config struct {
	// Service runs the turns. Required.
	Service *turn.Service
	// Tokens are the accepted bearer tokens for /v1. Empty disables
	// authentication (cmd allows that on loopback addresses only).
	Tokens []string
	// Logger receives request errors. Default: discard.
	Logger *slog.Logger
	// MaxBodyBytes limits request bodies. Default 4 MiB.
	MaxBodyBytes int64
	// RetryAfterSeconds is sent with 503 answers. Default 2.
	RetryAfterSeconds int
	// CompletionSigner, when set, requires a valid Standard Webhooks
	// signature on POST /v1/complete/{key} and its heartbeat.
	CompletionSigner *completion.Signer
	// SignatureTolerance is the accepted clock skew of a signature's
	// timestamp. Default 5 minutes.
	SignatureTolerance time.Duration
	// MaxWait bounds how long a synchronous POST of a turn holds the
	// response while the turn runs; after it the answer is 202 with the
	// turn still running. Default 10 minutes.
	MaxWait time.Duration
	// ObserveRequest, when set, is told of every answered request: method,
	// matched route pattern (never the raw path), status and duration
	// (metrics.Metrics.ObserveRequest).
	ObserveRequest func(method, route string, status int, took time.Duration)
	// Metrics, when set, is served on GET /metrics (the Prometheus scrape
	// handler); without it /metrics answers 404. MetricsToken, when set,
	// is the bearer token /metrics requires (see MetricsHandler).
	Metrics      http.Handler
	MetricsToken string
	// RestrictHosts, when set, serves only requests whose Host is a
	// loopback name (localhost, 127.0.0.0/8, [::1]) or one of AllowedHosts,
	// with or without a port: the guard against DNS rebinding for a server
	// on loopback without tokens. Others answer 403 host_not_allowed.
	RestrictHosts bool
	AllowedHosts  []string
	// CORSOrigins are the web origins (scheme://host[:port]) of browser
	// frontends that call turnd directly: their preflights are granted and
	// their answers carry CORS headers. A request with any other Origin
	// than these and the server's own answers 403 origin_not_allowed.
	CORSOrigins []string
	// MaxHeaderBytes limits the request line and headers; larger requests
	// answer 431 headers_too_large. Default 64 KiB. The http.Server's own
	// MaxHeaderBytes must be larger (see ServerMaxHeaderBytes), or net/http
	// answers first, in plain text.
	MaxHeaderBytes int
	// UI, when set, serves the web UI under /ui/ (ui.Handler); /ui
	// redirects there. It sets its own security headers.
	UI http.Handler
	// StreamIdleTimeout is how long a streamed turn's body may go without a
	// byte before the stream counts as broken (422 stream_incomplete).
	// Default 60s.
	StreamIdleTimeout time.Duration
	// StreamMaxDuration caps how long a streamed turn's body may take in
	// all. Default 10 minutes. Both replace the server's ReadTimeout for
	// streamed bodies.
	StreamMaxDuration time.Duration
	// Draining, when set and reporting true, makes /readyz answer 503
	// while every other route still serves: the first step of a graceful
	// shutdown, so that load balancers stop sending before the server stops.
	Draining func() bool
}

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = 4 << 20
	}
	if c.RetryAfterSeconds <= 0 {
		c.RetryAfterSeconds = 2
	}
	if c.SignatureTolerance <= 0 {
		c.SignatureTolerance = completion.DefaultTolerance
	}
	if c.MaxWait <= 0 {
		c.MaxWait = 10 * time.Minute
	}
	if c.MaxHeaderBytes <= 0 {
		c.MaxHeaderBytes = 64 << 10
	}
	if c.StreamIdleTimeout <= 0 {
		c.StreamIdleTimeout = time.Minute
	}
	if c.StreamMaxDuration <= 0 {
		c.StreamMaxDuration = 10 * time.Minute
	}
	return c
}

// ServerMaxHeaderBytes is the MaxHeaderBytes to give the http.Server that
// serves New's handler: above Config.MaxHeaderBytes, so that the handler,
// not net/http, refuses headers over the limit (as a problem). Requests
// beyond it still get net/http's plain-text 431.
const ServerMaxHeaderBytes = 1 << 20

type server struct {
	cfg            Config
	allowedHosts   map[string]bool
	corsOrigins    map[string]bool
	svc            *turn.Service
	log            *slog.Logger
	tokens         [][32]byte
	metricsHandler http.Handler
}

// New returns turnd's HTTP handler.
func New(cfg Config) http.Handler {
	cfg = cfg.WithDefaults()
	s := &server{cfg: cfg, svc: cfg.Service, log: cfg.Logger, allowedHosts: map[string]bool{}, corsOrigins: map[string]bool{}}
	for _, h := range cfg.AllowedHosts {
		if h = hostOnly(strings.TrimSpace(h)); h != "" {
			s.allowedHosts[h] = true
		}
	}
	for _, o := range cfg.CORSOrigins {
		if o = strings.TrimRight(strings.TrimSpace(o), "/"); o != "" {
			s.corsOrigins[o] = true
		}
	}
	if cfg.Metrics != nil {
		s.metricsHandler = MetricsHandler(cfg.Metrics, cfg.MetricsToken)
	}
	for _, t := range cfg.Tokens {
		if t = strings.TrimSpace(t); t != "" {
			s.tokens = append(s.tokens, sha256.Sum256([]byte(t)))
		}
	}
	return s.routes()
}

func (s *server) routes() http.Handler {
	r := chi.NewRouter()
	r.Use(nameSpan, s.observe, s.recoverer, s.guard)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, http.StatusNotFound, "not_found", "no route for "+r.URL.Path)
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, req *http.Request) {
		// RFC 9110 §15.5.6: a 405 lists the methods the resource allows.
		var allowed []string
		for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions} {
			if r.Match(chi.NewRouteContext(), m, req.URL.Path) {
				allowed = append(allowed, m)
			}
		}
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		writeProblem(w, http.StatusMethodNotAllowed, "method_not_allowed", req.Method+" is not allowed on "+req.URL.Path)
	})
	r.Get("/healthz", s.healthz)
	r.Get("/readyz", s.readyz)
	r.Get("/metrics", s.metrics)
	if s.cfg.UI != nil {
		r.Get("/ui", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "/ui/", http.StatusMovedPermanently)
		})
		r.Handle("/ui/*", s.cfg.UI)
	}
	r.Get("/openapi.yaml", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		_, _ = w.Write(turnd.OpenAPI)
	})
	r.Route("/v1", func(r chi.Router) {
		r.Use(s.limitBody)
		r.Group(func(r chi.Router) {
			r.Use(s.authenticate)
			r.Post("/sessions", s.createSession)
			r.Get("/sessions", s.listSessions)
			r.Get("/sessions/{session_id}/turns", s.listTurns)
			r.Get("/pending", s.listPending)
			r.Get("/approvals", s.listApprovals)
			r.Post("/sessions/{session_id}/turns/{turn_id}/calls/{call_id}/decision", s.decide)
			r.Get("/sessions/{session_id}", s.getSession)
			r.With(varyPrefer).Post("/sessions/{session_id}/turns", s.postTurn)
			r.With(varyPrefer).Get("/sessions/{session_id}/turns/{turn_id}", s.getTurn)
			r.Post("/sessions/{session_id}/turns/{turn_id}/cancel", s.cancelTurn)
			r.Get("/sessions/{session_id}/turns/{turn_id}/events", s.turnEvents)
			r.Get("/sessions/{session_id}/turns/{turn_id}/calls", s.turnCalls)
			r.Get("/sessions/{session_id}/ledger", s.getLedger)
			r.Get("/outputs/{output_id}", s.getOutput)
			r.Get("/tools", s.getTools)
		})
		// The completion endpoints authenticate by their key (and, when a
		// signing secret is configured, a Standard Webhooks signature).
		r.Post("/complete/{key}", s.complete)
		r.Get("/complete/{key}", s.completionStatus)
		r.Post("/complete/{key}/heartbeat", s.heartbeat)
		r.Post("/complete/{key}/progress", s.completeProgress)
	})
	return r
}

// varyPrefer marks answers that depend on the Prefer header (respond-async,
// wait): caches must not serve one request's answer to another's.
func varyPrefer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Vary", "Prefer")
		next.ServeHTTP(w, r)
	})
}

// authenticate requires one of the configured bearer tokens. Tokens are
// compared as SHA-256 digests in constant time, against every configured
// token, so neither a token's content nor its length leaks through timing.
func (s *server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(s.tokens) == 0 {
			next.ServeHTTP(w, r)
			return
		}
		ok := 0
		if got, present := bearer(r); present {
			for i := range s.tokens {
				ok |= subtle.ConstantTimeCompare(got[:], s.tokens[i][:])
			}
		}
		if ok != 1 {
			s.writeError(w, r, errHTTP(http.StatusUnauthorized, "unauthorized", "a valid bearer token is required"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// recoverer turns a handler panic into a 500 problem (and a log line with
// the stack) instead of a dropped connection.
func (s *server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.ErrorContext(r.Context(), "handler panic", "method", r.Method, "route", routeOf(r), "panic", v, "stack", string(debug.Stack()))
				writeProblem(w, http.StatusInternalServerError, "internal", "internal error")
			}
		}()
		next.ServeHTTP(w, r)
	})
}

func (s *server) limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > s.cfg.MaxBodyBytes {
			s.writeError(w, r, errBodyTooLarge(s.cfg.MaxBodyBytes))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
		next.ServeHTTP(w, r)
	})
}

func (s *server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *server) readyz(w http.ResponseWriter, r *http.Request) {
	err := s.svc.Ready(r.Context())
	if err == nil && s.cfg.Draining != nil && s.cfg.Draining() {
		err = turn.ErrShuttingDown
	}
	if err != nil {
		if !errors.Is(err, turn.ErrShuttingDown) {
			s.log.WarnContext(r.Context(), "not ready", "err", err)
		}
		w.Header().Set("Retry-After", strconv.Itoa(s.cfg.RetryAfterSeconds))
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}
