package main

// The client subcommands, run as the real binary against a real
// `turnd serve` on loopback.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cli runs `turnd args...` against p with stdin and returns its exit code
// and output.
func (p *proc) cli(t *testing.T, env []string, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runTurndInput(t, childEnv(append([]string{"TURND_URL=" + p.base}, env...)...), strings.NewReader(stdin), args...)
}

// mustCLI is cli that must exit 0.
func (p *proc) mustCLI(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	code, out, errOut := p.cli(t, nil, stdin, args...)
	if code != 0 {
		t.Fatalf("turnd %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// completeURL waits (bounded) for the approval of turnID to be logged and
// returns its complete_url.
func (p *proc) completeURL(t *testing.T, turnID string) string {
	t.Helper()
	var url string
	poll(t, settleTimeout, func() error {
		for _, l := range p.logLines() {
			if u, ok := l["complete_url"].(string); ok && l["turn_id"] == turnID {
				url = u
				return nil
			}
		}
		return fmt.Errorf("no approval of %s logged within %v", turnID, settleTimeout)
	})
	return url
}

func TestCLI(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		p := startTurnd(t, procOptions{args: append([]string{"--config", exampleConfig, "--demo"}, b.args(t)...)})

		// post: a native turn from standard input, then again (replayed).
		turn := `{"id":"t1","calls":[{"id":"c1","name":"echo","arguments":{"text":"hi"}},{"id":"c2","name":"nope"}]}`
		out := p.mustCLI(t, turn, "post", "s1")
		for _, want := range []string{"turn t1", "completed", `c1  ok        echo  {"text":"hi"}`, "c2  refused   nope  unknown_tool"} {
			if !strings.Contains(out, want) {
				t.Errorf("post: no %q in\n%s", want, out)
			}
		}
		if out := p.mustCLI(t, turn, "post", "s1", "-"); !strings.Contains(out, "(replayed)") {
			t.Errorf("post again: not replayed:\n%s", out)
		}
		// A turn without an id gets a generated one; --json prints the turn.
		out = p.mustCLI(t, `{"calls":[{"id":"c3","name":"now"}]}`, "post", "--json", "s1")
		tj := decode[turnJSON](t, []byte(out))
		if !strings.HasPrefix(tj.ID, "turn_") || tj.Status != "completed" {
			t.Errorf("post --json: %+v", tj)
		}
		// A provider's message from a file.
		file := filepath.Join(t.TempDir(), "completion.json")
		chat := `{"id":"chatcmpl-1","choices":[{"message":{"role":"assistant","tool_calls":[{"id":"call_1","type":"function","function":{"name":"echo","arguments":"{\"text\":\"hi\"}"}}]}}]}`
		if err := os.WriteFile(file, []byte(chat), 0o600); err != nil {
			t.Fatal(err)
		}
		out = p.mustCLI(t, "", "post", "s1", file, "--format", "openai.chat")
		var msgs []map[string]any
		if err := json.Unmarshal([]byte(out), &msgs); err != nil || len(msgs) != 1 || msgs[0]["tool_call_id"] != "call_1" || msgs[0]["role"] != "tool" {
			t.Errorf("post --format openai.chat: %s (%v)", out, err)
		}

		// tail: the whole ledger, resumed, and as JSON.
		out = p.mustCLI(t, "", "tail", "--follow=false", "s1")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) < 10 || !strings.Contains(lines[0], "turn_received") || strings.Contains(out, "\x1b[") {
			t.Errorf("tail: %d lines (colour escapes off a terminal: %v)\n%s", len(lines), strings.Contains(out, "\x1b["), out)
		}
		if !strings.HasPrefix(strings.TrimSpace(lines[0]), "1 ") {
			t.Errorf("tail: the first line does not start with its seq: %q", lines[0])
		}
		resumed := strings.Split(strings.TrimSpace(p.mustCLI(t, "", "tail", "s1", "--after", "3", "--follow=false")), "\n")
		if len(resumed) != len(lines)-3 || strings.TrimSpace(resumed[0]) != strings.TrimSpace(lines[3]) {
			t.Errorf("tail --after 3: %d lines, first %q; want %d, %q", len(resumed), resumed[0], len(lines)-3, lines[3])
		}
		out = p.mustCLI(t, "", "tail", "--json", "--follow=false", "s1")
		for i, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if lj := decode[lineJSON](t, []byte(l)); lj.Seq != int64(i+1) {
				t.Errorf("tail --json line %d: seq %d", i, lj.Seq)
			}
		}
		if out := p.mustCLI(t, "", "tail", "--follow=false", "--color", "always", "s1"); !strings.Contains(out, "\x1b[") {
			t.Error("tail --color always: no colour")
		}

		// complete: a deferred result, then a conflicting one.
		out = p.mustCLI(t, `{"id":"ap","calls":[{"id":"a","name":"approval","arguments":{"prompt":"?"}}]}`, "post", "s2", "--async")
		if !strings.Contains(out, "turn ap") {
			t.Errorf("post --async: %s", out)
		}
		key := p.completeURL(t, "ap")
		if out := p.mustCLI(t, "", "complete", key, "--output", `{"approved":true}`); strings.TrimSpace(out) != "accepted" {
			t.Errorf("complete: %q", out)
		}
		code, _, errOut := p.cli(t, nil, "", "complete", key, "--error", "rejected:no")
		if code != 1 || !strings.Contains(errOut, "completion_conflict") {
			t.Errorf("complete --error after an output: exit %d, %s", code, errOut)
		}
		out = p.mustCLI(t, "", "turn", "s2", "ap", "--wait", "20s")
		if !strings.Contains(out, "completed") || !strings.Contains(out, `{"approved":true}`) {
			t.Errorf("turn --wait: %s", out)
		}
		// --file from standard input: text becomes a JSON string.
		p.mustCLI(t, `{"id":"ap2","calls":[{"id":"b","name":"approval","arguments":{"prompt":"?"}}]}`, "post", "s2", "--async")
		if out := p.mustCLI(t, "the report\n", "complete", p.completeURL(t, "ap2"), "--file", "-"); strings.TrimSpace(out) != "accepted" {
			t.Errorf("complete --file -: %q", out)
		}
		tj = decode[turnJSON](t, []byte(p.mustCLI(t, "", "turn", "--json", "--wait", "20s", "s2", "ap2")))
		if string(tj.Results[0].Output) != `"the report\n"` {
			t.Errorf("delivered from a file: %s", tj.Results[0].Output)
		}

		// Listing: skipped, saying so, where this turnd has no listing
		// endpoints yet (they come from a branch of their own).
		if code, out, errOut := p.cli(t, nil, "", "sessions"); strings.Contains(errOut, "does not serve GET /v1/sessions") {
			t.Logf("turnd sessions: %s (listing endpoints not here yet; the listing checks are skipped)", strings.TrimSpace(errOut))
		} else if code != 0 || !strings.Contains(out, "s1  ") || !strings.Contains(out, "s2  ") {
			t.Errorf("turnd sessions: exit %d\n%s%s", code, out, errOut)
		} else if out := p.mustCLI(t, "", "turns", "s2", "--status", "completed"); !strings.HasPrefix(out, "ap2  completed") || !strings.Contains(out, "\nap  ") {
			t.Errorf("turnd turns s2: %s", out)
		}

		// turn --wait on a turn that does not settle in time prints it as it stands.
		p.mustCLI(t, `{"id":"ap3","calls":[{"id":"c","name":"approval","arguments":{"prompt":"?"}}]}`, "post", "s3", "--async")
		if out := p.mustCLI(t, "", "turn", "s3", "ap3", "--wait", "1s"); !strings.Contains(out, "turn ap3") || strings.Contains(out, "completed") {
			t.Errorf("turn --wait 1s on a waiting turn: %s", out)
		}

		// Errors: an unknown turn, usage.
		if code, _, errOut := p.cli(t, nil, "", "turn", "s2", "nope"); code != 1 || !strings.Contains(errOut, "404 not_found") {
			t.Errorf("turn of an unknown turn: exit %d, %s", code, errOut)
		}
		for _, args := range [][]string{{"tail"}, {"turn", "s2"}, {"complete", "k"}, {"complete", "k", "--output", "1", "--error", "a:b"}, {"complete", "k", "--output", "not json"}} {
			if code, _, _ := p.cli(t, nil, "", args...); code != 2 {
				t.Errorf("turnd %s: exit %d, want 2", strings.Join(args, " "), code)
			}
		}
	})
}

