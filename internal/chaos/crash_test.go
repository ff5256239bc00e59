package chaos

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"
)

// TestSIGKILLLoop kills turnd with SIGKILL again and again while workers
// post turns of reads and writes, and starts it again on the same address
// and database each time; a failed POST is posted again. Writes in flight
// at a kill end interrupted; none may run twice, and every turn settles.
// It runs on PostgreSQL and on the embedded SQLite store.
func TestSIGKILLLoop(t *testing.T) {
	t.Run("postgres", func(t *testing.T) {
		pgLock.RLock()
		defer pgLock.RUnlock()
		sigkillLoop(t, "--database-url", database(t))
	})
	t.Run("sqlite", func(t *testing.T) {
		sigkillLoop(t, "--data", filepath.Join(t.TempDir(), "turnd.db"))
	})
}

func sigkillLoop(t *testing.T, store ...string) {
	r := newRig(t, append(store, "--lease-ttl", "1s")...)
	p := r.start("turnd")

	kills := size(4, 60)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	load := &Load{Client: client, Bases: []string{p.Base}, Rec: r.rec, Prefix: "k", Workers: size(8, 16), MaxMS: 20}
	done := make(chan LoadStats, 1)
	go func() { done <- load.Run(ctx) }()

	began := time.Now()
	deadline := began.Add(size(60*time.Second, 20*time.Minute))
	rng := rand.New(rand.NewPCG(1, uint64(began.UnixNano())))
	killed := 0
	for ; killed < kills && time.Now().Before(deadline); killed++ {
		// The interval between kills is the experiment's clock, not a
		// wait for something to happen.
		time.Sleep(time.Duration(300+rng.IntN(1200)) * time.Millisecond)
		if err := p.Kill(); err != nil {
			t.Fatal(err)
		}
		if err := p.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(time.Second) // the load goes on after the last restart
	cancel()
	st := <-done
	loadFailed(t, st)
	rep := r.check(p, CheckOptions{})
	posted, acked := r.rec.Turns()
	t.Logf("chaos: sigkill %s: %d kills in %v; %d turns posted (%d answered), %d POSTs (%d retried: %v, %d replayed); %d turns checked, %d ledger lines; %d writes executed, %d twice; calls by tool and status %v; error codes %v",
		t.Name(), killed, time.Since(began).Round(time.Second), posted, acked, st.Posts, st.Retries, st.Fails, st.Replays,
		rep.Turns, rep.Lines, rep.Writes, len(rep.Violations), r.rec.Statuses(), r.rec.ErrorCodes())
}

// TestPostgresStopStart stops PostgreSQL under load, with pg_ctl stop -m
// fast and -m immediate, and starts it again. turnd must stay up, answer
// 503 while the database is away, and hold on to the outcomes of writes
// that ran meanwhile: interrupted is only for outcomes that died with a
// process, and no process dies here.
func TestPostgresStopStart(t *testing.T) {
	pgLock.Lock()
	defer pgLock.Unlock()
	r := newRig(t, "--database-url", database(t))
	p := r.start("turnd")

	cycles := size(1, 12)
	outage := size(2*time.Second, 5*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	load := &Load{Client: client, Bases: []string{p.Base}, Rec: r.rec, Prefix: "pg", Workers: size(8, 16), MaxMS: 20}
	done := make(chan LoadStats, 1)
	go func() { done <- load.Run(ctx) }()

	began := time.Now()
	stops := map[string]int{}
	for c := 0; c < cycles; c++ {
		for _, mode := range []string{"fast", "immediate"} {
			time.Sleep(time.Second) // load before each stop
			sctx, scancel := context.WithTimeout(context.Background(), 2*time.Minute)
			if err := cluster.Stop(sctx, mode); err != nil {
				scancel()
				t.Fatal(err)
			}
			stops[mode]++
			time.Sleep(outage)
			err := cluster.Start(sctx)
			scancel()
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	time.Sleep(2 * time.Second) // the load goes on after the last start
	cancel()
	st := <-done
	loadFailed(t, st)
	if !p.Alive() {
		t.Errorf("turnd exited while PostgreSQL was away")
	}
	rep := r.check(p, CheckOptions{})
	codes := r.rec.ErrorCodes()
	if n := codes["interrupted"]; n > 0 {
		t.Errorf("%d calls answered interrupted though no process died (a write's outcome was lost to a PostgreSQL outage)", n)
	}
	posted, acked := r.rec.Turns()
	t.Logf("chaos: pgstop: stops %v of %v each in %v; %d turns posted (%d answered), %d POSTs (%d retried: %v, %d replayed); %d turns checked, %d ledger lines; %d writes executed, %d twice; calls by tool and status %v; error codes %v",
		stops, outage, time.Since(began).Round(time.Second), posted, acked, st.Posts, st.Retries, st.Fails, st.Replays,
		rep.Turns, rep.Lines, rep.Writes, len(rep.Violations), r.rec.Statuses(), codes)
}
