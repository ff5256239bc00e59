package loadtest_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/turnd/turnd/internal/loadtest"
	"github.com/turnd/turnd/internal/pgtest"
)

// BenchmarkIdleRSS builds cmd/turnd as `make build` does, starts
// `turnd serve` on a loopback port with the builtin echo tool, and reports
// its resident set size (VmRSS) once it is ready and has idled 2s
// (rss_MB; the target is under 40 MB), then again after 2s of turns from 8
// clients and another 2s of idling (rss_after_load_MB), with the peak
// (peak_rss_MB). The sqlite sub-benchmark uses the embedded store in a temp
// dir; the postgres one a schema of its own on $DATABASE_URL (skipped
// without it). Like BenchmarkTurnsVsInsert it measures once whatever b.N is.
//
//	go test -run '^$' -bench IdleRSS -benchtime 1x ./internal/loadtest/
func BenchmarkIdleRSS(b *testing.B) {
	bin := buildTurnd(b)
	b.Run("sqlite", func(b *testing.B) {
		onceReport(b, "sqlite", func() map[string]float64 {
			return measureRSS(b, bin, filepath.Join(b.TempDir(), "turnd.db"), "")
		})
	})
	b.Run("postgres", func(b *testing.B) {
		if os.Getenv("DATABASE_URL") == "" {
			b.Skip("DATABASE_URL is not set")
		}
		onceReport(b, "postgres", func() map[string]float64 {
			return measureRSS(b, bin, "", pgtest.URL(b))
		})
	})
}

var lastRSS = map[string]map[string]float64{}

// onceReport runs measure when b.N is 1 and reports its metrics, and
// reports the last ones again when the framework asks for more iterations.
func onceReport(b *testing.B, key string, measure func() map[string]float64) {
	m := lastRSS[key]
	if b.N == 1 || m == nil {
		m = measure()
		lastRSS[key] = m
	}
	for unit, v := range m {
		b.ReportMetric(v, unit)
	}
}

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

func measureRSS(b *testing.B, bin, dataPath, dbURL string) map[string]float64 {
	b.Helper()
	p := startTurnd(b, bin, []byte("builtin: [echo]\n"), dataPath, dbURL, false)
	base, pid := p.base, p.pid
	mb := func(read func(int) (int64, error)) float64 {
		v, err := read(pid)
		if err != nil {
			b.Fatal(err)
		}
		return float64(v) / (1 << 20)
	}

	// Idle means idle: the measurement is what the process holds after
	// doing nothing for a while, so this is a pause, not a wait for an event.
	time.Sleep(2 * time.Second)
	idle := mb(loadtest.RSS)
	b.Logf("idle: VmRSS %.1f MB", idle)

	r, err := loadtest.Turns(context.Background(), base, 8, 2*time.Second, 4, loadtest.EchoTurn(4))
	if err != nil {
		b.Fatalf("turns: %v", err)
	}
	b.Logf("load: %v", r)
	time.Sleep(2 * time.Second)
	after, peak := mb(loadtest.RSS), mb(loadtest.PeakRSS)
	b.Logf("idle after load: VmRSS %.1f MB (peak %.1f MB)", after, peak)
	p.stop()
	return map[string]float64{"rss_MB": idle, "rss_after_load_MB": after, "peak_rss_MB": peak}
}

// waitReady polls /readyz of a process starting up.
func waitReady(base string, within time.Duration) error {
	client := &http.Client{Timeout: 2 * time.Second}
	defer client.CloseIdleConnections()
	deadline := time.Now().Add(within)
	for {
		resp, err := client.Get(base + "/readyz")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("turnd not ready within %v (last: %v)", within, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
