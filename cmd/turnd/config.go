package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// config is everything turnd reads from flags and the environment, parsed
// once here.
type config struct {
	Addr        string
	DatabaseURL string
	// Citus: the database is a Citus coordinator (--citus, TURND_CITUS):
	// the store sends each statement about one session to its shard
	// (postgres.Options.Sharded), and migrate distributes the tables after
	// migrating (docs/citus.md).
	Citus bool
	// NotifyDatabaseURL is where turn notifications go, when not the
	// store's database: the Citus coordinator, for a replica whose
	// DATABASE_URL names a worker (TURND_NOTIFY_DATABASE_URL or its
	// _FILE).
	NotifyDatabaseURL string
	DataPath          string
	ConfigPath        string
	LogFormat         string
	LogLevel          string
	Tokens            []string
	NoMigrate         bool
	ShutdownGrace     time.Duration
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
	// StreamIdleTimeout and StreamMaxDuration bound a streamed turn's body:
	// the longest it may go without a byte, and in all
	// (TURND_STREAM_IDLE_TIMEOUT, TURND_STREAM_MAX_DURATION).
	StreamIdleTimeout time.Duration
	StreamMaxDuration time.Duration
	PublicURL         string
	// CompletionSecret derives completion keys (TURND_COMPLETION_KEY_SECRET);
	// empty keeps one in the database.
	CompletionSecret string
	// CompletionSigningSecret, when set, requires Standard Webhooks
	// signatures on deliveries (TURND_COMPLETION_SIGNING_SECRET).
	CompletionSigningSecret string
	// WebhookSecret signs turnd's own outgoing webhooks: turn.settled
	// callbacks and cancel_url requests (TURND_WEBHOOK_SIGNING_SECRET).
	WebhookSecret string
	// AllowedHosts are Host names served besides the loopback ones; set,
	// or on loopback without tokens, only those are served
	// (TURND_ALLOWED_HOSTS).
	AllowedHosts []string
	// CORSOrigins are the web origins of browser frontends that call turnd
	// directly (TURND_CORS_ORIGINS).
	CORSOrigins []string
	// CallbackAllowNets and CallbackDenyNets adjust which addresses
	// sessions' callback URLs may reach (see turn.CallbackPolicy;
	// TURND_CALLBACK_ALLOW_NETS, TURND_CALLBACK_DENY_NETS).
	CallbackAllowNets []netip.Prefix
	CallbackDenyNets  []netip.Prefix
	// UI serves the web UI at /ui/ (--ui, TURND_UI; default true).
	UI bool
	// KeepGC is set when the environment chooses the garbage collector's
	// target (GOGC, not empty): serve then leaves it alone instead of
	// setting serveGCPercent.
	KeepGC bool
	// GOGC and GOMEMLIMIT are the environment's values, for the start-up log.
	GOGC, GOMEMLIMIT string
	// Demo lets the approval builtin log each call's complete URL (and so
	// its completion key): the quick start's way to answer (TURND_DEMO).
	Demo bool
	// Tracing is the OpenTelemetry configuration (otel.go).
	Tracing traceConfig
	// Deprecated lists the old variable names the environment used, each
	// with the name that replaces it; serve warns of each.
	Deprecated [][2]string
}

// secretVar is a secret read only from the environment: NAME, or a file
// named by NAME_FILE; old names still work, with a warning.
type secretVar struct {
	name string
	old  []string
	what string
}

// secretVars are the secrets, named by what they do.
var secretVars = []secretVar{
	{"TURND_COMPLETION_KEY_SECRET", []string{"TURND_COMPLETION_SECRET"},
		"derives completion keys; default: one generated and kept in the database"},
	{"TURND_COMPLETION_SIGNING_SECRET", nil,
		"deliveries to /v1/complete must carry a Standard Webhooks signature made with it (whsec_<base64>)"},
	{"TURND_WEBHOOK_SIGNING_SECRET", []string{"TURND_WEBHOOK_SECRET"},
		"signs turnd's own webhooks: turn.settled callbacks and cancel_url requests (whsec_<base64>)"},
	{"TURND_METRICS_TOKEN", nil, "the bearer token /metrics requires"},
}

