package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/turnd/turnd/tool"
)

// TestCheckConfigBinary runs `turnd check-config` as users do: exit 0
// with a summary for a valid file, 1 with each problem at its
// FILE:LINE:COLUMN, 2 on a usage error.
func TestCheckConfigBinary(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := writeFile(t, dir, "bad.yaml", "tools:\n  - name: a\n    http: {url: 'http://h/', timeout: 30}\n    colour: red\n"+
		"  - name: b\n    http: {url: 'http://h/', verb: GET}\n")
	envCfg := writeFile(t, dir, "env.yaml", "tools:\n  - name: a\n    http:\n      url: http://h/\n      headers: {Authorization: 'Bearer ${CHECK_CONFIG_TOKEN}'}\n")
	stdio := writeFile(t, dir, "stdio.yaml", "tools:\n  - mcp: {command: [no-such-program-anywhere]}\n  - mcp: {url: 'http://"+freeAddr(t)+"/mcp'}\n")
	example, err := filepath.Abs("../../examples/turnd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name         string
		env          []string
		args         []string
		code         int
		stdout       string   // exactly
		stderr       []string // lines it must contain, in order
		stderrAbsent string
	}{
		{name: "valid", args: []string{example}, code: 0,
			stdout: example + ": valid: 4 tools (4 builtin, 1 deferred), 0 mcp servers\n"},
		{name: "mcp servers are not started or reached", args: []string{stdio}, code: 0,
			stdout: stdio + ": valid: 0 tools, 2 mcp servers (1 http, 1 stdio)\n"},
		{name: "invalid", args: []string{bad}, code: 1, stderr: []string{
			bad + `:3:39: tool "a": schema: tools[0].http.timeout: expected string, got number`,
			bad + `:4:5: tool "a": unknown field "colour"`,
			bad + `:6:30: tool "b": schema: unknown key "verb" in tools[1].http`,
			"turnd: " + bad + ": 3 problems"}},
		{name: "unset variable", args: []string{envCfg}, code: 1, stderr: []string{
			envCfg + `:5:32: tool "a": http.headers.Authorization: environment variable CHECK_CONFIG_TOKEN is not set`}},
		{name: "variable from the environment", env: []string{"CHECK_CONFIG_TOKEN=s3cr3t"}, args: []string{envCfg}, code: 0,
			stdout: envCfg + ": valid: 1 tool (1 http), 0 mcp servers\n", stderrAbsent: "s3cr3t"},
		{name: "missing file", args: []string{filepath.Join(dir, "nope.yaml")}, code: 1, stderr: []string{"no such file or directory"}},
		{name: "no file", code: 2, stderr: []string{"Usage: turnd check-config FILE", "turnd: check-config: one FILE is required"}},
		{name: "two files", args: []string{bad, bad}, code: 2, stderr: []string{"one FILE is required"}},
		{name: "unknown flag", args: []string{"--strict", bad}, code: 2, stderr: []string{"flag provided but not defined: -strict"}},
		{name: "schema with a file", args: []string{"--print-schema", bad}, code: 2, stderr: []string{"--print-schema takes no FILE"}},
		{name: "help", args: []string{"-h"}, code: 0, stderr: []string{"Usage: turnd check-config FILE"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := runTurnd(t, childEnv(tt.env...), append([]string{"check-config"}, tt.args...)...)
			if code != tt.code {
				t.Errorf("exit code %d, want %d\nstdout: %s\nstderr: %s", code, tt.code, stdout, stderr)
			}
			if tt.stdout != "" && stdout != tt.stdout {
				t.Errorf("stdout %q, want %q", stdout, tt.stdout)
			}
			rest := stderr
			for _, want := range tt.stderr {
				i := strings.Index(rest, want)
				if i < 0 {
					t.Errorf("stderr lacks (in order) %q:\n%s", want, stderr)
					break
				}
				rest = rest[i+len(want):]
			}
			if tt.stderrAbsent != "" && strings.Contains(stdout+stderr, tt.stderrAbsent) {
				t.Errorf("the output shows %q", tt.stderrAbsent)
			}
		})
	}
}

// TestCheckConfigPrintSchema: --print-schema prints the schema check-config
// uses, as committed in tool/turnd.schema.json.
func TestCheckConfigPrintSchema(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := runTurnd(t, childEnv(), "check-config", "--print-schema")
	if code != 0 || !bytes.Equal([]byte(stdout), tool.ConfigSchema()) {
		t.Fatalf("exit %d, stdout of %d bytes (want the %d of tool.ConfigSchema)\n%s", code, len(stdout), len(tool.ConfigSchema()), stderr)
	}
	if !strings.Contains(stdout, `"$schema": "https://json-schema.org/draft/2020-12/schema"`) {
		t.Error("the schema does not name draft 2020-12")
	}
}
