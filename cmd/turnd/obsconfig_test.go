package main

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestParseObservabilityConfig covers the metrics and shutdown-drain
// settings.
func TestParseObservabilityConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tokFile := writeFile(t, dir, "metrics-token", "from-file\n")
	missing := filepath.Join(dir, "missing")
	type got struct {
		delay       time.Duration
		addr, token string
	}
	for _, tt := range []struct {
		name    string
		args    []string
		env     map[string]string
		want    got
		wantErr string
	}{
		{name: "defaults", want: got{}},
		{name: "default delay beyond loopback", args: []string{"--addr", ":8080"}, env: map[string]string{"TURND_API_TOKENS": "t"}, want: got{delay: 5 * time.Second}},
		{name: "explicit zero delay beyond loopback", args: []string{"--addr", ":8080", "--shutdown-delay", "0s"}, env: map[string]string{"TURND_API_TOKENS": "t"}, want: got{}},
		{name: "flags", args: []string{"--shutdown-delay", "5s", "--metrics-addr", "127.0.0.1:9090"}, want: got{5 * time.Second, "127.0.0.1:9090", ""}},
		{
			name: "env", env: map[string]string{"TURND_SHUTDOWN_DELAY": "2s", "TURND_METRICS_ADDR": ":9090", "TURND_METRICS_TOKEN": "tok"},
			want: got{2 * time.Second, ":9090", "tok"},
		},
		{name: "token file", env: map[string]string{"TURND_METRICS_TOKEN_FILE": tokFile}, want: got{token: "from-file"}},
		{name: "token env beats its file", env: map[string]string{"TURND_METRICS_TOKEN": "env", "TURND_METRICS_TOKEN_FILE": missing}, want: got{token: "env"}},
		{name: "token file missing", env: map[string]string{"TURND_METRICS_TOKEN_FILE": missing}, wantErr: "TURND_METRICS_TOKEN_FILE"},
		{name: "delay without unit", args: []string{"--shutdown-delay", "5"}, wantErr: "shutdown-delay"},
		{name: "negative delay", env: map[string]string{"TURND_SHUTDOWN_DELAY": "-1s"}, wantErr: "shutdown-delay"},
		{name: "metrics address without port", args: []string{"--metrics-addr", "localhost"}, wantErr: "metrics-addr"},
		{name: "metrics address is the main one", args: []string{"--addr", "127.0.0.1:8080", "--metrics-addr", "127.0.0.1:8080"}, wantErr: "metrics-addr"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var stderr bytes.Buffer
			c, err := parseConfig("serve", tt.args, &stderr, envOf(tt.env))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one naming %q", err, tt.wantErr)
				}
				var ue usageError
				if strings.HasSuffix(tt.wantErr, "_FILE") == errors.As(err, &ue) {
					t.Errorf("err = %#v: a bad value is a usage error, an unreadable file is not", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if g := (got{c.ShutdownDelay, c.MetricsAddr, c.MetricsToken}); g != tt.want {
				t.Errorf("got %+v, want %+v", g, tt.want)
			}
		})
	}
}
