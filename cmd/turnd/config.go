package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"
)

// config is everything turnd reads from flags and the environment, parsed
// once here.
type config struct {
	Addr          string
	DatabaseURL   string
	DataPath      string
	ConfigPath    string
	LogFormat     string
	LogLevel      string
	Tokens        []string
	NoMigrate     bool
	ShutdownGrace time.Duration
	// ShutdownDelay is how long /readyz answers 503 after SIGTERM while
	// everything else still serves, before the server stops taking
	// requests: load balancers see the replica leave first
	// (TURND_SHUTDOWN_DELAY).
	ShutdownDelay time.Duration
	// MetricsAddr, when set, serves /metrics on a listener of its own
	// instead of the main one (TURND_METRICS_ADDR).
	MetricsAddr string
	// MetricsToken, when set, is the bearer token /metrics requires
	// (TURND_METRICS_TOKEN or TURND_METRICS_TOKEN_FILE).
	MetricsToken string
	LeaseTTL     time.Duration
	MaxBodyBytes int64
	MaxCalls     int
	PublicURL    string
	// CompletionSecret derives completion keys (TURND_COMPLETION_SECRET);
	// empty keeps one in the database.
	CompletionSecret string
	// CompletionSigningSecret, when set, requires Standard Webhooks
	// signatures on deliveries (TURND_COMPLETION_SIGNING_SECRET).
	CompletionSigningSecret string
	// WebhookSecret signs turnd's own outgoing webhooks: turn.settled
	// callbacks and cancel_url requests (TURND_WEBHOOK_SECRET).
	WebhookSecret string
	// KeepGC is set when the environment chooses the garbage collector's
	// target (GOGC, not empty): serve then leaves it alone instead of
	// setting serveGCPercent.
	KeepGC bool
}