// TestCLITailFollows: `turnd tail` prints lines as they are written and,
// interrupted, says where to resume.
func TestCLITailFollows(t *testing.T) {
	t.Parallel()
	p := startTurnd(t, procOptions{args: []string{"--config", exampleConfig, "--data", filepath.Join(t.TempDir(), "turnd.db")}})
	p.mustCLI(t, `{"id":"t0","calls":[{"id":"c0","name":"now"}]}`, "post", "live")
	cmd := exec.Command(turndBinary(t), "tail", "live", "--after", "2", "--interval", "20ms")
	cmd.Env = childEnv("TURND_URL=" + p.base)
	var out, errb syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	p.mustCLI(t, `{"id":"t1","calls":[{"id":"c1","name":"echo","arguments":{"text":"live"}}]}`, "post", "live")
	poll(t, settleTimeout, func() error {
		if !strings.Contains(out.String(), "t1  -  turn_settled") {
			return fmt.Errorf("tail printed no turn_settled of t1 within %v:\n%s\nstderr: %s", settleTimeout, out.String(), errb.String())
		}
		return nil
	})
	if first := strings.Fields(out.String()); first[0] != "3" {
		t.Errorf("tail --after 2 started at seq %s:\n%s", first[0], out.String())
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		done <- err
		if err != nil {
			t.Errorf("tail after SIGINT: %v; stderr: %s", err, errb.String())
		}
	case <-time.After(exitTimeout):
		t.Fatal("tail did not stop on SIGINT")
	}
	if !strings.Contains(errb.String(), "resume with --after 8") {
		t.Errorf("tail's goodbye: %q", errb.String())
	}
}

