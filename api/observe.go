package api

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
)

// HeaderRequestID carries a request's id: taken from the request when it
// is a valid one (see validRequestID), else generated, and always returned.
const HeaderRequestID = "X-Request-Id"

type ctxKey int

const requestIDKey ctxKey = 0

// RequestID returns the id of the request whose context ctx is (or
// derives from), or "".
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey).(string)
	return id
}

// maxRequestID bounds an accepted incoming request id.
const maxRequestID = 128

// validRequestID accepts 1-128 characters of [A-Za-z0-9._~:@+=/-]: enough
// for UUIDs, W3C trace ids and load balancers' ids, and nothing that could
// forge a log line or a header.
func validRequestID(id string) bool {
	if id == "" || len(id) > maxRequestID {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("._~:@+=/-", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// LogHandler wraps h so that every record logged with a request's context
// (the *Context logging methods, or Logger.Log) carries its request_id,
// whichever package logs it. cmd wraps the process's one handler with it.
func LogHandler(h slog.Handler) slog.Handler { return requestIDHandler{h} }

type requestIDHandler struct{ slog.Handler }

func (h requestIDHandler) Handle(ctx context.Context, r slog.Record) error {
	if id := RequestID(ctx); id != "" {
		r = r.Clone()
		r.AddAttrs(slog.String("request_id", id))
	}
	return h.Handler.Handle(ctx, r)
}

func (h requestIDHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return requestIDHandler{h.Handler.WithAttrs(as)}
}

func (h requestIDHandler) WithGroup(name string) slog.Handler {
	return requestIDHandler{h.Handler.WithGroup(name)}
}

// statusWriter records the status a handler answered with. It unwraps for
// http.ResponseController (the event stream flushes through it).
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// routeOf is the request's matched route pattern, for logs and labels: never
// the raw path, which may carry a completion key. "unmatched" when no route
// matched.
func routeOf(r *http.Request) string {
	if rc := chi.RouteContext(r.Context()); rc != nil {
		if p := routePattern(rc); p != "" {
			return p
		}
	}
	return "unmatched"
}

// routeKey is the route patterns of a request routed through at most
// three routers (turnd's routes are), which name its route pattern.
type routeKey struct {
	n       int
	a, b, c string
}

// routePatterns caches rc.RoutePattern by routeKey: chi builds it anew
// (joined, its wildcards replaced) at every call, and every request asks.
// The keys are the routes' own patterns, so the cache stays small.
var routePatterns sync.Map // routeKey → string

// routePattern is rc.RoutePattern(), cached for a request routed through
// at most three routers.
func routePattern(rc *chi.Context) string {
	ps := rc.RoutePatterns
	if len(ps) == 0 || len(ps) > 3 {
		return rc.RoutePattern()
	}
	k := routeKey{n: len(ps), a: ps[0]}
	if len(ps) > 1 {
		k.b = ps[1]
	}
	if len(ps) > 2 {
		k.c = ps[2]
	}
	if p, ok := routePatterns.Load(k); ok {
		return p.(string)
	}
	p := rc.RoutePattern()
	routePatterns.Store(k, p)
	return p
}

// quietRoutes are the probes and the scrape: logged at debug level, since
// load balancers and Prometheus call them every few seconds.
var quietRoutes = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true}

// observe gives each request its id and, once it is answered, logs it once
// (method, route pattern, status, duration, request id) and reports it to
// Config.ObserveRequest. Nothing else of the request is logged: no header
// (bearer tokens, signatures), no raw path (completion keys), no query.
func (s *server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := r.Header.Get(HeaderRequestID)
		if !validRequestID(id) {
			id = rand.Text()
		}
		w.Header().Set(HeaderRequestID, id)
		r = r.WithContext(context.WithValue(r.Context(), requestIDKey, id))
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			if v := recover(); v != nil {
				// http.ErrAbortHandler, re-raised by the recoverer: the
				// response was cut off on purpose; net/http handles it.
				s.log.LogAttrs(r.Context(), slog.LevelDebug, "request aborted",
					slog.String("method", r.Method), slog.String("route", routeOf(r)))
				panic(v)
			}
			took := time.Since(start)
			status := sw.status
			if status == 0 {
				// Nothing written: net/http answers 200, unless the handler
				// panicked (the recoverer answers) or the client went away.
				status = http.StatusOK
			}
			route := routeOf(r)
			if s.cfg.ObserveRequest != nil {
				s.cfg.ObserveRequest(r.Method, route, status, took)
			}
			level := slog.LevelInfo
			switch {
			case status >= 500:
				level = slog.LevelWarn
			case quietRoutes[route]:
				level = slog.LevelDebug
			}
			s.log.LogAttrs(r.Context(), level, "request",
				slog.String("method", r.Method),
				slog.String("route", route),
				slog.Int("status", status),
				slog.Float64("duration_s", took.Seconds()),
			)
		}()
		next.ServeHTTP(sw, r)
	})
}

// MetricsHandler guards h (the Prometheus scrape handler) with token: when
// token is not empty a request needs "Authorization: Bearer <token>",
// compared in constant time. cmd uses it for a separate metrics listener;
// Config.Metrics on the main router is guarded the same way.
func MetricsHandler(h http.Handler, token string) http.Handler {
	if token == "" {
		return h
	}
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := bearer(r)
		if !ok || subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="turnd-metrics"`)
			writeProblem(w, http.StatusUnauthorized, "unauthorized", "a valid metrics bearer token is required")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// bearer returns the SHA-256 of the request's bearer token.
func bearer(r *http.Request) ([32]byte, bool) {
	h := r.Header.Get("Authorization")
	const prefix = "Bearer "
	if len(h) <= len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return [32]byte{}, false
	}
	return sha256.Sum256([]byte(strings.TrimSpace(h[len(prefix):]))), true
}

// metrics serves Config.Metrics, or 404 when metrics are not served on
// this listener.
func (s *server) metrics(w http.ResponseWriter, r *http.Request) {
	if s.metricsHandler == nil {
		writeProblem(w, http.StatusNotFound, "not_found", "metrics are not served on this listener")
		return
	}
	s.metricsHandler.ServeHTTP(w, r)
}
