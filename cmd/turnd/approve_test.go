package main

// turnd approvals, approve and reject, run as the real binary against a
// real `turnd serve` whose `save` tool waits for approval (the tools of
// ui_approvals_browser_test.go).

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

func TestCLIApprovals(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		at := newApprovalTools(t)
		p := startTurnd(t, procOptions{args: append([]string{"--config", at.config(t)}, b.args(t)...)})
		// The note has a C1 control character (CSI), raw in the JSON: a
		// terminal must not get it from turnd approvals.
		for _, id := range []string{"a", "e", "r"} {
			p.must(202, "POST", "/v1/sessions/cli/turns", fmt.Sprintf(`{"id":"t-%s","calls":[
				{"id":"c-%s","name":"save","arguments":{"path":"%s.txt","note":"%s"}}]}`, id, id, id, "x\u009b31my"), "Prefer", "respond-async")
			poll(t, settleTimeout, func() error {
				if tj := decode[turnJSON](t, p.must(200, "GET", "/v1/sessions/cli/turns/t-"+id, nil)); tj.Status != "waiting" {
					return fmt.Errorf("turn t-%s: %s, want waiting", id, tj.Status)
				}
				return nil
			})
		}
		waitApprovals(t, p, 3)

		// approvals: text, newest first, then JSON.
		out := p.mustCLI(t, "", "approvals")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 3 || !strings.HasPrefix(lines[0], "cli  t-r  c-r  save  ") || !strings.HasPrefix(lines[2], "cli  t-a  c-a  save  ") {
			t.Errorf("turnd approvals:\n%s", out)
		}
		if strings.ContainsRune(out, '\u009b') || !strings.Contains(out, `\u009b`) {
			t.Errorf("turnd approvals prints the arguments' control character raw:\n%q", out)
		}
		if !strings.Contains(lines[0], `"path":"r.txt"`) || !strings.Contains(lines[0], "rule ") {
			t.Errorf("turnd approvals: no arguments or rule in %q", lines[0])
		}
		var first struct {
			SessionID string          `json:"session_id"`
			CallID    string          `json:"call_id"`
			Arguments json.RawMessage `json:"arguments"`
			Rule      string          `json:"rule"`
		}
		out = p.mustCLI(t, "", "approvals", "--json", "--limit", "1")
		if err := json.Unmarshal([]byte(out), &first); err != nil || first.CallID != "c-r" || first.Rule == "" || !strings.Contains(string(first.Arguments), "r.txt") {
			t.Errorf("turnd approvals --json --limit 1: %s (%v)", out, err)
		}

		// Bad input: the CLI's own checks, exit 2, nothing sent.
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"approve", "cli", "t-a"}, "wrong number of arguments"},
			{[]string{"approve", "cli", "t-a", "c-a", "--arguments", `{"path": `}, "--arguments is not a JSON object"},
			{[]string{"approve", "cli", "t-a", "c-a", "--arguments", `["a.txt"]`}, "--arguments is not a JSON object"},
			{[]string{"approve", "cli", "t-a", "c-a", "--arguments", `null`}, "--arguments is not a JSON object"},
			{[]string{"reject", "cli", "t-r", "c-r"}, "--message is required"},
			{[]string{"reject", "cli", "t-r", "c-r", "--message", "  "}, "--message is required"},
		} {
			if code, _, errOut := p.cli(t, nil, "", tc.args...); code != 2 || !strings.Contains(errOut, tc.want) {
				t.Errorf("turnd %s: exit %d, %s; want 2 and %q", strings.Join(tc.args, " "), code, errOut, tc.want)
			}
		}
		at.noRun(t, "nothing was approved yet")

		// approve, as posted; again; then a different decision.
		if out := p.mustCLI(t, "", "approve", "cli", "t-a", "c-a", "--by", "carol"); strings.TrimSpace(out) != "approved accepted" {
			t.Errorf("turnd approve: %q", out)
		}
		if got := at.next(t); got.CallID != "c-a" {
			t.Errorf("the tool ran %s, want c-a", got.CallID)
		}
		if out := p.mustCLI(t, "", "approve", "cli", "t-a", "c-a"); strings.TrimSpace(out) != "approved already_decided" {
			t.Errorf("turnd approve again: %q", out)
		}
		if code, _, errOut := p.cli(t, nil, "", "reject", "cli", "t-a", "c-a", "--message", "no"); code != 1 || !strings.Contains(errOut, "rejecting call c-a of turn t-a in session cli") || !strings.Contains(errOut, "409") {
			t.Errorf("turnd reject after approve: exit %d, %s", code, errOut)
		}

		// approve with edited arguments: refused by the tool's schema
		// (from a file), then taken (from standard input).
		bad := writeFile(t, t.TempDir(), "bad.json", `{"path": 7}`)
		if code, _, errOut := p.cli(t, nil, "", "approve", "cli", "t-e", "c-e", "--arguments", "@"+bad); code != 1 || !strings.Contains(errOut, "422 invalid_arguments") || !strings.Contains(errOut, "nothing ran") {
			t.Errorf("turnd approve --arguments @bad.json: exit %d, %s", code, errOut)
		}
		if code, _, errOut := p.cli(t, nil, "", "approve", "cli", "t-e", "c-e", "--arguments", "@"+filepath.Join(t.TempDir(), "none.json")); code != 1 || !strings.Contains(errOut, "reading --arguments") {
			t.Errorf("turnd approve --arguments @missing: exit %d, %s", code, errOut)
		}
		at.noRun(t, "the edited arguments were refused")
		if out := p.mustCLI(t, `{"path": "edited.txt"}`, "approve", "cli", "t-e", "c-e", "--arguments", "@-", "--json"); !strings.Contains(out, `"edited":true`) || !strings.Contains(out, `"decision":"approved"`) {
			t.Errorf("turnd approve --arguments @- --json: %s", out)
		}
		if got := at.next(t); got.CallID != "c-e" || !strings.Contains(string(got.Arguments), `"path":"edited.txt"`) {
			t.Errorf("the edited call ran as %s with %s", got.CallID, got.Arguments)
		}

		// reject, and what the model reads.
		if out := p.mustCLI(t, "", "reject", "cli", "t-r", "c-r", "--message", "use the staging copy", "--by", "carol"); strings.TrimSpace(out) != "rejected accepted" {
			t.Errorf("turnd reject: %q", out)
		}
		out = p.mustCLI(t, "", "turn", "cli", "t-r", "--wait", "20s", "--json")
		if tj := decode[turnJSON](t, []byte(out)); len(tj.Results) != 1 || tj.Results[0].Status != "rejected" || !strings.Contains(string(tj.Results[0].Output), "use the staging copy") {
			t.Errorf("the rejected turn: %s", out)
		}
		at.noRun(t, "the call was rejected")
		if out := p.mustCLI(t, "", "tail", "cli", "--follow=false"); !strings.Contains(out, "call_decided") {
			t.Errorf("turnd tail shows no call_decided line:\n%s", out)
		}

		// Server problems, shown with their code and detail.
		if code, _, errOut := p.cli(t, nil, "", "approve", "cli", "t-r", "nobody"); code != 1 || !strings.Contains(errOut, "404 not_found") {
			t.Errorf("turnd approve of an unknown call: exit %d, %s", code, errOut)
		}
		if out := p.mustCLI(t, "", "approvals"); strings.TrimSpace(out) != "" {
			t.Errorf("turnd approvals after every decision: %q", out)
		}
		if code, _, errOut := p.cli(t, []string{"TURND_URL=http://" + freeAddr(t)}, "", "approvals"); code != 1 || errOut == "" {
			t.Errorf("turnd approvals with no server: exit %d, %s", code, errOut)
		}
	})
}