// TestCLIAuth: --token / TURND_TOKEN reach a server with API tokens, and
// `turnd complete` signs with TURND_COMPLETION_SIGNING_SECRET.
func TestCLIAuth(t *testing.T) {
	t.Parallel()
	const (
		token  = "0123456789abcdef0123456789abcdef-cli"
		secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	)
	p := startTurnd(t, procOptions{
		args: []string{"--config", exampleConfig, "--demo", "--data", filepath.Join(t.TempDir(), "turnd.db")},
		env:  []string{"TURND_API_TOKENS=" + token, "TURND_COMPLETION_SIGNING_SECRET=" + secret},
	})
	body := `{"id":"ap","calls":[{"id":"a","name":"approval","arguments":{"prompt":"?"}}]}`
	if code, _, errOut := p.cli(t, nil, body, "post", "s", "--async"); code != 1 || !strings.Contains(errOut, "401 unauthorized") {
		t.Errorf("post without a token: exit %d, %s", code, errOut)
	}
	if code, _, errOut := p.cli(t, []string{"TURND_TOKEN=" + token}, body, "post", "s", "--async"); code != 0 {
		t.Fatalf("post with TURND_TOKEN: exit %d, %s", code, errOut)
	}
	key := p.completeURL(t, "ap")
	if code, _, errOut := p.cli(t, nil, "", "complete", key, "--output", "true"); code != 1 || !strings.Contains(errOut, "bad_signature") {
		t.Errorf("unsigned complete: exit %d, %s", code, errOut)
	}
	if code, out, errOut := p.cli(t, []string{"TURND_COMPLETION_SIGNING_SECRET=" + secret}, "", "complete", key, "--output", "true"); code != 0 || strings.TrimSpace(out) != "accepted" {
		t.Errorf("signed complete: exit %d, %s %s", code, out, errOut)
	}
	if out := p.mustCLI(t, "", "turn", "s", "ap", "--token", token, "--wait", "20s"); !strings.Contains(out, "completed") {
		t.Errorf("turn --token: %s", out)
	}
}