// envHelp is the part of `turnd serve -h` about the variables no flag has.
func envHelp() string {
	var b strings.Builder
	b.WriteString("\nEnvironment only (secrets; each also as NAME_FILE, a file holding it):\n")
	fmt.Fprintf(&b, "  %-34s %s\n", "TURND_API_TOKENS", "comma- or newline-separated bearer tokens for /v1 (at least 32 characters off loopback)")
	for _, v := range secretVars {
		fmt.Fprintf(&b, "  %-34s %s\n", v.name, v.what)
		for _, o := range v.old {
			fmt.Fprintf(&b, "  %-34s deprecated name of %s\n", o, v.name)
		}
	}
	b.WriteString("\nRead from the environment besides:\n")
	fmt.Fprintf(&b, "  %-34s %s\n", "DATABASE_URL_FILE", "a file holding the Postgres URL (see -database-url)")
	fmt.Fprintf(&b, "  %-34s %s\n", "GOGC", "the collector's target; default 400 while serving (see README)")
	fmt.Fprintf(&b, "  %-34s %s\n", "GOMEMLIMIT", "a soft memory limit for the Go runtime")
	b.WriteString(traceEnvHelp())
	return b.String()
}

// parseConfig reads the configuration of `turnd cmd` from args and env:
// the flags, which default to the environment's values, then the secrets,
// which only the environment holds; it checks every value.
func parseConfig(cmd string, args []string, stderr io.Writer, env func(string) (string, bool)) (config, error) {
	e := envLookup(env)
	c := runtimeEnv(e)
	var t flagText
	fs, err := newFlagSet(cmd, stderr, e, &c, &t)
	if err != nil {
		return config{}, err
	}
	if err := parseArgs(fs, args); err != nil {
		return config{}, err
	}
	if err := c.parseServerFlags(t); err != nil {
		return config{}, err
	}
	if err := c.parseLimitFlags(t); err != nil {
		return config{}, err
	}
	if err := c.checkLogFlags(); err != nil {
		return config{}, err
	}
	if err := c.readSecrets(e); err != nil {
		return config{}, err
	}
	if err := c.parseTracing(e); err != nil {
		return config{}, err
	}
	if c.PublicURL == "" {
		c.PublicURL = "http://" + c.Addr
	}
	c.PublicURL = strings.TrimRight(c.PublicURL, "/")
	if err := c.readTokens(e); err != nil {
		return config{}, err
	}
	if err := c.parseAccessFlags(t); err != nil {
		return config{}, err
	}
	return c, nil
}

// envLookup reads a variable of the environment, as os.LookupEnv does.
type envLookup func(string) (string, bool)

// get returns the variable name's value, or def where it is unset or
// empty.
func (env envLookup) get(name, def string) string {
	if v, ok := env(name); ok && v != "" {
		return v
	}
	return def
}

// orFile returns the variable name's value or, where it is unset or
// empty, the trimmed content of the file named by name_FILE ("" when
// neither is set).
func (env envLookup) orFile(name string) (string, error) {
	if v := env.get(name, ""); v != "" {
		return v, nil
	}
	return fileVar(env, name+"_FILE")
}

// bool parses the boolean variable name (any strconv.ParseBool spelling:
// true, 1, TRUE, ...), def where it is unset or empty.
func (env envLookup) bool(name string, def bool) (bool, error) {
	b, err := strconv.ParseBool(env.get(name, strconv.FormatBool(def)))
	if err != nil {
		return false, usageError{fmt.Sprintf("%s: %q is not a boolean like true or false", name, env.get(name, ""))}
	}
	return b, nil
}

// boolFlag adds the boolean flag name to fs, setting *p, whose default is
// the variable v's value (def where it is unset or empty).
func (env envLookup) boolFlag(fs *flag.FlagSet, p *bool, name, v string, def bool, usage string) error {
	b, err := env.bool(v, def)
	if err != nil {
		return err
	}
	fs.BoolVar(p, name, b, usage)
	return nil
}

// runtimeEnv returns a config holding only what the environment tells
// the Go runtime.
func runtimeEnv(env envLookup) config {
	var c config
	gogc, _ := env("GOGC")
	c.KeepGC = gogc != "" // empty is unset, as for every other variable
	c.GOGC = gogc
	c.GOMEMLIMIT, _ = env("GOMEMLIMIT")
	return c
}

