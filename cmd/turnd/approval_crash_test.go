package main

// Approvals across a killed process: a call parked for approval by one
// turnd is decided at another started on the same database, and an
// approved call whose process dies during its tool's attempt is not run
// again.

import (
	"fmt"
	"testing"
)

// approvalCrashConfig is the crash rig's tools plus gated, a write that
// always needs approval.
func approvalCrashConfig(t *testing.T, ts *toolServer) string {
	t.Helper()
	cfg := fmt.Sprintf(`tools:
  - name: read
    effect: read
    http: {url: %[1]s/read, timeout: 30s}
  - name: gated
    effect: write
    approval: always
    http: {url: %[1]s/write, timeout: 30s}
`, ts.srv.URL)
	return writeConfigFile(t, cfg)
}

func TestApprovalAcrossKilledProcesses(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		t.Run("killed between park and decision", func(t *testing.T) {
			ts := newToolServer(t)
			args := append([]string{"--config", approvalCrashConfig(t, ts), "--lease-ttl", "1s"}, b.args(t)...)
			first := startTurnd(t, procOptions{name: "first", args: args})
			first.must(202, "POST", "/v1/sessions/s/turns", `{"id":"t","calls":[{"id":"r","name":"read","arguments":{}},{"id":"g","name":"gated","arguments":{"n":1}}]}`)
			first.kill()
			second := startTurnd(t, procOptions{name: "second", args: args})
			second.must(200, "POST", "/v1/sessions/s/turns/t/calls/g/decision", `{"decision":"approve","by":"ana"}`)
			tr, body := second.awaitSettled("s", "t")
			if tr.Status != "completed" || tr.result(t, "g").Status != "ok" {
				t.Fatalf("after the decision: %s", body)
			}
			if n := len(ts.executions("g")); n != 1 {
				t.Fatalf("gated ran %d times, want once", n)
			}
		})
		t.Run("killed while the approved call runs", func(t *testing.T) {
			ts := newToolServer(t)
			args := append([]string{"--config", approvalCrashConfig(t, ts), "--lease-ttl", "1s"}, b.args(t)...)
			first := startTurnd(t, procOptions{name: "first", args: args})
			first.must(202, "POST", "/v1/sessions/s/turns", `{"id":"t","calls":[{"id":"g","name":"gated","arguments":{}}]}`)
			ts.holdFirst("g")
			first.must(200, "POST", "/v1/sessions/s/turns/t/calls/g/decision", `{"decision":"approve"}`)
			ts.waitArrival(first, "g")
			first.kill()
			second := startTurnd(t, procOptions{name: "second", args: args})
			tr, body := second.awaitSettled("s", "t")
			if r := tr.result(t, "g"); r.Status != "error" || r.Error == nil || r.Error.Code != "interrupted" {
				t.Fatalf("the approved call cut short: %s", body)
			}
			if n := len(ts.executions("g")); n != 1 {
				t.Fatalf("gated ran %d times, want once", n)
			}
			// Its decision stands: a second one is refused.
			if resp, _ := second.do("POST", "/v1/sessions/s/turns/t/calls/g/decision", `{"decision":"reject"}`); resp.StatusCode != 409 {
				t.Fatalf("a decision after the run: %d", resp.StatusCode)
			}
		})
	})
}
