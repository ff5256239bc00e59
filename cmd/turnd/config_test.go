package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
)

// envOf is an environment lookup over m, the shape parseConfig and run take.
func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestParseConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dbFile := writeFile(t, dir, "db", "postgres://from-file/db\n")
	tokFile := writeFile(t, dir, "tokens", "t1\nt2, t3\r\n\n")
	missing := filepath.Join(dir, "missing")

	defaults := config{
		Addr:          "127.0.0.1:8080",
		DataPath:      "turnd.db",
		LogFormat:     "auto",
		LogLevel:      "info",
		ShutdownGrace: 30 * time.Second,
		LeaseTTL:      10 * time.Second,
		MaxBodyBytes:  4 << 20,
		MaxCalls:      128,
		UI:            true,

		StreamIdleTimeout: time.Minute,
		StreamMaxDuration: 10 * time.Minute,
	}
	tests := []struct {
		name string
		args []string
		env  map[string]string
		// want edits the defaults into the expected config.
		want func(c *config)
		// wantErr is a substring of the expected error; usage tells whether
		// it is a usage error (exit code 2) or another (exit code 1).
		wantErr string
		usage   bool
		help    bool
	}{
		{name: "defaults", want: func(*config) {}},
		{name: "empty env var is unset", env: map[string]string{"TURND_ADDR": "", "TURND_LEASE_TTL": ""}, want: func(*config) {}},
		{
			name: "every env var",
			env: map[string]string{
				"TURND_ADDR": "127.0.0.1:9", "DATABASE_URL": "postgres://env/db", "TURND_DATA": "/var/lib/turnd.db",
				"TURND_CONFIG": "/etc/turnd.yaml", "TURND_LOG_FORMAT": "json", "TURND_LOG_LEVEL": "debug",
				"TURND_NO_MIGRATE": "true", "TURND_SHUTDOWN_GRACE": "5s", "TURND_LEASE_TTL": "2s", "TURND_UI": "false",
				"TURND_MAX_BODY_BYTES": "2048", "TURND_MAX_CALLS": "3", "TURND_API_TOKENS": "a",
				"TURND_STREAM_IDLE_TIMEOUT": "5s", "TURND_STREAM_MAX_DURATION": "2m",
			},
			want: func(c *config) {
				*c = config{
					Addr: "127.0.0.1:9", DatabaseURL: "postgres://env/db", DataPath: "/var/lib/turnd.db",
					ConfigPath: "/etc/turnd.yaml", LogFormat: "json", LogLevel: "debug", Tokens: []string{"a"},
					NoMigrate: true, ShutdownGrace: 5 * time.Second, LeaseTTL: 2 * time.Second,
					MaxBodyBytes: 2048, MaxCalls: 3, StreamIdleTimeout: 5 * time.Second, StreamMaxDuration: 2 * time.Minute,
				}
			},
		},
		{
			name: "every flag",
			args: []string{
				"--addr", "127.0.0.1:7", "--database-url=postgres://flag/db", "-data", "x.db", "--config", "t.yaml",
				"--log-format", "text", "--log-level", "warn", "--no-migrate", "--shutdown-grace", "1m",
				"--lease-ttl", "1s", "--max-body-bytes", "1024", "--max-calls", "1", "--ui=false",
				"--stream-idle-timeout", "30s", "--stream-max-duration", "1h",
			},
			want: func(c *config) {
				*c = config{
					Addr: "127.0.0.1:7", DatabaseURL: "postgres://flag/db", DataPath: "x.db", ConfigPath: "t.yaml",
					LogFormat: "text", LogLevel: "warn", NoMigrate: true, ShutdownGrace: time.Minute,
					LeaseTTL: time.Second, MaxBodyBytes: 1024, MaxCalls: 1,
					StreamIdleTimeout: 30 * time.Second, StreamMaxDuration: time.Hour,
				}
			},
		},
		{
			name: "flags beat env",
			args: []string{"--addr", "127.0.0.1:1", "--shutdown-grace", "1s", "--lease-ttl", "3s", "--log-format", "text", "--no-migrate=false"},
			env:  map[string]string{"TURND_ADDR": "127.0.0.1:2", "TURND_SHUTDOWN_GRACE": "5s", "TURND_LEASE_TTL": "bogus", "TURND_LOG_FORMAT": "json", "TURND_NO_MIGRATE": "true"},
			want: func(c *config) {
				c.Addr, c.ShutdownGrace, c.LeaseTTL, c.LogFormat = "127.0.0.1:1", time.Second, 3*time.Second, "text"
			},
		},
		{name: "no-migrate env 1", env: map[string]string{"TURND_NO_MIGRATE": "1"}, want: func(c *config) { c.NoMigrate = true }},
		{name: "no-migrate env false", env: map[string]string{"TURND_NO_MIGRATE": "false"}, want: func(*config) {}},
		{name: "no-migrate env not a boolean", env: map[string]string{"TURND_NO_MIGRATE": "yes please"}, wantErr: "TURND_NO_MIGRATE", usage: true},
		{name: "ui off by flag", args: []string{"--ui=false"}, want: func(c *config) { c.UI = false }},
		{name: "ui off by env", env: map[string]string{"TURND_UI": "false"}, want: func(c *config) { c.UI = false }},
		{name: "ui flag beats env", args: []string{"--ui"}, env: map[string]string{"TURND_UI": "0"}, want: func(*config) {}},
		{name: "ui env not a boolean", env: map[string]string{"TURND_UI": "maybe"}, wantErr: "TURND_UI", usage: true},
		{name: "zero grace", args: []string{"--shutdown-grace", "0s"}, want: func(c *config) { c.ShutdownGrace = 0 }},
		// GOGC set keeps the runtime's collector target; empty is unset.
		{name: "GOGC set", env: map[string]string{"GOGC": "100"}, want: func(c *config) { c.KeepGC, c.GOGC = true, "100" }},
		{name: "GOMEMLIMIT", env: map[string]string{"GOMEMLIMIT": "512MiB"}, want: func(c *config) { c.GOMEMLIMIT = "512MiB" }},
		{name: "GOGC empty", env: map[string]string{"GOGC": ""}, want: func(*config) {}},

		// DATABASE_URL: flag, then env, then the _FILE variant.
		{name: "database url file", env: map[string]string{"DATABASE_URL_FILE": dbFile}, want: func(c *config) { c.DatabaseURL = "postgres://from-file/db" }},
		{
			name: "database url env beats its file", env: map[string]string{"DATABASE_URL": "postgres://env/db", "DATABASE_URL_FILE": missing},
			want: func(c *config) { c.DatabaseURL = "postgres://env/db" },
		},
		{
			name: "database url flag beats env and file", args: []string{"--database-url", "postgres://flag/db"},
			env:  map[string]string{"DATABASE_URL": "postgres://env/db", "DATABASE_URL_FILE": dbFile},
			want: func(c *config) { c.DatabaseURL = "postgres://flag/db" },
		},
		{name: "database url file missing", env: map[string]string{"DATABASE_URL_FILE": missing}, wantErr: "DATABASE_URL_FILE"},

		// TURND_API_TOKENS: env, then the _FILE variant; comma or newline separated.
		{name: "tokens", env: map[string]string{"TURND_API_TOKENS": " a, b,,c "}, want: func(c *config) { c.Tokens = []string{"a", "b", "c"} }},
		{name: "tokens only separators", env: map[string]string{"TURND_API_TOKENS": " , ,"}, want: func(*config) {}},
		{name: "tokens file", env: map[string]string{"TURND_API_TOKENS_FILE": tokFile}, want: func(c *config) { c.Tokens = []string{"t1", "t2", "t3"} }},
		{
			name: "tokens env beats file", env: map[string]string{"TURND_API_TOKENS": "e", "TURND_API_TOKENS_FILE": missing},
			want: func(c *config) { c.Tokens = []string{"e"} },
		},
		{name: "tokens file missing", env: map[string]string{"TURND_API_TOKENS_FILE": missing}, wantErr: "TURND_API_TOKENS_FILE"},

		// Bad values are usage errors naming the setting.
		{name: "grace without unit", args: []string{"--shutdown-grace", "5"}, wantErr: "shutdown-grace", usage: true},
		{name: "negative grace", args: []string{"--shutdown-grace=-1s"}, wantErr: "shutdown-grace", usage: true},
		{name: "grace env not a duration", env: map[string]string{"TURND_SHUTDOWN_GRACE": "soon"}, wantErr: "shutdown-grace", usage: true},
		{name: "lease under 1s", args: []string{"--lease-ttl", "999ms"}, wantErr: "lease-ttl", usage: true},
		{name: "lease env without unit", env: map[string]string{"TURND_LEASE_TTL": "10"}, wantErr: "lease-ttl", usage: true},
		{name: "bad log format", args: []string{"--log-format", "xml"}, wantErr: "log-format", usage: true},
		{name: "log format is case sensitive", env: map[string]string{"TURND_LOG_FORMAT": "JSON"}, wantErr: "log-format", usage: true},
		{name: "bad log level", args: []string{"--log-level", "verbose"}, wantErr: "log-level", usage: true},
		{name: "log level env", env: map[string]string{"TURND_LOG_LEVEL": "ERROR"}, want: func(c *config) { c.LogLevel = "ERROR" }},
		{name: "body limit too small", args: []string{"--max-body-bytes", "1023"}, wantErr: "max-body-bytes", usage: true},
		{name: "max calls zero", args: []string{"--max-calls", "0"}, wantErr: "max-calls", usage: true},
		{name: "max calls not a number", env: map[string]string{"TURND_MAX_CALLS": "many"}, wantErr: "max-calls", usage: true},
		{name: "unknown flag", args: []string{"--bogus"}, wantErr: "bogus", usage: true},
		{name: "positional argument", args: []string{"extra"}, wantErr: "unexpected arguments", usage: true},
		{name: "help", args: []string{"-h"}, help: true},

		// The browser guard and the callback policy.
		{
			name: "hosts, origins and callback nets from env",
			env: map[string]string{
				"TURND_ALLOWED_HOSTS": " turnd.internal, turnd.example.com:8080 ,", "TURND_CORS_ORIGINS": "https://app.example.com/,http://localhost:5173",
				"TURND_CALLBACK_ALLOW_NETS": "169.254.10.0/24", "TURND_CALLBACK_DENY_NETS": "127.0.0.0/8, 10.1.2.3, fc00::/7",
			},
			want: func(c *config) {
				c.AllowedHosts = []string{"turnd.internal", "turnd.example.com:8080"}
				c.CORSOrigins = []string{"https://app.example.com", "http://localhost:5173"}
				c.CallbackAllowNets = []netip.Prefix{netip.MustParsePrefix("169.254.10.0/24")}
				c.CallbackDenyNets = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("10.1.2.3/32"), netip.MustParsePrefix("fc00::/7")}
			},
		},
		{
			name: "hosts, origins and callback nets from flags",
			args: []string{"--allowed-hosts", "a.example", "--cors-origins", "https://b.example:8443", "--callback-allow-nets", "::1", "--callback-deny-nets", "192.168.0.0/16"},
			env:  map[string]string{"TURND_ALLOWED_HOSTS": "env.example", "TURND_CORS_ORIGINS": "https://env.example"},
			want: func(c *config) {
				c.AllowedHosts = []string{"a.example"}
				c.CORSOrigins = []string{"https://b.example:8443"}
				c.CallbackAllowNets = []netip.Prefix{netip.MustParsePrefix("::1/128")}
				c.CallbackDenyNets = []netip.Prefix{netip.MustParsePrefix("192.168.0.0/16")}
			},
		},
		{name: "wildcard origin", env: map[string]string{"TURND_CORS_ORIGINS": "*"}, wantErr: "cors-origins", usage: true},
		{name: "origin with a path", args: []string{"--cors-origins", "https://app.example.com/ui"}, wantErr: "cors-origins", usage: true},
		{name: "origin without a scheme", args: []string{"--cors-origins", "app.example.com"}, wantErr: "cors-origins", usage: true},
		{name: "allowed host with a scheme", args: []string{"--allowed-hosts", "https://a.example"}, wantErr: "allowed-hosts", usage: true},
		{name: "allowed host wildcard", args: []string{"--allowed-hosts", "*.example.com"}, wantErr: "allowed-hosts", usage: true},
		{name: "callback net not a CIDR", env: map[string]string{"TURND_CALLBACK_DENY_NETS": "10.0.0.0/33"}, wantErr: "callback-deny-nets", usage: true},
		{name: "callback net a name", args: []string{"--callback-allow-nets", "metadata.google.internal"}, wantErr: "callback-allow-nets", usage: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var stderr bytes.Buffer
			got, err := parseConfig("serve", tt.args, &stderr, envOf(tt.env))
			switch {
			case tt.help:
				if !errors.Is(err, flag.ErrHelp) {
					t.Fatalf("err = %v, want flag.ErrHelp", err)
				}
				if !strings.Contains(stderr.String(), "-lease-ttl") {
					t.Errorf("help output lacks the flags:\n%s", stderr.String())
				}
				for _, name := range []string{"TURND_ALLOWED_HOSTS", "TURND_CORS_ORIGINS", "TURND_CALLBACK_ALLOW_NETS", "TURND_CALLBACK_DENY_NETS"} {
					if !strings.Contains(stderr.String(), name) {
						t.Errorf("help output does not name %s:\n%s", name, stderr.String())
					}
				}
				return
			case tt.wantErr != "":
				if err == nil {
					t.Fatalf("parseConfig = %+v, want an error containing %q", got, tt.wantErr)
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("err = %q, want it to contain %q", err, tt.wantErr)
				}
				var ue usageError
				if errors.As(err, &ue) != tt.usage {
					t.Errorf("err = %#v: usage error = %v, want %v", err, !tt.usage, tt.usage)
				}
				return
			case err != nil:
				t.Fatalf("parseConfig: %v (stderr %q)", err, stderr.String())
			}
			want := defaults
			tt.want(&want)
			if want.PublicURL == "" {
				want.PublicURL = "http://" + want.Addr // the default follows the address
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("parseConfig =\n%+v\nwant\n%+v", got, want)
			}
		})
	}
}