// flagText holds, as given, the flags parsed once the flag set has: those
// of durations, numbers and lists.
type flagText struct {
	grace, delay, lease, maxBody, maxCalls, streamIdle, streamMax string
	allowedHosts, corsOrigins, callbackAllow, callbackDeny        string
}

// newFlagSet returns the flag set of `turnd cmd`, whose flags set c or t
// and default to the environment's values.
func newFlagSet(cmd string, stderr io.Writer, env envLookup, c *config, t *flagText) (*flag.FlagSet, error) {
	fs := flag.NewFlagSet("turnd "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	// The boolean variables are parsed before the flags so that the
	// environment's value is the flag's default.
	for _, add := range []func(*flag.FlagSet, envLookup, *config, *flagText) error{
		storeFlags, toolFlags, serverFlags, traceFlags,
	} {
		if err := add(fs, env, c, t); err != nil {
			return nil, err
		}
	}
	logFlags(fs, env, c)
	limitFlags(fs, env, t)
	accessFlags(fs, env, t)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage of %s:\n", fs.Name())
		fs.PrintDefaults()
		if cmd == "serve" || cmd == "migrate" {
			fmt.Fprint(fs.Output(), envHelp())
		}
	}
	return fs, nil
}

// storeFlags adds the flags of the store: where it is, its schema, leases.
func storeFlags(fs *flag.FlagSet, env envLookup, c *config, t *flagText) error {
	if err := env.boolFlag(fs, &c.NoMigrate, "no-migrate", "TURND_NO_MIGRATE", false, "do not migrate the schema at start (TURND_NO_MIGRATE=true)"); err != nil {
		return err
	}
	fs.StringVar(&c.DatabaseURL, "database-url", env.get("DATABASE_URL", ""), "Postgres URL (DATABASE_URL or DATABASE_URL_FILE); empty uses the embedded SQLite store")
	if err := env.boolFlag(fs, &c.Citus, "citus", "TURND_CITUS", false, "the Postgres database is a Citus coordinator: serve sends every statement of a turn to its session's shard, migrate distributes the tables (TURND_CITUS=true; docs/citus.md)"); err != nil {
		return err
	}
	fs.StringVar(&c.NotifyDatabaseURL, "notify-database-url", env.get("TURND_NOTIFY_DATABASE_URL", ""), "Postgres URL turn notifications between replicas go through, when not the store's: the Citus coordinator where DATABASE_URL names a worker (TURND_NOTIFY_DATABASE_URL or TURND_NOTIFY_DATABASE_URL_FILE)")
	fs.StringVar(&c.DataPath, "data", env.get("TURND_DATA", "turnd.db"), "embedded SQLite file, used when no database URL is set (TURND_DATA)")
	fs.StringVar(&t.lease, "lease-ttl", env.get("TURND_LEASE_TTL", "10s"), "turn lease; a replica resumes a turn whose owner stopped renewing it (TURND_LEASE_TTL)")
	return nil
}

// toolFlags adds the flags of the tools: their config and the demo mode.
func toolFlags(fs *flag.FlagSet, env envLookup, c *config, _ *flagText) error {
	if err := env.boolFlag(fs, &c.Demo, "demo", "TURND_DEMO", false, "demo mode: the approval builtin shows each call's complete_url, which carries its completion key (a credential), in the log and as the parked call's output; never in production (TURND_DEMO=true)"); err != nil {
		return err
	}
	fs.StringVar(&c.ConfigPath, "config", env.get("TURND_CONFIG", ""), "tool config YAML file (TURND_CONFIG)")
	return nil
}

// defaultAddr is the listen address without --addr or TURND_ADDR; turnd
// healthcheck asks it too.
const defaultAddr = "127.0.0.1:8080"

