package main

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// `turnd healthcheck` (the container health check of a distroless image)
// exits 0 against a ready turnd, found from TURND_ADDR or --url, and 1 when
// nothing answers; a bad URL is a usage error.
func TestHealthcheck(t *testing.T) {
	t.Parallel()
	p := startTurnd(t, procOptions{env: []string{"TURND_DATA=" + filepath.Join(t.TempDir(), "turnd.db")}})
	_, port, _ := strings.Cut(p.addr, ":")
	dead := freeAddr(t)
	tests := []struct {
		name     string
		env      []string
		args     []string
		code     int
		inOutput string
	}{
		{"TURND_ADDR", []string{"TURND_ADDR=" + p.addr}, nil, 0, `"status":"ready"`},
		{"unspecified host", []string{"TURND_ADDR=:" + port}, []string{"--live"}, 0, `"status":"ok"`},
		{"--url", nil, []string{"--url", p.base + "/healthz"}, 0, `"status":"ok"`},
		{"nothing listening", []string{"TURND_ADDR=" + dead}, nil, 1, "connection refused"},
		{"not ready", nil, []string{"--url", p.base + "/nowhere"}, 1, "answered 404"},
		{"bad url", nil, []string{"--url", "::bad"}, 2, "healthcheck"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := runTurnd(t, childEnv(tt.env...), append([]string{"healthcheck"}, tt.args...)...)
			if code != tt.code || !strings.Contains(stdout+stderr, tt.inOutput) {
				t.Errorf("exit %d, output %q %q; want exit %d and %q", code, stdout, stderr, tt.code, tt.inOutput)
			}
		})
	}
}

// The start-up line says which collector target serve runs with: its own
// default, or GOGC from the environment, which overrides it.
func TestStartupLogStatesGOGC(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		env        []string
		gogc, from string
	}{
		{[]string{"GOGC="}, "400", "turnd's default (GOGC overrides it)"},
		{[]string{"GOGC=150"}, "150", "GOGC"},
	} {
		p := startTurnd(t, procOptions{env: append(tt.env, "TURND_DATA="+filepath.Join(t.TempDir(), "turnd.db"))})
		var line map[string]any
		for _, l := range strings.Split(p.stderr.String(), "\n") {
			var rec map[string]any
			if json.Unmarshal([]byte(l), &rec) == nil && rec["msg"] == "turnd serving" {
				line = rec
			}
		}
		if line == nil || line["gogc"] != tt.gogc || line["gogc_from"] != tt.from || line["version"] == nil {
			t.Errorf("with %v the start-up line is %v, want gogc %s from %s", tt.env, line, tt.gogc, tt.from)
		}
	}
}

// The approval builtin logs a call's complete_url (its completion key), and
// gives it as the parked call's output, only in --demo mode; without it no
// key reaches the log or the turn.
func TestDemoModeAloneLogsKeys(t *testing.T) {
	t.Parallel()
	for _, demo := range []bool{false, true} {
		args := []string{"--config", exampleConfig, "--data", filepath.Join(t.TempDir(), "turnd.db")}
		if demo {
			args = append(args, "--demo")
		}
		p := startTurnd(t, procOptions{args: args})
		posted := p.must(http.StatusAccepted, http.MethodPost, "/v1/sessions/s/turns",
			`{"id":"t","calls":[{"id":"a1","name":"approval","arguments":{"prompt":"ok?"}}]}`, "Content-Type", "application/json")
		// The parked call's output is its complete_url in demo mode only.
		read := p.must(http.StatusOK, http.MethodGet, "/v1/sessions/s/turns/t", nil)
		for _, body := range [][]byte{posted, read} {
			if got := strings.Contains(string(body), `"output":{"complete_url":"`+p.base+`/v1/complete/ck_`); got != demo {
				t.Errorf("demo=%v: the complete URL in the turn: %v\n%s", demo, got, body)
			}
			if !demo && strings.Contains(string(body), "ck_") {
				t.Errorf("a key in the turn without --demo:\n%s", body)
			}
		}
		logs := p.stderr.String()
		if !strings.Contains(logs, "approval requested") {
			t.Fatalf("demo=%v: no approval line:\n%s", demo, logs)
		}
		if got := strings.Contains(logs, "/v1/complete/ck_"); got != demo {
			t.Errorf("demo=%v: a complete URL in the log: %v\n%s", demo, got, logs)
		}
	}
}
