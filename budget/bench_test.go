package budget

import (
	"bytes"
	"io"
	"runtime"
	"testing"
)

// logText returns about size bytes of log-like text with multi-byte runes.
func logText(size int) []byte {
	line := []byte("2024-05-01T12:00:00Z INFO request served path=/api/v1/items status=200 größe=1234 ✓\n")
	return bytes.Repeat(line, size/len(line)+1)[:size]
}

func BenchmarkProject(b *testing.B) {
	text := logText(64 << 20)
	p := mustNew(b, Config{})
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	for b.Loop() {
		if r := p.Project(text); !r.Truncated {
			b.Fatal("not truncated")
		}
	}
}

// BenchmarkProjectErrors projects 64 MiB of log text in the errors window:
// the whole middle is scanned for error lines (there are none, the worst
// case: a scan that finds its budget's worth stops early).
func BenchmarkProjectErrors(b *testing.B) {
	text := logText(64 << 20)
	p := mustNew(b, Config{Window: WindowErrors})
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	for b.Loop() {
		if r := p.Project(text); !r.Truncated {
			b.Fatal("not truncated")
		}
	}
}

// BenchmarkProjectErrorsProse is BenchmarkProjectErrors on log lines of
// English words, whose bigrams the default patterns share more often.
func BenchmarkProjectErrorsProse(b *testing.B) {
	line := []byte("2024-05-01 12:00:00 INFO the server accepted a connection from the parent process and returned its handle\n")
	text := bytes.Repeat(line, (64<<20)/len(line)+1)[:64<<20]
	p := mustNew(b, Config{Window: WindowErrors})
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	for b.Loop() {
		if r := p.Project(text); !r.Truncated {
			b.Fatal("not truncated")
		}
	}
}

// generator yields size bytes of log text without holding them.
type generator struct {
	line      []byte
	offset    int
	remaining int64
}

func (g *generator) Read(p []byte) (int, error) {
	if g.remaining == 0 {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), g.remaining)]
	n := 0
	for n < len(p) {
		c := copy(p[n:], g.line[g.offset:])
		n += c
		g.offset = (g.offset + c) % len(g.line)
	}
	g.remaining -= int64(n)
	return n, nil
}

// BenchmarkStream streams 1 GiB through ProjectReader and reports the heap
// allocated per run (an upper bound on heap growth) and the heap still in
// use while the result is alive.
func BenchmarkStream(b *testing.B) {
	const size = 1 << 30
	p := mustNew(b, Config{})
	line := logText(1000)
	b.SetBytes(size)
	var allocated, live uint64
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		r, err := p.ProjectReader(&generator{line: line, remaining: size})
		runtime.GC()
		runtime.ReadMemStats(&after)
		if err != nil || !r.Truncated || r.OriginalBytes != size {
			b.Fatalf("ProjectReader: %v, %+v", err, summary(r))
		}
		allocated += after.TotalAlloc - before.TotalAlloc
		live += max(after.HeapAlloc, before.HeapAlloc) - before.HeapAlloc
		runtime.KeepAlive(r)
	}
	b.ReportMetric(float64(allocated)/float64(b.N), "heap-alloc-B/op")
	b.ReportMetric(float64(live)/float64(b.N), "heap-growth-B/op")
}

func BenchmarkProjectJSON(b *testing.B) {
	raw := []byte(records(30_000, 5)) // about 10 MiB
	p := mustNew(b, Config{})
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		r, err := p.ProjectJSON(raw)
		if err != nil || !r.JSON || !r.Truncated {
			b.Fatalf("ProjectJSON: %v, %s", err, summary(r))
		}
	}
}

// BenchmarkProjectJSONSmall: an output well within the budget, as most are.
func BenchmarkProjectJSONSmall(b *testing.B) {
	raw := []byte(`{"n":12345,"k":3,"path":"/srv/data/report.txt","ok":true,"tags":["a","b"]}`)
	p := mustNew(b, Config{})
	b.ReportAllocs()
	for b.Loop() {
		r, err := p.ProjectJSON(raw)
		if err != nil || !r.JSON || r.Truncated {
			b.Fatalf("ProjectJSON: %v, %s", err, summary(r))
		}
	}
}

// BenchmarkProjectSmallOver: a 40 KiB output over the default cap, where
// per-call overhead shows.
func BenchmarkProjectSmallOver(b *testing.B) {
	text := logText(40 << 10)
	p := mustNew(b, Config{})
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		if r := p.Project(text); !r.Truncated {
			b.Fatal("not truncated")
		}
	}
}