// serverFlags adds the flags of the HTTP server: its addresses, the web
// UI and shutdown.
func serverFlags(fs *flag.FlagSet, env envLookup, c *config, t *flagText) error {
	if err := env.boolFlag(fs, &c.UI, "ui", "TURND_UI", true, "serve the web UI at /ui/ (TURND_UI; --ui=false turns it off)"); err != nil {
		return err
	}
	fs.StringVar(&c.Addr, "addr", env.get("TURND_ADDR", defaultAddr), "listen address (TURND_ADDR)")
	fs.StringVar(&t.grace, "shutdown-grace", env.get("TURND_SHUTDOWN_GRACE", "30s"), "how long running waves may finish after SIGTERM (TURND_SHUTDOWN_GRACE)")
	fs.StringVar(&t.delay, "shutdown-delay", env.get("TURND_SHUTDOWN_DELAY", ""), "after SIGTERM, how long /readyz answers 503 while requests are still served, before the grace starts (TURND_SHUTDOWN_DELAY; default 5s, or 0s on a loopback address, where no load balancer watches)")
	fs.StringVar(&c.MetricsAddr, "metrics-addr", env.get("TURND_METRICS_ADDR", ""), "serve /metrics on this address instead of the main one (TURND_METRICS_ADDR)")
	fs.StringVar(&c.PublicURL, "public-url", env.get("TURND_PUBLIC_URL", ""), "the URL external systems reach turnd at, for completion URLs (TURND_PUBLIC_URL; default http://ADDR)")
	return nil
}

// logFlags adds the flags of the log.
func logFlags(fs *flag.FlagSet, env envLookup, c *config) {
	fs.StringVar(&c.LogFormat, "log-format", env.get("TURND_LOG_FORMAT", "auto"), "log format: auto (text on a terminal, else json), text or json (TURND_LOG_FORMAT)")
	fs.StringVar(&c.LogLevel, "log-level", env.get("TURND_LOG_LEVEL", "info"), "log level: debug, info, warn, error (TURND_LOG_LEVEL)")
}

// limitFlags adds the flags that bound requests and streamed turns.
func limitFlags(fs *flag.FlagSet, env envLookup, t *flagText) {
	fs.StringVar(&t.maxBody, "max-body-bytes", env.get("TURND_MAX_BODY_BYTES", "4194304"), "request body limit (TURND_MAX_BODY_BYTES)")
	fs.StringVar(&t.streamIdle, "stream-idle-timeout", env.get("TURND_STREAM_IDLE_TIMEOUT", "60s"), "a streamed turn whose body brings no byte for this long is broken off, 422 stream_incomplete (TURND_STREAM_IDLE_TIMEOUT)")
	fs.StringVar(&t.streamMax, "stream-max-duration", env.get("TURND_STREAM_MAX_DURATION", "10m"), "the longest a streamed turn's body may take in all (TURND_STREAM_MAX_DURATION)")
	fs.StringVar(&t.maxCalls, "max-calls", env.get("TURND_MAX_CALLS", "128"), "most calls in one turn (TURND_MAX_CALLS)")
}

// accessFlags adds the flags of who may reach turnd, and whom callbacks
// may reach.
func accessFlags(fs *flag.FlagSet, env envLookup, t *flagText) {
	fs.StringVar(&t.allowedHosts, "allowed-hosts", env.get("TURND_ALLOWED_HOSTS", ""), "comma-separated Host names served besides localhost, 127.0.0.0/8, [::1] and the public URL's host; when set, or on loopback without tokens, requests naming another Host answer 403 (TURND_ALLOWED_HOSTS)")
	fs.StringVar(&t.corsOrigins, "cors-origins", env.get("TURND_CORS_ORIGINS", ""), "comma-separated web origins (scheme://host[:port]) of browser frontends that call turnd directly; requests from other origins than these and turnd's own answer 403 (TURND_CORS_ORIGINS)")
	fs.StringVar(&t.callbackAllow, "callback-allow-nets", env.get("TURND_CALLBACK_ALLOW_NETS", ""), "comma-separated CIDRs callback URLs may reach although blocked: link-local, metadata, unspecified, multicast addresses and the deny list (TURND_CALLBACK_ALLOW_NETS)")
	fs.StringVar(&t.callbackDeny, "callback-deny-nets", env.get("TURND_CALLBACK_DENY_NETS", ""), "comma-separated CIDRs callback URLs may not reach besides the blocked ones, e.g. 127.0.0.0/8,10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,::1/128,fc00::/7 (TURND_CALLBACK_DENY_NETS)")
}

