package rawjson_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/turnd/turnd/internal/rawjson"
)

// benchOutput is a tool output as the server relays it: an object of
// strings, numbers and a list of records, written with indentation.
var benchOutput = func() []byte {
	type entry struct {
		Path  string   `json:"path"`
		Line  int      `json:"line"`
		Text  string   `json:"text"`
		Score float64  `json:"score"`
		Tags  []string `json:"tags"`
	}
	v := struct {
		Query   string  `json:"query"`
		Total   int     `json:"total"`
		Entries []entry `json:"entries"`
	}{Query: "func (s *Server) ServeHTTP", Total: 20}
	for i := range 20 {
		v.Entries = append(v.Entries, entry{Path: "src/server/handler.go", Line: 10 * i,
			Text:  "\tif err := s.handle(w, r); err != nil {\n\t\treturn fmt.Errorf(\"serving: %w\", err)\n\t}",
			Score: 0.5 + float64(i)/40, Tags: []string{"go", "server"}})
	}
	b, _ := json.MarshalIndent(v, "", "  ")
	return b
}()

var benchCompactOutput = func() []byte {
	var b bytes.Buffer
	_ = json.Compact(&b, benchOutput)
	return b.Bytes()
}()

func BenchmarkValid(b *testing.B) {
	for _, in := range []struct {
		name string
		raw  []byte
	}{{"indented", benchOutput}, {"compact", benchCompactOutput}} {
		b.Run(in.name+"/scanner", func(b *testing.B) {
			b.SetBytes(int64(len(in.raw)))
			for b.Loop() {
				s := rawjson.Scanner{B: in.raw}
				if s.Value(s.Space(0), 0) < 0 {
					b.Fatal("invalid")
				}
			}
		})
		b.Run(in.name+"/tokenizer", func(b *testing.B) {
			b.SetBytes(int64(len(in.raw)))
			for b.Loop() {
				if tokenize(in.raw) != nil {
					b.Fatal("invalid")
				}
			}
		})
		b.Run(in.name+"/json.Valid", func(b *testing.B) {
			b.SetBytes(int64(len(in.raw)))
			for b.Loop() {
				if !json.Valid(in.raw) {
					b.Fatal("invalid")
				}
			}
		})
	}
}

func BenchmarkCompact(b *testing.B) {
	for _, in := range []struct {
		name string
		raw  []byte
	}{{"indented", benchOutput}, {"compact", benchCompactOutput}} {
		buf := make([]byte, 0, len(in.raw))
		b.Run(in.name+"/AppendCompact", func(b *testing.B) {
			b.SetBytes(int64(len(in.raw)))
			for b.Loop() {
				buf, _ = rawjson.AppendCompact(buf[:0], in.raw)
			}
		})
		var out bytes.Buffer
		out.Grow(len(in.raw))
		b.Run(in.name+"/json.Compact", func(b *testing.B) {
			b.SetBytes(int64(len(in.raw)))
			for b.Loop() {
				out.Reset()
				_ = json.Compact(&out, in.raw)
			}
		})
	}
}

func BenchmarkQuote(b *testing.B) {
	for _, in := range []struct{ name, s string }{
		{"id", "toolu_01A09q90qw90lq917835lq9"},
		{"text", strings.Repeat("A line of tool output, with \"quotes\" and a tab\there.\n", 20)},
		{"unicode", strings.Repeat("Café, naïve, 日本語 — ok. ", 20)},
	} {
		buf := make([]byte, 0, 4*len(in.s))
		b.Run(in.name+"/AppendString", func(b *testing.B) {
			b.SetBytes(int64(len(in.s)))
			for b.Loop() {
				buf = rawjson.AppendString(buf[:0], in.s, rawjson.EscapeNoHTML)
			}
		})
		b.Run(in.name+"/AppendStringMinimal", func(b *testing.B) {
			b.SetBytes(int64(len(in.s)))
			for b.Loop() {
				buf = rawjson.AppendString(buf[:0], in.s, rawjson.EscapeMinimal)
			}
		})
		var out bytes.Buffer
		enc := json.NewEncoder(&out)
		enc.SetEscapeHTML(false)
		b.Run(in.name+"/json.Encoder", func(b *testing.B) {
			b.SetBytes(int64(len(in.s)))
			for b.Loop() {
				out.Reset()
				_ = enc.Encode(in.s)
			}
		})
	}
}

func BenchmarkCanonical(b *testing.B) {
	var c rawjson.Canonicalizer
	buf := make([]byte, 0, len(benchOutput))
	b.Run("Canonicalizer", func(b *testing.B) {
		b.SetBytes(int64(len(benchOutput)))
		for b.Loop() {
			buf, _ = c.Append(buf[:0], benchOutput)
		}
	})
	b.Run("Reencode", func(b *testing.B) {
		b.SetBytes(int64(len(benchOutput)))
		for b.Loop() {
			rawjson.Reencode(benchOutput)
		}
	})
}
