package tool

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestApprovalConfig(t *testing.T) {
	reg, err := parseConfig(t, `
approval:
  when:
    - annotation: destructiveHint
tools:
  - name: reader
    effect: read
    http: {url: "http://127.0.0.1:9/r"}
  - name: writer
    http: {url: "http://127.0.0.1:9/w"}
  - name: fs_write
    http: {url: "http://127.0.0.1:9/fs"}
    approval:
      when:
        - pointer: /path
          matches: "^/etc/"
        - pointer: /force
          equals: true
        - pointer: /mode
          equals: 420
  - name: quiet
    http: {url: "http://127.0.0.1:9/q"}
    approval: never
  - name: loud
    effect: read
    http: {url: "http://127.0.0.1:9/l"}
    approval: always
builtin: [echo]
`)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		tool, args string
		why        string // "" for no approval
	}{
		{"reader", `{}`, ""},
		{"writer", `{}`, "destructiveHint"},
		{"echo", `{"text":"x"}`, ""}, // the echo builtin is a read
		{"fs_write", `{"path":"/etc/passwd"}`, "/path matches ^/etc/"},
		{"fs_write", `{"path":"/tmp/x"}`, ""},
		{"fs_write", `{"path":"/tmp/x","force":true}`, "/force equals true"},
		{"fs_write", `{"path":"/tmp/x","force":"true"}`, ""},
		{"fs_write", `{"mode":420.0}`, "/mode equals 420"},
		{"fs_write", `{"path":7}`, ""},
		{"quiet", `{}`, ""},
		{"loud", `{}`, "always"},
	}
	for _, c := range cases {
		spec, ok := reg.Lookup(c.tool)
		if !ok {
			t.Fatalf("no tool %s", c.tool)
		}
		why, needs := spec.NeedsApproval(json.RawMessage(c.args))
		if needs != (c.why != "") || why != c.why {
			t.Errorf("%s %s: needs %v (%q), want %q", c.tool, c.args, needs, why, c.why)
		}
	}
}

func TestApprovalConfigErrors(t *testing.T) {
	cases := []struct{ config, want string }{
		{"tools:\n  - name: a\n    http: {url: \"http://127.0.0.1:9/\"}\n    approval: sometimes\n", `line 4`},
		{"tools:\n  - name: a\n    http: {url: \"http://127.0.0.1:9/\"}\n    approval: sometimes\n", `"sometimes" must be never, always or {when: [rules]}`},
		{"tools:\n  - name: a\n    http: {url: \"http://127.0.0.1:9/\"}\n    approval: {when: []}\n", `when: must be a non-empty list`},
		{"tools:\n  - name: a\n    http: {url: \"http://127.0.0.1:9/\"}\n    approval: {when: [{pointer: path, equals: 1}]}\n", `when[0].pointer: a pointer into the arguments starts with /`},
		{"tools:\n  - name: a\n    http: {url: \"http://127.0.0.1:9/\"}\n    approval: {when: [{pointer: /p, matches: \"(\"}]}\n", `when[0].matches: error parsing regexp`},
		{"tools:\n  - name: a\n    http: {url: \"http://127.0.0.1:9/\"}\n    approval: {when: [{pointer: /p}]}\n", `exactly one of equals and matches`},
		{"tools:\n  - name: a\n    http: {url: \"http://127.0.0.1:9/\"}\n    approval: {when: [{annotation: scaryHint}]}\n", `when[0].annotation: must be one of destructiveHint`},
		{"tools:\n  - name: a\n    http: {url: \"http://127.0.0.1:9/\"}\n    approval: {when: [{annotation: readOnlyHint, matches: x}]}\n", `goes with pointer`},
		{"tools:\n  - name: a\n    http: {url: \"http://127.0.0.1:9/\"}\n    approval: {when: [{annotation: readOnlyHint, equals: 1}]}\n", `an annotation is true or false`},
		{"tools:\n  - name: a\n    http: {url: \"http://127.0.0.1:9/\"}\n    approval: {tools: [a]}\n", `tools: unknown key`},
		{"approval: maybe\ntools:\n  - name: a\n    http: {url: \"http://127.0.0.1:9/\"}\n", `line 1`},
	}
	for _, c := range cases {
		_, err := parseConfig(t, c.config)
		if err == nil || !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("config\n%s\nerr %v, want one containing %q", c.config, err, c.want)
		}
	}
}

func TestParseSessionApproval(t *testing.T) {
	a, err := ParseApproval(json.RawMessage(`{"tools":["rm"],"when":[{"pointer":"/path","matches":"secret"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	rm := &Spec{Name: "rm", Effect: "write"}
	ls := &Spec{Name: "ls", Effect: "read"}
	if why, ok := a.Needs(rm, json.RawMessage(`{}`)); !ok || why != "tool rm" {
		t.Errorf("rm: %v %q", ok, why)
	}
	if _, ok := a.Needs(ls, json.RawMessage(`{"path":"/tmp"}`)); ok {
		t.Error("ls /tmp needs approval")
	}
	if why, ok := a.Needs(ls, json.RawMessage(`{"path":"/home/secret"}`)); !ok || why != "/path matches secret" {
		t.Errorf("ls secret: %v %q", ok, why)
	}
	for _, bad := range []string{`"sometimes"`, `{"tools":"rm"}`, `{"tools":["no such/name"]}`, `{"when":[{"pointer":"/a"}]}`, `{"nope":1}`, `{}`, `[1]`, `{"when":`} {
		if _, err := ParseApproval(json.RawMessage(bad)); !errors.Is(err, ErrInvalidApproval) {
			t.Errorf("%s: err %v", bad, err)
		}
	}
	for _, ok := range []string{``, `null`, `"never"`, `"always"`} {
		if _, err := ParseApproval(json.RawMessage(ok)); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}