// parseArgs parses args with fs, which takes no operands.
func parseArgs(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			// The flags are printed; main exits 0, as `turnd help` does.
			return flag.ErrHelp
		}
		return usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("unexpected arguments: %v", fs.Args())}
	}
	return nil
}

// parseServerFlags sets the shutdown's durations and checks the metrics
// address.
func (c *config) parseServerFlags(t flagText) error {
	var err error
	if c.ShutdownGrace, err = time.ParseDuration(t.grace); err != nil || c.ShutdownGrace < 0 {
		return usageError{fmt.Sprintf("shutdown-grace: %q is not a duration like 30s", t.grace)}
	}
	delay := t.delay
	if delay == "" {
		// A replica behind a load balancer must be seen leaving before it
		// stops taking requests; on loopback nothing watches /readyz.
		delay = "5s"
		if isLoopback(c.Addr) {
			delay = "0s"
		}
	}
	if c.ShutdownDelay, err = time.ParseDuration(delay); err != nil || c.ShutdownDelay < 0 {
		return usageError{fmt.Sprintf("shutdown-delay: %q is not a duration like 5s", delay)}
	}
	if c.MetricsAddr != "" {
		if _, _, err := net.SplitHostPort(c.MetricsAddr); err != nil {
			return usageError{fmt.Sprintf("metrics-addr: %q is not a host:port address", c.MetricsAddr)}
		}
		if c.MetricsAddr == c.Addr {
			return usageError{fmt.Sprintf("metrics-addr: %q is the main address; leave it empty to serve /metrics there", c.MetricsAddr)}
		}
	}
	return nil
}

// parseLimitFlags sets the lease and the bounds of requests and streamed
// turns.
func (c *config) parseLimitFlags(t flagText) error {
	var err error
	if c.LeaseTTL, err = time.ParseDuration(t.lease); err != nil || c.LeaseTTL < time.Second {
		return usageError{fmt.Sprintf("lease-ttl: %q is not a duration of at least 1s", t.lease)}
	}
	if c.MaxBodyBytes, err = strconv.ParseInt(t.maxBody, 10, 64); err != nil || c.MaxBodyBytes < 1024 {
		return usageError{fmt.Sprintf("max-body-bytes: %q is not an integer of at least 1024", t.maxBody)}
	}
	if c.MaxCalls, err = strconv.Atoi(t.maxCalls); err != nil || c.MaxCalls < 1 {
		return usageError{fmt.Sprintf("max-calls: %q is not a positive integer", t.maxCalls)}
	}
	if c.StreamIdleTimeout, err = time.ParseDuration(t.streamIdle); err != nil || c.StreamIdleTimeout <= 0 {
		return usageError{fmt.Sprintf("stream-idle-timeout: %q is not a positive duration like 60s", t.streamIdle)}
	}
	if c.StreamMaxDuration, err = time.ParseDuration(t.streamMax); err != nil || c.StreamMaxDuration <= 0 {
		return usageError{fmt.Sprintf("stream-max-duration: %q is not a positive duration like 10m", t.streamMax)}
	}
	return nil
}

// checkLogFlags checks the log's format and level.
func (c *config) checkLogFlags() error {
	switch c.LogFormat {
	case "auto", "text", "json":
	default:
		return usageError{fmt.Sprintf("log-format: %q is not auto, text or json", c.LogFormat)}
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.LogLevel)); err != nil {
		return usageError{fmt.Sprintf("log-level: %q is not debug, info, warn or error", c.LogLevel)}
	}
	return nil
}

// readSecrets reads the database URL, where no flag or variable set it,
// and the secrets from the environment or the files it names, noting the
// deprecated names it used.
func (c *config) readSecrets(env envLookup) error {
	var err error
	if c.DatabaseURL == "" {
		if c.DatabaseURL, err = fileVar(env, "DATABASE_URL_FILE"); err != nil {
			return err
		}
	}
	if c.NotifyDatabaseURL == "" {
		if c.NotifyDatabaseURL, err = fileVar(env, "TURND_NOTIFY_DATABASE_URL_FILE"); err != nil {
			return err
		}
	}
	for _, sec := range []struct {
		dst *string
		v   secretVar
	}{
		{&c.CompletionSecret, secretVars[0]},
		{&c.CompletionSigningSecret, secretVars[1]},
		{&c.WebhookSecret, secretVars[2]},
		{&c.MetricsToken, secretVars[3]},
	} {
		for i, name := range append([]string{sec.v.name}, sec.v.old...) {
			if *sec.dst, err = env.orFile(name); err != nil {
				return err
			}
			if *sec.dst != "" {
				if i > 0 {
					c.Deprecated = append(c.Deprecated, [2]string{name, sec.v.name})
				}
				break
			}
		}
	}
	return nil
}

