package tool

import (
	"bytes"
	"fmt"
	"testing"
)

// TestHTTPTextToolProjection: an HTTP tool's projection block applies to
// the text it streams, and its stream can cut again within a lower limit.
func TestHTTPTextToolProjection(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	for i := range 2000 {
		if i == 1234 {
			b.WriteString("main.go:12:5: undefined: frob\n")
		}
		fmt.Fprintf(&b, "compiling package %d\n", i)
	}
	srv := textServer(t, b.Bytes())
	reg := mustParse(t, "tools:\n  - name: build\n    http: {url: '"+srv.URL+"'}\n    projection: {window: errors}\n")
	s := lookup(t, reg, "build")
	out := invoke(WithProjector(t.Context(), newProjector(t, 2000), 0), s, `{}`)
	pr, ok := out.Detail.(*Projected)
	if !ok || pr.Stream == nil {
		t.Fatalf("Detail = %#v, want *Projected with its stream", out.Detail)
	}
	for _, r := range []struct {
		name string
		text []byte
	}{{"stream", pr.Result.Text}, {"within 500", pr.Stream.ResultWithin(500).Text}} {
		if !bytes.Contains(r.text, []byte("\nmain.go:12:5: undefined: frob\n")) {
			t.Errorf("%s: the diagnostic is lost:\n%s", r.name, r.text)
		}
	}
	if n := len(pr.Stream.ResultWithin(500).Text); n > 500+40 {
		t.Errorf("ResultWithin(500) is %d bytes", n)
	}
}
