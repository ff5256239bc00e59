package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/turnd/turnd/dispatch"
)

func TestHTTPProgressStream(t *testing.T) {
	t.Parallel()
	type want struct {
		status  dispatch.Status
		code    string
		output  string
		reports []Progress
	}
	for _, c := range []struct {
		name string
		body string
		want want
	}{
		{"progress then output", "{\"progress\":{\"progress\":1,\"total\":3,\"message\":\"fetching\"}}\n\n{\"progress\":{\"progress\":2}}\n{\"output\":{\"ok\":true}}\n",
			want{status: dispatch.StatusOK, output: `{"ok":true}`, reports: []Progress{{1, 3, "fetching"}, {2, 0, ""}}}},
		{"answer without a newline", `{"output":"done"}`, want{status: dispatch.StatusOK, output: `"done"`}},
		{"lines after the answer are ignored", "{\"output\":1}\n{\"progress\":{\"progress\":9}}\nnot json\n", want{status: dispatch.StatusOK, output: `1`}},
		{"error answer", "{\"progress\":{\"progress\":1}}\n{\"error\":{\"code\":\"no_city\",\"message\":\"none\"}}\n",
			want{status: dispatch.StatusError, code: "no_city", reports: []Progress{{1, 0, ""}}}},
		{"negative progress is dropped", "{\"progress\":{\"progress\":-1}}\n{\"output\":1}\n", want{status: dispatch.StatusOK, output: `1`}},
		{"no answer line", "{\"progress\":{\"progress\":1}}\n", want{status: dispatch.StatusError, code: CodeInvalidToolResponse, reports: []Progress{{1, 0, ""}}}},
		{"empty stream", "", want{status: dispatch.StatusError, code: CodeInvalidToolResponse}},
		{"not JSON", "progress: 1\n", want{status: dispatch.StatusError, code: CodeInvalidToolResponse}},
		{"progress with an answer", "{\"progress\":{\"progress\":1},\"output\":2}\n", want{status: dispatch.StatusError, code: CodeInvalidToolResponse}},
		{"progress not an object", "{\"progress\":\"half\"}\n", want{status: dispatch.StatusError, code: CodeInvalidToolResponse}},
		{"pending from a tool not deferred", "{\"pending\":{}}\n", want{status: dispatch.StatusError, code: dispatch.CodePendingMissingKey}},
		{"line over the keep cap", "{\"output\":\"" + strings.Repeat("x", 200) + "\"}\n", want{status: dispatch.StatusError, code: CodeOutputTooLarge}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if !strings.Contains(r.Header.Get("Accept"), progressStreamType) {
					t.Errorf("Accept %q does not offer %s", r.Header.Get("Accept"), progressStreamType)
				}
				w.Header().Set("Content-Type", progressStreamType+"; charset=utf-8")
				_, _ = w.Write([]byte(c.body))
			}))
			t.Cleanup(srv.Close)
			s := plainHTTPSpec(t, srv.URL)
			log := make(progressLog, 16)
			ctx := WithProjector(WithProgress(context.Background(), log), newProjector(t, 4096), 128)
			out := s.Impl.Invoke(ctx, dispatch.Call{ID: "c1", Name: "t", Arguments: json.RawMessage(`{}`)}, nil)
			if out.Status != c.want.status || (c.want.code != "" && (out.Err == nil || out.Err.Code != c.want.code)) || string(out.Output) != c.want.output {
				t.Fatalf("outcome %+v %+v %s, want %+v", out, out.Err, out.Output, c.want)
			}
			close(log)
			var got []Progress
			for r := range log {
				if r.callID != "c1" {
					t.Errorf("progress of %q", r.callID)
				}
				got = append(got, r.p)
			}
			if len(got) != len(c.want.reports) {
				t.Fatalf("reports %+v, want %+v", got, c.want.reports)
			}
			for i := range got {
				if got[i] != c.want.reports[i] {
					t.Fatalf("reports %+v, want %+v", got, c.want.reports)
				}
			}
		})
	}
}

// plainHTTPSpec is an HTTP tool "t" at url without configured headers.
func plainHTTPSpec(t *testing.T, url string) *Spec {
	t.Helper()
	reg, err := Parse(fmt.Appendf(nil, "tools: [{name: t, http: {url: %q}}]", url), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.CloseIdleConnections)
	return lookup(t, reg, "t")
}

// TestHTTPProgressStreams: progress is reported while the tool still
// works, before its answer is written.
func TestHTTPProgressStreams(t *testing.T) {
	t.Parallel()
	seen := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", progressStreamType)
		_, _ = w.Write([]byte("{\"progress\":{\"progress\":1,\"total\":2}}\n"))
		w.(http.Flusher).Flush()
		<-seen // turnd reported it: the answer comes only now
		_, _ = w.Write([]byte("{\"output\":\"done\"}\n"))
	}))
	t.Cleanup(srv.Close)
	s := plainHTTPSpec(t, srv.URL)
	log := make(progressLog, 1)
	done := make(chan dispatch.Outcome, 1)
	go func() {
		done <- s.Impl.Invoke(WithProgress(context.Background(), log), dispatch.Call{ID: "c1", Name: "t", Arguments: json.RawMessage(`{}`)}, nil)
	}()
	if r := log.next(t); r.p.Progress != 1 || r.p.Total != 2 {
		t.Fatalf("first report %+v", r)
	}
	close(seen)
	if out := <-done; out.Status != dispatch.StatusOK || string(out.Output) != `"done"` {
		t.Fatalf("%+v %s", out, out.Output)
	}
}