func parseConfig(cmd string, args []string, stderr io.Writer, env func(string) (string, bool)) (config, error) {
	fs := flag.NewFlagSet("turnd "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	get := func(name, def string) string {
		if v, ok := env(name); ok && v != "" {
			return v
		}
		return def
	}
	var c config
	gogc, _ := env("GOGC")
	c.KeepGC = gogc != "" // empty is unset, as for every other variable
	var grace, delay, lease, maxBody, maxCalls string
	// Parsed before the flags so that the environment's value is the flag's
	// default; any strconv.ParseBool spelling (true, 1, TRUE, ...) counts.
	noMigrate, err := strconv.ParseBool(get("TURND_NO_MIGRATE", "false"))
	if err != nil {
		return config{}, usageError{fmt.Sprintf("TURND_NO_MIGRATE: %q is not a boolean like true or false", get("TURND_NO_MIGRATE", ""))}
	}
	fs.StringVar(&c.Addr, "addr", get("TURND_ADDR", "127.0.0.1:8080"), "listen address (TURND_ADDR)")
	fs.StringVar(&c.DatabaseURL, "database-url", get("DATABASE_URL", ""), "Postgres URL (DATABASE_URL or DATABASE_URL_FILE); empty uses the embedded SQLite store")
	fs.StringVar(&c.DataPath, "data", get("TURND_DATA", "turnd.db"), "embedded SQLite file, used when no database URL is set (TURND_DATA)")
	fs.StringVar(&c.ConfigPath, "config", get("TURND_CONFIG", ""), "tool config YAML file (TURND_CONFIG)")
	fs.StringVar(&c.LogFormat, "log-format", get("TURND_LOG_FORMAT", "auto"), "log format: auto (text on a terminal, else json), text or json (TURND_LOG_FORMAT)")
	fs.StringVar(&c.LogLevel, "log-level", get("TURND_LOG_LEVEL", "info"), "log level: debug, info, warn, error (TURND_LOG_LEVEL)")
	fs.BoolVar(&c.NoMigrate, "no-migrate", noMigrate, "do not migrate the schema at start (TURND_NO_MIGRATE=true)")
	fs.StringVar(&grace, "shutdown-grace", get("TURND_SHUTDOWN_GRACE", "30s"), "how long running waves may finish after SIGTERM (TURND_SHUTDOWN_GRACE)")
	fs.StringVar(&delay, "shutdown-delay", get("TURND_SHUTDOWN_DELAY", ""), "after SIGTERM, how long /readyz answers 503 while requests are still served, before the grace starts (TURND_SHUTDOWN_DELAY; default 5s, or 0s on a loopback address, where no load balancer watches)")
	fs.StringVar(&c.MetricsAddr, "metrics-addr", get("TURND_METRICS_ADDR", ""), "serve /metrics on this address instead of the main one (TURND_METRICS_ADDR)")
	fs.StringVar(&lease, "lease-ttl", get("TURND_LEASE_TTL", "10s"), "turn lease; a replica resumes a turn whose owner stopped renewing it (TURND_LEASE_TTL)")
	fs.StringVar(&maxBody, "max-body-bytes", get("TURND_MAX_BODY_BYTES", "4194304"), "request body limit (TURND_MAX_BODY_BYTES)")
	fs.StringVar(&maxCalls, "max-calls", get("TURND_MAX_CALLS", "128"), "most calls in one turn (TURND_MAX_CALLS)")
	fs.StringVar(&c.PublicURL, "public-url", get("TURND_PUBLIC_URL", ""), "the URL external systems reach turnd at, for completion URLs (TURND_PUBLIC_URL; default http://ADDR)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			// The flags are printed; main exits 0, as `turnd help` does.
			return config{}, flag.ErrHelp
		}
		return config{}, usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return config{}, usageError{fmt.Sprintf("unexpected arguments: %v", fs.Args())}
	}
	if c.ShutdownGrace, err = time.ParseDuration(grace); err != nil || c.ShutdownGrace < 0 {
		return config{}, usageError{fmt.Sprintf("shutdown-grace: %q is not a duration like 30s", grace)}
	}
	if delay == "" {
		// A replica behind a load balancer must be seen leaving before it
		// stops taking requests; on loopback nothing watches /readyz.
		delay = "5s"
		if isLoopback(c.Addr) {
			delay = "0s"
		}
	}
	if c.ShutdownDelay, err = time.ParseDuration(delay); err != nil || c.ShutdownDelay < 0 {
		return config{}, usageError{fmt.Sprintf("shutdown-delay: %q is not a duration like 5s", delay)}
	}
	if c.MetricsAddr != "" {
		if _, _, err := net.SplitHostPort(c.MetricsAddr); err != nil {
			return config{}, usageError{fmt.Sprintf("metrics-addr: %q is not a host:port address", c.MetricsAddr)}
		}
		if c.MetricsAddr == c.Addr {
			return config{}, usageError{fmt.Sprintf("metrics-addr: %q is the main address; leave it empty to serve /metrics there", c.MetricsAddr)}
		}
	}
	if c.LeaseTTL, err = time.ParseDuration(lease); err != nil || c.LeaseTTL < time.Second {
		return config{}, usageError{fmt.Sprintf("lease-ttl: %q is not a duration of at least 1s", lease)}
	}
	if c.MaxBodyBytes, err = strconv.ParseInt(maxBody, 10, 64); err != nil || c.MaxBodyBytes < 1024 {
		return config{}, usageError{fmt.Sprintf("max-body-bytes: %q is not an integer of at least 1024", maxBody)}
	}
	if c.MaxCalls, err = strconv.Atoi(maxCalls); err != nil || c.MaxCalls < 1 {
		return config{}, usageError{fmt.Sprintf("max-calls: %q is not a positive integer", maxCalls)}
	}
	switch c.LogFormat {
	case "auto", "text", "json":
	default:
		return config{}, usageError{fmt.Sprintf("log-format: %q is not auto, text or json", c.LogFormat)}
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.LogLevel)); err != nil {
		return config{}, usageError{fmt.Sprintf("log-level: %q is not debug, info, warn or error", c.LogLevel)}
	}
	if c.DatabaseURL == "" {
		if c.DatabaseURL, err = fileVar(env, "DATABASE_URL_FILE"); err != nil {
			return config{}, err
		}
	}
	for _, sec := range []struct {
		dst  *string
		name string
	}{
		{&c.CompletionSecret, "TURND_COMPLETION_SECRET"},
		{&c.CompletionSigningSecret, "TURND_COMPLETION_SIGNING_SECRET"},
		{&c.WebhookSecret, "TURND_WEBHOOK_SECRET"},
		{&c.MetricsToken, "TURND_METRICS_TOKEN"},
	} {
		if *sec.dst = get(sec.name, ""); *sec.dst == "" {
			if *sec.dst, err = fileVar(env, sec.name+"_FILE"); err != nil {
				return config{}, err
			}
		}
	}
	if c.PublicURL == "" {
		c.PublicURL = "http://" + c.Addr
	}
	c.PublicURL = strings.TrimRight(c.PublicURL, "/")
	tokens := get("TURND_API_TOKENS", "")
	if tokens == "" {
		if tokens, err = fileVar(env, "TURND_API_TOKENS_FILE"); err != nil {
			return config{}, err
		}
	}
	for _, t := range strings.FieldsFunc(tokens, func(r rune) bool { return r == ',' || r == '\n' }) {
		if t = strings.TrimSpace(t); t != "" {
			c.Tokens = append(c.Tokens, t)
		}
	}
	return c, nil
}

// fileVar reads the secret in the file named by the environment variable
// name (the _FILE convention of container secrets).
func fileVar(env func(string) (string, bool), name string) (string, error) {
	path, ok := env(name)
	if !ok || path == "" {
		return "", nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", name, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// isLoopback reports whether addr (host:port) only listens on loopback.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
