package budget

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

// randomText builds text from pieces that stress cuts: newlines, CRLF,
// runes of every length and invalid bytes.
func randomText(rng *rand.Rand, maxPieces int) []byte {
	pieces := []string{"a", "bc", "defg", "\n", "\r\n", "é", "€", "𝄞", "\xff", "\x80", " ", "\n\n"}
	var b []byte
	for range rng.IntN(maxPieces + 1) {
		b = append(b, pieces[rng.IntN(len(pieces))]...)
	}
	return b
}

func randomProjector(t testing.TB, rng *rand.Rand) *Projector {
	t.Helper()
	return randomProjectorWithin(t, rng, rng.IntN(60), rng.IntN(8))
}

// randomProjectorWithin is a projector of limit and maxLines with a random
// mode, window and head share.
func randomProjectorWithin(t testing.TB, rng *rand.Rand, limit, maxLines int) *Projector {
	t.Helper()
	modes := []Mode{ModeBytes, ModeTokens}
	windows := []Window{WindowHead, WindowTail, WindowHeadTail}
	return exact(t, limit, maxLines, modes[rng.IntN(2)], windows[rng.IntN(3)], float64(rng.IntN(11))/10)
}

// eachSeed runs f as n parallel subtests, each with a generator of its own
// seed (0 to n-1) on stream.
func eachSeed(t *testing.T, n, stream uint64, f func(t *testing.T, rng *rand.Rand)) {
	t.Helper()
	for seed := range n {
		t.Run("", func(t *testing.T) {
			t.Parallel()
			f(t, rand.New(rand.NewPCG(seed, stream)))
		})
	}
}

// writeChunked writes b to w in random chunks.
func writeChunked(t testing.TB, rng *rand.Rand, w io.Writer, b []byte) {
	t.Helper()
	for len(b) > 0 {
		n := 1 + rng.IntN(min(len(b), 1+rng.IntN(80)))
		if _, err := w.Write(b[:n]); err != nil {
			t.Fatal(err)
		}
		b = b[n:]
	}
}

func TestStreamMatchesProject(t *testing.T) {
	t.Parallel()
	eachSeed(t, 8, 42, func(t *testing.T, rng *rand.Rand) {
		for range 1000 {
			p := randomProjector(t, rng)
			in := randomText(rng, 120)
			want := p.Project(in)
			checkText(t, p, in, want)

			s := p.NewStream()
			half := rng.IntN(len(in) + 1)
			writeChunked(t, rng, s, in[:half])
			if mid := s.Result(); !reflect.DeepEqual(mid, p.Project(in[:half])) {
				t.Fatalf("mid-stream result differs for %q", in[:half])
			}
			writeChunked(t, rng, s, in[half:])
			if got := s.Result(); !reflect.DeepEqual(got, want) {
				t.Fatalf("config %+v, input %q:\nstream  %+v\nproject %+v", p.Config(), in, got, want)
			}
		}
	})
}

func TestProjectReader(t *testing.T) {
	t.Parallel()
	in := []byte(strings.Repeat("0123456789abcdef\n", 500))
	p := mustNew(t, Config{Limit: 100, MaxLines: 10})
	want := p.Project(in)
	readers := map[string]io.Reader{
		"plain":    bytes.NewReader(in),
		"one byte": iotest.OneByteReader(bytes.NewReader(in)),
		"half":     iotest.HalfReader(bytes.NewReader(in)),
		"data+EOF": iotest.DataErrReader(bytes.NewReader(in)),
	}
	for name, r := range readers {
		got, err := p.ProjectReader(r)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: ProjectReader = %+v, %v; want %+v", name, got, err, want)
		}
	}
}

