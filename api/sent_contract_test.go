package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"github.com/turnd/turnd/api"
	"github.com/turnd/turnd/completion"
	"github.com/turnd/turnd/internal/teststores"
	"github.com/turnd/turnd/tool"
	"github.com/turnd/turnd/turn"
)

// What turnd sends, held to openapi.yaml: the turn.settled webhook (its
// `webhooks:` entry: headers and body), the requests of HTTP tools
// (ToolRequest; the answers the test's tools give are ToolResponses) and
// of their cancel URLs (CancelRequest), as a real turnd makes them.

// sentSpec validates the messages turnd sends against the document.
type sentSpec struct {
	doc *openapi3.T
}

// schema checks body against components/schemas/name.
func (s sentSpec) schema(name string, body []byte) error {
	ref := s.doc.Components.Schemas[name]
	if ref == nil {
		return fmt.Errorf("the document has no components/schemas/%s", name)
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	return ref.Value.VisitJSON(v, openapi3.EnableJSONSchema2020(), openapi3.MultiErrors(), openapi3.SetSchemaErrorMessageCustomizer(shortSchemaError))
}

// webhook checks a request (headers and body) against the operation of
// the document's webhooks entry name.
func (s sentSpec) webhook(r *http.Request, body []byte, name string) error {
	item := s.doc.Webhooks[name]
	if item == nil || item.Post == nil {
		return fmt.Errorf("the document has no webhooks/%s post", name)
	}
	req := r.Clone(context.Background())
	req.Body = io.NopCloser(bytes.NewReader(body))
	opts := &openapi3filter.Options{MultiError: true, SkipSettingDefaults: true}
	opts.WithCustomSchemaErrorFunc(shortSchemaError)
	return openapi3filter.ValidateRequest(context.Background(), &openapi3filter.RequestValidationInput{
		Request: req,
		Route:   &routers.Route{Spec: s.doc, Path: name, PathItem: item, Method: http.MethodPost, Operation: item.Post},
		Options: opts,
	})
}

func TestSentMessagesMatchSpec(t *testing.T) {
	t.Parallel()
	doc, err := loadSpec()
	if err != nil {
		t.Fatal(err)
	}
	spec := sentSpec{doc}

	// The schemas can fail: each of these breaks the contract.
	for _, tt := range []struct{ name, body string }{
		{"ToolRequest", `{"session_id":"s","turn_id":"t","call_id":"c","name":"x","arguments":{}}`},
		{"ToolRequest", `{"session_id":"s","turn_id":"t","call_id":"c","name":"x","arguments":{},"attempt":0}`},
		{"ToolResponse", `{"output":1,"error":{"code":"x"}}`},
		{"ToolResponse", `{"pending":{"deadline":"1h","on_cancel":"later"}}`},
		{"ToolResponse", `{}`},
		{"CancelRequest", `{"key":"ck_1","session_id":"s","turn_id":"t"}`},
		{"TurnSettledEvent", `{"type":"turn.settled","timestamp":"2025-01-02T03:04:05Z","data":{"session_id":"s","turn_id":"t","status":"waiting","settled_at":"2025-01-02T03:04:05Z"}}`},
	} {
		if spec.schema(tt.name, []byte(tt.body)) == nil {
			t.Errorf("%s admits %s", tt.name, tt.body)
		}
	}

	teststores.Each(t, func(t *testing.T, open func(testing.TB) turn.Store) {
		signer, err := completion.NewSigner("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
		if err != nil {
			t.Fatal(err)
		}
		arrived := make(chan string, 16)
		check := func(w http.ResponseWriter, r *http.Request, what string, validate func([]byte) error) []byte {
			body, _ := io.ReadAll(r.Body)
			if err := validate(body); err != nil {
				t.Errorf("%s %s does not match openapi.yaml: %v", what, body, err)
			}
			return body
		}
		answer := func(w http.ResponseWriter, status int, body string) {
			if err := spec.schema("ToolResponse", []byte(body)); err != nil {
				t.Errorf("the test's tool answer %s is not a ToolResponse: %v", body, err)
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			io.WriteString(w, body)
		}
		mux := http.NewServeMux()
		mux.HandleFunc("POST /tool", func(w http.ResponseWriter, r *http.Request) {
			body := check(w, r, "the tool request", func(b []byte) error { return spec.schema("ToolRequest", b) })
			var req struct {
				SessionID string `json:"session_id"`
				TurnID    string `json:"turn_id"`
				CallID    string `json:"call_id"`
			}
			_ = json.Unmarshal(body, &req)
			if got, want := r.Header.Get("Idempotency-Key"), req.SessionID+"/"+req.TurnID+"/"+req.CallID; got != want {
				t.Errorf("Idempotency-Key %q, want %q", got, want)
			}
			answer(w, http.StatusOK, `{"output":{"found":true}}`)
			arrived <- "tool"
		})
		mux.HandleFunc("POST /deferred", func(w http.ResponseWriter, r *http.Request) {
			body := check(w, r, "the deferred tool request", func(b []byte) error { return spec.schema("ToolRequest", b) })
			if !bytes.Contains(body, []byte(`"completion":{"key":"ck_`)) {
				t.Errorf("a deferred tool's request without its completion: %s", body)
			}
			answer(w, http.StatusAccepted, `{"pending":{"deadline":"1h","on_cancel":"cancel_external_work"}}`)
			arrived <- "deferred"
		})
		mux.HandleFunc("POST /cancel", func(w http.ResponseWriter, r *http.Request) {
			body := check(w, r, "the cancel request", func(b []byte) error { return spec.schema("CancelRequest", b) })
			if err := signer.Verify(r.Header, body, time.Now(), time.Minute); err != nil {
				t.Errorf("the cancel request's signature: %v", err)
			}
			arrived <- "cancel"
		})
		mux.HandleFunc("POST /hook", func(w http.ResponseWriter, r *http.Request) {
			raw, _ := io.ReadAll(r.Body)
			var ev struct {
				Type string `json:"type"`
				Data struct {
					Status    string
					Approvals []struct {
						CallID string `json:"call_id"`
					} `json:"approvals"`
				} `json:"data"`
			}
			_ = json.Unmarshal(raw, &ev)
			r.Body = io.NopCloser(bytes.NewReader(raw))
			body := check(w, r, "the "+ev.Type+" webhook", func(b []byte) error { return spec.webhook(r, b, ev.Type) })
			if err := signer.Verify(r.Header, body, time.Now(), time.Minute); err != nil {
				t.Errorf("the webhook's signature: %v", err)
			}
			if ev.Type == turn.EventApprovalRequested {
				if len(ev.Data.Approvals) != 1 {
					t.Errorf("approval.requested lists %d calls: %s", len(ev.Data.Approvals), body)
				}
				arrived <- "approval requested"
				return
			}
			arrived <- "settled " + ev.Data.Status
		})
		recv := httptest.NewServer(mux)
		t.Cleanup(recv.Close)

		reg, err := tool.Parse([]byte(strings.ReplaceAll(`tools:
  - name: probe
    effect: read
    http: {url: "{{R}}/tool", timeout: 5s}
  - name: later
    effect: write
    deferred: true
    http: {url: "{{R}}/deferred", cancel_url: "{{R}}/cancel", timeout: 5s}
  - name: gated
    approval: always
    http: {url: "{{R}}/tool", timeout: 5s}
`, "{{R}}", recv.URL)), tool.Options{})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		svc, err := turn.New(turn.Config{
			Store:           open(t),
			Tools:           func() *tool.Registry { return reg },
			WebhookSigner:   signer,
			WebhookInterval: 20 * time.Millisecond,
			CallbackPolicy:  turn.CallbackPolicy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}},
			CompleteURL:     func(key string) string { return "http://turnd.test/v1/complete/" + key },
			CancelHook: func(c turn.Completion, key string) {
				go func() {
					if err := reg.CancelExternal(ctx, c.CallName, tool.CancelRequest{Key: key, SessionID: c.SessionID, TurnID: c.TurnID, CallID: c.CallID}, signer); err != nil && ctx.Err() == nil {
						t.Errorf("cancel: %v", err)
					}
				}()
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := svc.Start(ctx); err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(api.New(api.Config{Service: svc}))
		t.Cleanup(func() {
			srv.Close()
			sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer scancel()
			_ = svc.Shutdown(sctx)
		})
		post := func(path, body string) int {
			t.Helper()
			resp, err := http.Post(srv.URL+path, "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode >= 300 {
				t.Fatalf("POST %s: %d %s", path, resp.StatusCode, b)
			}
			return resp.StatusCode
		}
		next := func() string {
			t.Helper()
			select {
			case got := <-arrived:
				return got
			case <-time.After(20 * time.Second):
				t.Fatal("nothing arrived within 20s")
				return ""
			}
		}
		await := func(want ...string) {
			t.Helper()
			for _, w := range want {
				if got := next(); got != w {
					t.Fatalf("arrived %q, want %q", got, w)
				}
			}
		}

		post("/v1/sessions", fmt.Sprintf(`{"id":"hooked","callback_url":%q}`, recv.URL+"/hook"))
		if st := post("/v1/sessions/hooked/turns", `{"id":"t1","calls":[{"id":"c1","name":"probe","arguments":{"q":"x"}}]}`); st != 200 {
			t.Fatalf("turn t1 answered %d", st)
		}
		await("tool", "settled completed")
		if st := post("/v1/sessions/hooked/turns", `{"id":"t2","calls":[{"id":"c1b","name":"later"}]}`); st != 202 {
			t.Fatalf("turn t2 answered %d, want 202 waiting", st)
		}
		await("deferred")
		post("/v1/sessions/hooked/turns/t2/cancel", "")
		got := []string{next(), next()}
		if !(got[0] == "cancel" && got[1] == "settled cancelled") && !(got[1] == "cancel" && got[0] == "settled cancelled") {
			t.Fatalf("after the cancel arrived %v, want the cancel request and the cancelled turn's webhook", got)
		}
		if st := post("/v1/sessions/hooked/turns", `{"id":"t3","calls":[{"id":"g1","name":"gated"}]}`); st != 202 {
			t.Fatalf("turn t3 answered %d, want 202 waiting", st)
		}
		await("approval requested")
		post("/v1/sessions/hooked/turns/t3/calls/g1/decision", `{"decision":"approve","by":"contract"}`)
		await("tool", "settled completed")
	})
}
