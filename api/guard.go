package api

import (
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// The browser guard. A web page can make a browser send requests to any
// address, turnd's loopback one included: "simple" cross-site POSTs (a
// text/plain body, no preflight) and, after DNS rebinding, requests whose
// Host is the attacker's name. guard refuses them: request headers over the
// limit (431), Host names not served (when Config.RestrictHosts is set),
// Origins that are neither the server's own nor listed in
// Config.CORSOrigins (403), and POST bodies that are not JSON (415; a
// browser cannot send JSON cross-site without a preflight, which only a
// listed origin passes). The completion endpoints take any content type:
// external systems call them.

// corsAllowHeaders are the request headers a listed origin may send.
const corsAllowHeaders = "Authorization, Content-Type, Prefer, Last-Event-ID, Idempotency-Key, X-Request-Id, webhook-id, webhook-timestamp, webhook-signature"

// corsExposeHeaders are the response headers a listed origin's scripts may
// read.
const corsExposeHeaders = "Turnd-Turn-Status, Turnd-Replayed, Turnd-Follow-Up, Turnd-Placeholders, Preference-Applied, Location, Retry-After, X-Request-Id, WWW-Authenticate, Content-Range"

// corsMaxAge is how long (seconds) a browser may cache a preflight's answer.
const corsMaxAge = "600"

// guard applies the checks described above before any route runs.
func (s *server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n := headerBytes(r); n > s.cfg.MaxHeaderBytes {
			s.writeError(w, r, errHTTP(http.StatusRequestHeaderFieldsTooLarge, "headers_too_large",
				"the request line and headers exceed "+strconv.Itoa(s.cfg.MaxHeaderBytes)+" bytes"))
			return
		}
		if s.cfg.RestrictHosts && !s.hostAllowed(r.Host) {
			s.writeError(w, r, errHTTP(http.StatusForbidden, "host_not_allowed",
				"this server answers to loopback host names only (and those set with --allowed-hosts), not "+strconv.Quote(r.Host)))
			return
		}
		if len(s.corsOrigins) > 0 {
			// Answers differ by Origin: caches must key on it.
			w.Header().Add("Vary", "Origin")
		}
		if origin := r.Header.Get("Origin"); origin != "" {
			switch {
			case s.corsOrigins[origin]:
				if s.grantCORS(w, r, origin) {
					return // a preflight, answered
				}
			case sameOrigin(origin, r.Host):
				// A page served by turnd itself: no CORS involved.
			default:
				s.writeError(w, r, errHTTP(http.StatusForbidden, "origin_not_allowed",
					"requests from the web origin "+strconv.Quote(origin)+" are not allowed; list it with --cors-origins to let a browser frontend there call turnd"))
				return
			}
		}
		if r.Method == http.MethodPost && !strings.HasPrefix(r.URL.Path, "/v1/complete/") {
			if err := checkContentType(r); err != nil {
				w.Header().Set("Accept-Post", "application/json")
				s.writeError(w, r, err)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// grantCORS adds the CORS answer for a listed origin; a preflight is
// answered whole (204) and reported true.
func (s *server) grantCORS(w http.ResponseWriter, r *http.Request, origin string) bool {
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", origin)
	if r.Method != http.MethodOptions || r.Header.Get("Access-Control-Request-Method") == "" {
		h.Set("Access-Control-Expose-Headers", corsExposeHeaders)
		return false
	}
	h.Add("Vary", "Access-Control-Request-Method")
	h.Add("Vary", "Access-Control-Request-Headers")
	h.Set("Access-Control-Allow-Methods", "GET, POST")
	h.Set("Access-Control-Allow-Headers", corsAllowHeaders)
	h.Set("Access-Control-Max-Age", corsMaxAge)
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
	return true
}

// headerBytes is the size of the request line and headers as a client sent
// them (near enough: each header line's name, value, ": " and CRLF).
func headerBytes(r *http.Request) int {
	n := len(r.Method) + len(r.RequestURI) + len(r.Proto) + 4
	n += len("Host: \r\n") + len(r.Host)
	for k, vs := range r.Header {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n
}

// hostAllowed reports whether a Host header names this server: a loopback
// name (localhost, 127.0.0.0/8, [::1]) or one of Config.AllowedHosts, with
// or without a port.
func (s *server) hostAllowed(hostport string) bool {
	host := hostOnly(hostport)
	if host == "" {
		return false
	}
	if host == "localhost" || s.allowedHosts[host] {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// hostOnly is the lower-cased host of a host[:port], without IPv6 brackets.
func hostOnly(hostport string) string {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return strings.ToLower(strings.TrimSuffix(host, "."))
}

// sameOrigin reports whether origin (scheme://host[:port]) is the origin of
// a page served from this server's Host: the browser writes both from the
// page's URL, so their authorities match, a default port being omitted.
func sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return false
	}
	def := ":80"
	if u.Scheme == "https" {
		def = ":443"
	}
	a := strings.ToLower(strings.TrimSuffix(u.Host, def))
	b := strings.ToLower(strings.TrimSuffix(host, def))
	return a != "" && a == b
}

// checkContentType accepts a POST body that is JSON, in UTF-8
// (application/json or application/*+json), or a streamed type on the
// route that takes them; a POST without a body may leave it out.
func checkContentType(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	if ct == "" && r.ContentLength == 0 {
		return nil
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err == nil {
		if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") && !strings.EqualFold(cs, "utf8") {
			return errHTTP(http.StatusUnsupportedMediaType, "unsupported_media_type", "request bodies are UTF-8; charset "+strconv.Quote(cs)+" is not accepted")
		}
		switch {
		case mt == "application/json", strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"):
			return nil
		case (mt == "text/event-stream" || mt == "application/x-ndjson") && isTurnsPath(r.URL.Path):
			return nil
		}
	}
	if ct == "" {
		ct = "none"
	}
	return errHTTP(http.StatusUnsupportedMediaType, "unsupported_media_type", "Content-Type must be application/json, not "+ct)
}

// isTurnsPath reports whether path is /v1/sessions/{session_id}/turns.
func isTurnsPath(path string) bool {
	rest, ok := strings.CutPrefix(path, "/v1/sessions/")
	if !ok {
		return false
	}
	id, tail, ok := strings.Cut(rest, "/")
	return ok && id != "" && tail == "turns"
}
