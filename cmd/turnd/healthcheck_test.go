package main

import (
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
