package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// delivery is one POST to a completion key and its answer.
type delivery struct {
	version int    // which payload: 1 and 2 race, 3 is the late, large one
	code    int    // HTTP status (0: no answer)
	status  string // the DeliveryAck's status on 200
}

// TestReplicasRace runs two turnds on one database and parks calls with
// deadlines between 0.4 and 1.5 s; each key's result is delivered to both
// replicas at once, at a random moment around its deadline, sometimes
// with a second, different result; some turns are cancelled meanwhile;
// some keys get a large payload again and again after they resolved.
// Every key resolves exactly once: an accepted delivery is the call's
// result, a call that timed out or was cancelled accepted none, and late
// payloads are recorded once each, projected.
func TestReplicasRace(t *testing.T) {
	r := pgRig(t, "--lease-ttl", "1s")
	replicas := []*Turnd{r.start("replica-a"), r.start("replica-b")}

	const posters, callsPerTurn = 4, 4
	turnsPer := size(10, 150)
	ctx, cancel := context.WithTimeout(context.Background(), size(90*time.Second, 20*time.Minute))
	defer cancel()
	began := time.Now()

	var (
		mu      sync.Mutex
		acks    = map[string][]delivery{} // key → deliveries
		keyOf   = map[[3]string]string{}  // (session, turn, call) → key
		cancels = map[int]int{}           // status → count
		wg      sync.WaitGroup
	)
	big := strings.Repeat("late ", 256<<10/5)
	deliver := func(p *Turnd, key string, version int) {
		defer wg.Done()
		body := fmt.Sprintf(`{"output":{"key":%q,"v":%d}}`, key, version)
		if version == 3 {
			body = fmt.Sprintf(`{"output":{"key":%q,"v":3,"pad":%q}}`, key, big)
		}
		a, err := client.Do(ctx, http.MethodPost, p.Base+"/v1/complete/"+key, []byte(body))
		d := delivery{version: version, code: a.Status}
		if err == nil && a.Status == http.StatusOK {
			var ack struct {
				Status string `json:"status"`
			}
			_ = json.Unmarshal(a.Body, &ack)
			d.status = ack.Status
		}
		mu.Lock()
		acks[key] = append(acks[key], d)
		mu.Unlock()
	}
	// The deliverer: each parked key gets its deliveries from goroutines
	// of its own, at random moments around its deadline.
	// A call reaches the tool again when the other replica takes its
	// turn over (a lease not renewed in time): its key is the same.
	parkedAll, noMore := make(chan struct{}), make(chan struct{})
	reparked := 0
	go func() {
		defer close(parkedAll)
		rng := rand.New(rand.NewPCG(2, uint64(began.UnixNano())))
		for {
			var pc Parked
			select {
			case pc = <-r.ts.Parked():
			case <-noMore:
				select {
				case pc = <-r.ts.Parked():
				default:
					return
				}
			case <-ctx.Done():
				return
			}
			mu.Lock()
			k := [3]string{pc.SessionID, pc.TurnID, pc.CallID}
			if _, again := keyOf[k]; again {
				reparked++
				mu.Unlock()
				continue
			}
			keyOf[k] = pc.Key
			mu.Unlock()
			delay := time.Duration(rng.IntN(1800)) * time.Millisecond
			second := rng.IntN(4) == 0
			late := rng.IntN(3) == 0
			seed := rng.Uint64()
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(seed, 3))
				select {
				case <-time.After(delay):
				case <-ctx.Done():
					return
				}
				// The same result to both replicas at once, and sometimes
				// another one to either.
				var round sync.WaitGroup
				targets := []*Turnd{replicas[0], replicas[1], replicas[rng.IntN(2)]}
				for i, v := range []int{1, 1, 2} {
					if v == 2 && !second {
						continue
					}
					wg.Add(1)
					round.Add(1)
					go func() {
						defer round.Done()
						deliver(targets[i], pc.Key, v)
					}()
				}
				round.Wait()
				if !late {
					return
				}
				select { // after every deadline
				case <-time.After(2 * time.Second):
				case <-ctx.Done():
					return
				}
				for i := range 3 {
					wg.Add(1)
					deliver(replicas[i%2], pc.Key, 3)
				}
			}()
		}
	}()

	var posting sync.WaitGroup
	for g := 0; g < posters; g++ {
		posting.Add(1)
		go func() {
			defer posting.Done()
			rng := rand.New(rand.NewPCG(uint64(g), uint64(began.UnixNano())))
			session := fmt.Sprintf("rep-%d", g)
			for i := 0; i < turnsPer && ctx.Err() == nil; i++ {
				id := fmt.Sprintf("t%d", i)
				calls := make([]string, callsPerTurn)
				for c := range calls {
					calls[c] = fmt.Sprintf(`{"id":"%s-c%d","name":"defer","arguments":{"pending":{"deadline":"%dms"}}}`, id, c, 400+rng.IntN(1100))
				}
				body := fmt.Sprintf(`{"id":%q,"mode":"concurrent","calls":[%s]}`, id, strings.Join(calls, ","))
				p := replicas[(g+i)%len(replicas)]
				r.rec.Posted(session, id)
				a, err := client.Do(ctx, http.MethodPost, p.Base+"/v1/sessions/"+session+"/turns", []byte(body), "Prefer", "respond-async")
				if err != nil || (a.Status != http.StatusOK && a.Status != http.StatusAccepted) {
					t.Errorf("POST %s/%s to %s: %v %d %s", session, id, p.Name, err, a.Status, clip(a.Body))
					continue
				}
				var tj Turn
				if err := json.Unmarshal(a.Body, &tj); err == nil {
					r.rec.Answered(tj)
				}
				if rng.IntN(5) == 0 { // cancel it at a random moment, on either replica
					wg.Add(1)
					go func(delay time.Duration, p *Turnd) {
						defer wg.Done()
						select {
						case <-time.After(delay):
						case <-ctx.Done():
							return
						}
						a, err := client.Do(ctx, http.MethodPost, p.Base+"/v1/sessions/"+session+"/turns/"+id+"/cancel", nil)
						mu.Lock()
						if err != nil {
							cancels[0]++
						} else {
							cancels[a.Status]++
						}
						mu.Unlock()
					}(time.Duration(rng.IntN(1200))*time.Millisecond, replicas[rng.IntN(len(replicas))])
				}
			}
		}()
	}
	posting.Wait()
	// Every call has reached the tool once no turn is running.
	for g := 0; g < posters; g++ {
		for i := 0; i < turnsPer && ctx.Err() == nil; i++ {
			session, id := fmt.Sprintf("rep-%d", g), fmt.Sprintf("t%d", i)
			for ctx.Err() == nil {
				tj, _, err := client.GetTurn(ctx, replicas[0].Base, session, id, "Prefer", "wait=5")
				if err == nil && tj.Status != "running" {
					break
				}
			}
		}
	}
	close(noMore)
	<-parkedAll
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatalf("the experiment ran out of time (%v)", time.Since(began))
	}

	for _, p := range replicas {
		t.Logf("%s: peak RSS %d MiB before the checks", p.Name, p.PeakRSS()>>20)
	}
	rep := r.check(replicas[1], CheckOptions{})
	var bad tally
	defer bad.report(t)
	for code, n := range cancels {
		// 409 turn_busy is the documented refusal of a cancellation that
		// cannot be applied.
		if code != http.StatusOK && code != http.StatusConflict {
			bad.add("a cancel not answered 200 or 409", "%d cancels answered %d", n, code)
		}
	}

	// Every key resolved once, as its deliveries were told.
	mu.Lock()
	defer mu.Unlock()
	counts := map[string]int{} // delivery answers
	outcomes := map[string]int{}
	lateLines := 0
	for g := 0; g < posters; g++ {
		session := fmt.Sprintf("rep-%d", g)
		lines, err := client.Ledger(ctx, replicas[0].Base, session)
		if err != nil {
			t.Fatal(err)
		}
		late := map[string]map[string]int{} // call → canonical data → lines
		story := map[string][]string{}      // turn → its ledger lines' kinds (and calls)
		for _, l := range lines {
			kind := l.Kind
			if l.CallID != nil {
				kind += "(" + *l.CallID + ")"
			}
			story[l.TurnID] = append(story[l.TurnID], kind)
			if l.Kind != "completion_late" || l.CallID == nil {
				continue
			}
			lateLines++
			if len(l.Data) > 64<<10 {
				bad.add("a completion_late line holds the whole late payload (it must be projected)", "%s: line %d of call %s holds %d bytes", session, l.Seq, *l.CallID, len(l.Data))
			}
			if late[*l.CallID] == nil {
				late[*l.CallID] = map[string]int{}
			}
			late[*l.CallID][canonical(l.Data)]++
		}
		for i := 0; i < turnsPer; i++ {
			id := fmt.Sprintf("t%d", i)
			tj, _, err := client.GetTurn(ctx, replicas[0].Base, session, id)
			if err != nil {
				t.Error(err)
				continue
			}
			for _, raw := range tj.Results {
				var res Result
				if err := json.Unmarshal(raw, &res); err != nil {
					t.Fatal(err)
				}
				key := keyOf[[3]string{session, id, res.CallID}]
				if key == "" {
					// A cancel may end a call while it waits for its turn
					// at the tool (calls run one at a time): it never took
					// a key, and that is the one way not to reach the tool.
					if res.Status == "cancelled" {
						outcomes[res.Status]++
						continue
					}
					bad.add("a call never reached the deferred tool", "%s/%s/%s: %s", session, id, res.CallID, raw)
					continue
				}
				outcomes[res.Status]++
				var got struct {
					V int `json:"v"`
				}
				if res.Status == "ok" {
					_ = json.Unmarshal(res.Output, &got)
				}
				versions := map[int]bool{}
				for _, d := range acks[key] {
					counts[fmt.Sprintf("%d %s", d.code, d.status)]++
					if d.code >= 500 || d.code == 0 {
						bad.add("a delivery answered 5xx or not at all", "v%d to %s/%s/%s: status %d", d.version, session, id, res.CallID, d.code)
					}
					if d.code == http.StatusOK {
						versions[d.version] = true
					}
				}
				switch {
				case res.Status == "ok" && !versions[got.V]:
					bad.add("a result no delivery of which was accepted", "%s/%s/%s: result v%d (%v): %s", session, id, res.CallID, got.V, acks[key], raw)
				case res.Status == "ok" && len(versions) > 1:
					bad.add("different results both answered 200", "%s/%s/%s: result v%d, 200 for %v", session, id, res.CallID, got.V, versions)
				case res.Status != "ok" && len(versions) > 0:
					bad.add("an accepted delivery lost (the call timed out or was cancelled)", "%s/%s/%s: %s, 200 for %v; deliveries %+v; the turn's ledger: %v", session, id, res.CallID, res.Status, versions, acks[key], story[id])
				case res.Status != "ok" && res.Status != "timed_out" && res.Status != "cancelled":
					bad.add("a parked call ended neither ok, timed_out nor cancelled", "%s/%s/%s: %s: %s", session, id, res.CallID, res.Status, raw)
				}
				for data, n := range late[res.CallID] {
					if n > 1 {
						bad.add("the same late payload recorded more than once", "%s/%s/%s: %d times: %s", session, id, res.CallID, n, clip([]byte(data)))
					}
				}
			}
		}
	}
	deliveries := 0
	for _, ds := range acks {
		deliveries += len(ds)
	}
	t.Logf("chaos: replicas: %d turns, %d parked calls (%d parked again by the other replica), %d deliveries in %v; answers %v; outcomes %v; cancels %v; %d completion_late lines; %d turns checked, %d ledger lines",
		posters*turnsPer, len(keyOf), reparked, deliveries, time.Since(began).Round(time.Second), counts, outcomes, cancels, lateLines, rep.Turns, rep.Lines)
}
