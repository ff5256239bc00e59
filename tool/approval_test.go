package tool

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
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

// TestMCPApprovalByAnnotations: an mcp entry's rules over annotations use
// the server's hints when they are trusted, and the MCP defaults
// (destructive, open world) when they are not or are missing.
func TestMCPApprovalByAnnotations(t *testing.T) {
	t.Parallel()
	rig := newMCPRig(t, "")
	no := false
	rig.addTool(&mcp.Tool{Name: "look", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: &no, OpenWorldHint: &no}}, textResult("seen"))
	rig.addTool(&mcp.Tool{Name: "fetch", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: &no}}, textResult("fetched"))
	rig.addTool(&mcp.Tool{Name: "append", Annotations: &mcp.ToolAnnotations{DestructiveHint: &no, OpenWorldHint: &no}}, textResult("appended"))
	rig.addTool(&mcp.Tool{Name: "wipe"}, textResult("wiped"))
	for _, trust := range []bool{true, false} {
		t.Run(fmt.Sprintf("trust_annotations=%v", trust), func(t *testing.T) {
			t.Parallel()
			extra := fmt.Sprintf("      trust_annotations: %v\n    approval:\n      when:\n        - annotation: destructiveHint\n        - annotation: openWorldHint\n", trust)
			l, _ := openLive(t, mcpConfig(rig.url(), extra), nil)
			r := l.Registry()
			want := map[string]string{"look": "", "fetch": "openWorldHint", "append": "", "wipe": "destructiveHint"}
			if !trust {
				want = map[string]string{"look": "destructiveHint", "fetch": "destructiveHint", "append": "destructiveHint", "wipe": "destructiveHint"}
			}
			for name, why := range want {
				spec, ok := r.Lookup(name)
				if !ok {
					t.Fatalf("no tool %s", name)
				}
				got, needs := spec.NeedsApproval(json.RawMessage(`{}`))
				if got != why || needs != (why != "") {
					t.Errorf("%s: needs %v (%q), want %q", name, needs, got, why)
				}
			}
		})
	}
}

// TestApprovalPending: a tool with an approval policy takes a pending
// block, whose deadline bounds the wait for a decision; without either,
// pending is refused.
func TestApprovalPending(t *testing.T) {
	t.Parallel()
	reg, err := parseConfig(t, `
tools:
  - name: rm
    approval: always
    pending: {deadline: 10m, on_timeout: fail_turn}
    http: {url: "http://127.0.0.1:9/rm"}
  - name: shout
    builtin: echo
    approval: always
    pending: {deadline: 1h}
`)
	if err != nil {
		t.Fatal(err)
	}
	rm, _ := reg.Lookup("rm")
	shout, _ := reg.Lookup("shout")
	if rm.Pending.Deadline != "10m" || rm.Pending.OnTimeout != "fail_turn" || shout.Pending.Deadline != "1h" {
		t.Fatalf("pending %+v %+v", rm.Pending, shout.Pending)
	}
	for _, bad := range []string{
		"tools:\n  - name: a\n    pending: {deadline: 10m}\n    http: {url: \"http://127.0.0.1:9/\"}\n",
		"tools:\n  - name: a\n    approval: always\n    pending: {deadline: forever}\n    http: {url: \"http://127.0.0.1:9/\"}\n",
		"tools:\n  - name: a\n    builtin: echo\n    pending: {deadline: 1h}\n",
	} {
		if _, err := parseConfig(t, bad); err == nil {
			t.Errorf("accepted:\n%s", bad)
		}
	}
}