func TestProjectReaderError(t *testing.T) {
	t.Parallel()
	boom := errors.New("connection reset")
	p := mustNew(t, Config{Limit: 8})
	in := []byte("partial body that was cut off")
	got, err := p.ProjectReader(io.MultiReader(bytes.NewReader(in), iotest.ErrReader(boom)))
	if !errors.Is(err, boom) {
		t.Fatalf("error = %v, want it to wrap %v", err, boom)
	}
	if want := p.Project(in); !reflect.DeepEqual(got, want) {
		t.Errorf("result = %+v, want the projection of what was read %+v", got, want)
	}
}

func TestStreamWithMultiWriter(t *testing.T) {
	t.Parallel()
	in := bytes.Repeat([]byte("line of a response body\n"), 2000)
	p := mustNew(t, Config{Limit: 256})
	s := p.NewStream()
	var spool bytes.Buffer
	if _, err := io.Copy(io.MultiWriter(&spool, s), bytes.NewReader(in)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(spool.Bytes(), in) {
		t.Error("spool lost bytes")
	}
	if got, want := s.Result(), p.Project(in); !reflect.DeepEqual(got, want) {
		t.Errorf("stream result %+v, want %+v", got, want)
	}
}

func TestStreamMemoryBounded(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		c     Config
		chunk int
	}{
		{"bytes, small writes", Config{Limit: 1000}, 7},
		{"bytes, large writes", Config{Limit: 1000}, 64 << 10},
		{"tokens", Config{Limit: 1000, Mode: ModeTokens}, 4096},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := mustNew(t, tt.c)
			s := p.NewStream()
			chunk := bytes.Repeat([]byte("x\n"), tt.chunk/2+1)[:tt.chunk]
			for written := 0; written < 8<<20; written += len(chunk) {
				s.Write(chunk)
			}
			if cap(s.head) > p.edgeBytes() || cap(s.tail.buf) > p.edgeBytes() {
				t.Errorf("buffers hold %d and %d bytes; the caps allow %d each", cap(s.head), cap(s.tail.buf), p.edgeBytes())
			}
		})
	}
}

func TestRing(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		limit  int
		writes []string
		want   string
	}{
		{"empty", 4, nil, ""},
		{"under limit", 4, []string{"ab"}, "ab"},
		{"exactly full", 4, []string{"ab", "cd"}, "abcd"},
		{"wraps", 4, []string{"abc", "def"}, "cdef"},
		{"wraps twice", 4, []string{"abc", "def", "ghi"}, "fghi"},
		{"write larger than limit", 4, []string{"ab", "cdefghij"}, "ghij"},
		{"single bytes", 3, []string{"a", "b", "c", "d", "e"}, "cde"},
		{"limit 1", 1, []string{"abc", "d"}, "d"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := ring{limit: tt.limit}
			for _, w := range tt.writes {
				r.write([]byte(w))
			}
			if got := string(r.bytes()); got != tt.want {
				t.Errorf("bytes() = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestProjectorConcurrentUse shares one Projector between parallel subtests
// so that the race detector sees any shared mutable state.
func TestProjectorConcurrentUse(t *testing.T) {
	t.Parallel()
	p := mustNew(t, Config{Limit: 64, MaxLines: 3})
	text := []byte(strings.Repeat("some output line\n", 50))
	raw := []byte(`{"a":[` + seq(100) + `],"b":"` + strings.Repeat("x", 200) + `"}`)
	wantText := p.Project(text)
	wantJSON, err := p.ProjectJSON(raw)
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		t.Run("", func(t *testing.T) {
			t.Parallel()
			for range 50 {
				if got := p.Project(text); !reflect.DeepEqual(got, wantText) {
					t.Fatalf("Project = %s", summary(got))
				}
				if got, err := p.ProjectJSON(raw); err != nil || !reflect.DeepEqual(got, wantJSON) {
					t.Fatalf("ProjectJSON = %s, %v", summary(got), err)
				}
				if got, err := p.ProjectReader(bytes.NewReader(text)); err != nil || !reflect.DeepEqual(got, wantText) {
					t.Fatalf("ProjectReader = %s, %v", summary(got), err)
				}
			}
		})
	}
}
