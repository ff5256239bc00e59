package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"
)

// TestPoisonTools calls tools that answer what the store cannot hold
// (invalid UTF-8, NUL), a 1 GiB body, nothing at all (past their
// timeout) and a body cut in the middle; each is a write that turnd does
// not retry, followed in its turn by an ordinary write. Every turn must
// settle with a 200, the following write must run, and after a SIGKILL
// and a restart (recovery, several leases) no poison tool may have run
// twice, nor turnd's memory have held the 1 GiB.
func TestPoisonTools(t *testing.T) {
	r := pgRig(t, "--lease-ttl", "1s")
	r.rss = poisonRSSBound
	p := r.start("turnd")
	began := time.Now()
	rounds := size(1, 5)

	var bad tally
	defer bad.report(t)
	// The tools of a round run at once; rounds one after the other, so
	// that one 1 GiB body at a time goes through turnd.
	for round := 0; round < rounds; round++ {
		var wg sync.WaitGroup
		for _, tool := range PoisonTools {
			wg.Add(1)
			go func() {
				defer wg.Done()
				session, id := "poison-"+tool, fmt.Sprintf("t%d", round)
				body := fmt.Sprintf(`{"id":%q,"calls":[{"id":"%s-p","name":%q,"arguments":{}},{"id":"%s-w","name":"write","arguments":{}}]}`, id, id, tool, id)
				r.rec.Posted(session, id)
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
				defer cancel()
				a, err := client.Do(ctx, http.MethodPost, p.Base+"/v1/sessions/"+session+"/turns", []byte(body), "Prefer", "wait=120")
				if err != nil {
					bad.add("a poison turn's POST failed", "%s: %v", tool, err)
					return
				}
				if a.Status != http.StatusOK {
					bad.add("a poison turn not answered 200 settled", "%s: status %d: %s", tool, a.Status, clip(a.Body))
					return
				}
				var tj Turn
				if err := json.Unmarshal(a.Body, &tj); err != nil {
					bad.add("a poison turn's answer is not JSON", "%s: %v: %s", tool, err, clip(a.Body))
					return
				}
				r.rec.Answered(tj)
				if len(tj.Results) != 2 {
					bad.add("a poison turn without its two results", "%s: %s", tool, clip(a.Body))
					return
				}
				var after Result
				_ = json.Unmarshal(tj.Results[1], &after)
				if after.Status != "ok" {
					bad.add("the write after a poison call did not run", "%s: %s", tool, tj.Results[1])
				}
			}()
		}
		wg.Wait()
		t.Logf("poison round %d: peak RSS so far %d MiB", round+1, p.PeakRSS()>>20)
	}

	// Recovery must not run any of them again: a crash, then several
	// leases for the restarted process to find work left over.
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(4 * time.Second) // four leases of the restarted process
	rep := r.check(p, CheckOptions{})
	t.Logf("chaos: poison: %d turns of %d poison tools in %v; the 1 GiB tool's bodies: %d MiB read by turnd; executions %v; calls by tool and status %v; error codes %v; %d ledger lines",
		rep.Turns, len(PoisonTools), time.Since(began).Round(time.Second), r.ts.HugeWritten()>>20, r.ts.Totals(), r.rec.Statuses(), r.rec.ErrorCodes(), rep.Lines)
}