// readTokens reads the API tokens from the environment or the file it
// names.
func (c *config) readTokens(env envLookup) error {
	tokens, err := env.orFile("TURND_API_TOKENS")
	if err != nil {
		return err
	}
	for _, t := range strings.FieldsFunc(tokens, func(r rune) bool { return r == ',' || r == '\n' }) {
		if t = strings.TrimSpace(t); t != "" {
			c.Tokens = append(c.Tokens, t)
		}
	}
	return nil
}

// parseAccessFlags sets the hosts and origins served and the networks
// callbacks may and may not reach.
func (c *config) parseAccessFlags(t flagText) error {
	for _, h := range splitList(t.allowedHosts) {
		if strings.ContainsAny(h, "/ *") {
			return usageError{fmt.Sprintf("allowed-hosts: %q is not a host name (no scheme, path or wildcard)", h)}
		}
		c.AllowedHosts = append(c.AllowedHosts, h)
	}
	for _, o := range splitList(t.corsOrigins) {
		if err := checkOrigin(o); err != nil {
			return usageError{fmt.Sprintf("cors-origins: %q %v", o, err)}
		}
		c.CORSOrigins = append(c.CORSOrigins, strings.TrimRight(o, "/"))
	}
	var err error
	if c.CallbackAllowNets, err = parseNets("callback-allow-nets", t.callbackAllow); err != nil {
		return err
	}
	c.CallbackDenyNets, err = parseNets("callback-deny-nets", t.callbackDeny)
	return err
}

// splitList splits a comma-separated setting, dropping empty items.
func splitList(v string) []string {
	var out []string
	for _, item := range strings.Split(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// checkOrigin accepts a web origin: http or https, a host, an optional
// port, nothing else. A wildcard is refused: every origin allowed would
// let any web page call a turnd without tokens.
func checkOrigin(o string) error {
	u, err := url.Parse(strings.TrimRight(o, "/"))
	switch {
	case o == "*":
		return errors.New("is a wildcard; list each origin")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return errors.New("is not an origin like https://app.example.com")
	case u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "":
		return errors.New("is not an origin: scheme://host[:port] only")
	}
	return nil
}

// parseNets parses a comma-separated list of CIDRs (a bare address is its
// own /32 or /128).
func parseNets(name, v string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, item := range splitList(v) {
		p, err := netip.ParsePrefix(item)
		if err != nil {
			ip, ipErr := netip.ParseAddr(item)
			if ipErr != nil {
				return nil, usageError{fmt.Sprintf("%s: %q is not a CIDR like 10.0.0.0/8", name, item)}
			}
			p = netip.PrefixFrom(ip, ip.BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// minOffLoopbackToken is the shortest API token accepted on an address
// other than loopback: a token there is all that stands between the
// network and the tools.
const minOffLoopbackToken = 32

// checkTokens refuses to serve off loopback without tokens, or with a
// token shorter than minOffLoopbackToken.
func checkTokens(c config) error {
	if isLoopback(c.Addr) {
		return nil
	}
	if len(c.Tokens) == 0 {
		return fmt.Errorf("refusing to listen on %s without authentication: set TURND_API_TOKENS (or TURND_API_TOKENS_FILE), or listen on a loopback address such as 127.0.0.1:8080", c.Addr)
	}
	for i, t := range c.Tokens {
		if len(t) < minOffLoopbackToken {
			return fmt.Errorf("refusing to listen on %s: API token %d of TURND_API_TOKENS is %d characters long; tokens must have at least %d off loopback (generate one with: openssl rand -hex 32)", c.Addr, i+1, len(t), minOffLoopbackToken)
		}
	}
	return nil
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