func TestIsLoopback(t *testing.T) {
	t.Parallel()
	tests := []struct {
		addr string
		want bool
	}{
		{"127.0.0.1:8080", true},
		{"127.1.2.3:8080", true},
		{"localhost:8080", true},
		{"[::1]:8080", true},
		{"[::ffff:127.0.0.1]:8080", true},
		{"127.0.0.1:0", true},
		{"0.0.0.0:8080", false},
		{":8080", false}, // every interface
		{"[::]:8080", false},
		{"10.0.0.1:8080", false},
		{"192.168.1.10:80", false},
		{"example.com:80", false},
		{"LOCALHOST:8080", false}, // only the exact name is trusted
		{"localhost.example.com:80", false},
		{"127.0.0.1", false}, // no port: not a listen address
		{"", false},
		{"[::1", false},
	}
	for _, tt := range tests {
		if got := isLoopback(tt.addr); got != tt.want {
			t.Errorf("isLoopback(%q) = %v, want %v", tt.addr, got, tt.want)
		}
	}
}

// TestRun covers the subcommand dispatch in process; TestBinaryExitCodes
// checks the same through the real binary's exit codes.
func TestRun(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		args       []string
		env        map[string]string
		wantErr    string // "" for success
		usage      bool
		wantStdout string
		wantStderr string
	}{
		{name: "no subcommand", args: nil, wantErr: "subcommand is required", usage: true, wantStderr: "Usage:"},
		{name: "unknown subcommand", args: []string{"bogus"}, wantErr: `unknown subcommand "bogus"`, usage: true, wantStderr: "Usage:"},
		{name: "help", args: []string{"help"}, wantStdout: "Usage:"},
		{name: "--help", args: []string{"--help"}, wantStdout: "turnd serve"},
		{name: "version", args: []string{"version"}, wantStdout: "turnd "},
		{name: "--version", args: []string{"--version"}, wantStdout: "commit "},
		{name: "serve bad flag", args: []string{"serve", "--log-format", "xml"}, wantErr: "log-format", usage: true},
		{name: "migrate bad flag", args: []string{"migrate", "--lease-ttl", "1ms"}, wantErr: "lease-ttl", usage: true},
		{
			name: "serve refuses a public address without tokens", args: []string{"serve", "--addr", "0.0.0.0:0"},
			wantErr: "TURND_API_TOKENS",
		},
		{
			name: "serve refuses a public address with a short token", args: []string{"serve", "--addr", "0.0.0.0:0"},
			env: map[string]string{"TURND_API_TOKENS": strings.Repeat("t", 32) + ",short"}, wantErr: "API token 2 of TURND_API_TOKENS is 5 characters long",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), tt.args, &stdout, &stderr, envOf(tt.env))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("run: %v", err)
				}
			} else {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("run: err = %v, want it to contain %q", err, tt.wantErr)
				}
				var ue usageError
				if errors.As(err, &ue) != tt.usage {
					t.Errorf("usage error = %v, want %v", !tt.usage, tt.usage)
				}
			}
			if !strings.Contains(stdout.String(), tt.wantStdout) {
				t.Errorf("stdout = %q, want it to contain %q", stdout.String(), tt.wantStdout)
			}
			if !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("stderr = %q, want it to contain %q", stderr.String(), tt.wantStderr)
			}
		})
	}
}

func TestPrintVersion(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	printVersion(&b)
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("version output has %d lines, want 3:\n%s", len(lines), b.String())
	}
	if !strings.HasPrefix(lines[0], "turnd ") || !strings.HasPrefix(lines[1], "commit ") {
		t.Errorf("version output:\n%s", b.String())
	}
	if lines[2] != runtime.Version() {
		t.Errorf("go version line = %q, want %q", lines[2], runtime.Version())
	}
}

func TestCheckTokens(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("k", minOffLoopbackToken)
	for _, tt := range []struct {
		addr    string
		tokens  []string
		wantErr string
	}{
		{"127.0.0.1:8080", nil, ""},
		{"127.0.0.1:8080", []string{"x"}, ""}, // loopback: any token
		{"[::1]:8080", []string{"x"}, ""},
		{"0.0.0.0:8080", nil, "without authentication"},
		{"0.0.0.0:8080", []string{"x"}, "API token 1 of TURND_API_TOKENS is 1 characters long"},
		{":8080", []string{long, long[1:]}, "API token 2 of TURND_API_TOKENS is 31 characters long"},
		{"10.0.0.1:8080", []string{long}, ""},
	} {
		err := checkTokens(config{Addr: tt.addr, Tokens: tt.tokens})
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%s %q: %v", tt.addr, tt.tokens, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%s %q: %v, want an error containing %q", tt.addr, tt.tokens, err, tt.wantErr)
		}
	}
}

func TestServedHosts(t *testing.T) {
	t.Parallel()
	got := servedHosts(config{AllowedHosts: []string{"a.example"}, PublicURL: "https://tunnel.example:8443"})
	if strings.Join(got, ",") != "a.example,tunnel.example" {
		t.Errorf("servedHosts = %q, want the configured hosts and the public URL's", got)
	}
	if got := servedHosts(config{PublicURL: "http://127.0.0.1:8080"}); strings.Join(got, ",") != "127.0.0.1" {
		t.Errorf("servedHosts of the default public URL = %q", got)
	}
}
