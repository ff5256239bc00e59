package api_test

import (
	"strings"
	"testing"
	"time"

	"github.com/turnd/turnd/completion"
	"github.com/turnd/turnd/internal/teststores"
)

func TestDeferredLoopOverHTTP(t *testing.T) {
	t.Parallel()
	eachStack(t, func(t *testing.T, s *stack) {
		r := s.do("POST", "/v1/sessions/s/turns", `{"id":"t","calls":[{"id":"a","name":"echo","arguments":{"x":1}},{"id":"d","name":"deferred","arguments":{"deadline":"1h"}}]}`)
		var tr wireTurn
		r.json(t, &tr)
		if r.status != 202 || tr.Status != "waiting" || summary(tr) != "a=ok d=pending" {
			t.Fatalf("post: %d %s %s", r.status, tr.Status, summary(tr))
		}
		got := <-s.tools.keys
		key, url := got[0], got[1]
		if !strings.HasPrefix(key, "ck_") || !strings.HasSuffix(url, "/v1/complete/"+key) {
			t.Fatalf("the tool got key %q url %q", key, url)
		}
		st := s.do("GET", "/v1/complete/"+key, nil)
		var info struct {
			Status   string     `json:"status"`
			Deadline *time.Time `json:"deadline"`
		}
		st.json(t, &info)
		if st.status != 200 || info.Status != "pending" || info.Deadline == nil || time.Until(*info.Deadline) > time.Hour {
			t.Fatalf("status: %d %s", st.status, st.body)
		}
		if hb := s.do("POST", "/v1/complete/"+key+"/heartbeat", nil); hb.status != 200 {
			t.Fatalf("heartbeat: %d %s", hb.status, hb.body)
		}
		// Bad deliveries change nothing.
		for _, tc := range []struct {
			name, path, body string
			status           int
			code             string
		}{
			{"malformed key", "/v1/complete/nope", `{"output":1}`, 404, "not_found"},
			{"tampered key", "/v1/complete/" + key[:10] + "AAAA" + key[14:], `{"output":1}`, 404, "not_found"},
			{"unknown key", "/v1/complete/ck_" + strings.Repeat("A", 42) + "E", `{"output":1}`, 404, "not_found"},
			{"invalid json", "/v1/complete/" + key, `{"output":`, 400, "malformed_json"},
			{"neither", "/v1/complete/" + key, `{}`, 422, "invalid_request"},
			{"both", "/v1/complete/" + key, `{"output":1,"error":{"code":"x"}}`, 422, "invalid_request"},
			{"too large", "/v1/complete/" + key, `{"output":"` + strings.Repeat("z", 5<<20) + `"}`, 413, "body_too_large"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := s.do("POST", tc.path, tc.body)
				if r.status != tc.status || r.code(t) != tc.code {
					t.Fatalf("%d %s, want %d %s", r.status, r.body, tc.status, tc.code)
				}
			})
		}
		if r := s.do("PUT", "/v1/complete/"+key, `{"output":1}`); r.status != 405 {
			t.Fatalf("wrong method: %d", r.status)
		}
		// A waiter holds its GET until the delivery settles the turn.
		waited := make(chan response, 1)
		go func() { waited <- s.do("GET", "/v1/sessions/s/turns/t", nil, "Prefer", "wait=20") }()
		ok := s.do("POST", "/v1/complete/"+key, `{"output":{"approved":true}}`)
		if ok.status != 200 || !strings.Contains(string(ok.body), `"accepted"`) {
			t.Fatalf("deliver: %d %s", ok.status, ok.body)
		}
		w := <-waited
		var done wireTurn
		w.json(t, &done)
		if w.status != 200 || w.header.Get("Preference-Applied") != "wait=20" || done.Status != "completed" || summary(done) != "a=ok d=ok" {
			t.Fatalf("waited: %d %s %s", w.status, done.Status, summary(done))
		}
		if string(done.Results[1].Output) != `{"approved":true}` {
			t.Fatalf("output %s", done.Results[1].Output)
		}
		if r := s.do("POST", "/v1/complete/"+key, `{"output": {"approved": true}}`); r.status != 200 || !strings.Contains(string(r.body), "already_completed") {
			t.Fatalf("repeat: %d %s", r.status, r.body)
		}
		r = s.do("POST", "/v1/complete/"+key, `{"output":{"approved":false}}`)
		if r.status != 409 || r.code(t) != "completion_conflict" || !strings.Contains(string(r.body), `"recorded_status":"completed"`) {
			t.Fatalf("conflict: %d %s", r.status, r.body)
		}
	})
}

func TestCancelAndLateDelivery(t *testing.T) {
	t.Parallel()
	eachStack(t, func(t *testing.T, s *stack) {
		s.do("POST", "/v1/sessions/s/turns", `{"id":"t","calls":[{"id":"d","name":"deferred","arguments":{"on_cancel":"ignore"}}]}`)
		key := (<-s.tools.keys)[0]
		r := s.do("POST", "/v1/sessions/s/turns/t/cancel", nil)
		var tr wireTurn
		r.json(t, &tr)
		if r.status != 200 || tr.Status != "cancelled" || summary(tr) != "d=cancelled(cancelled)" {
			t.Fatalf("cancel: %d %s", r.status, r.body)
		}
		late := s.do("POST", "/v1/complete/"+key, `{"output":"too late"}`)
		if late.status != 410 || late.code(t) != "completion_gone" {
			t.Fatalf("late: %d %s", late.status, late.body)
		}
		l := s.do("GET", "/v1/sessions/s/ledger", nil)
		if !strings.Contains(string(l.body), `"completion_late"`) || !strings.Contains(string(l.body), "too late") {
			t.Fatalf("the late payload is not in the ledger: %s", l.body)
		}
		if strings.Contains(string(l.body), key) {
			t.Fatal("the ledger carries the key")
		}
		if r := s.do("POST", "/v1/sessions/s/turns/nope/cancel", nil); r.status != 404 {
			t.Fatalf("cancel unknown: %d", r.status)
		}
	})
}

func TestSignedDeliveries(t *testing.T) {
	t.Parallel()
	secret := "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	s := newStack(t, teststores.Kinds[0].Open, stackOptions{signingSecret: secret})
	s.do("POST", "/v1/sessions/s/turns", `{"id":"t","calls":[{"id":"d","name":"deferred"}]}`)
	key := (<-s.tools.keys)[0]
	body := `{"output":"signed"}`
	if r := s.do("POST", "/v1/complete/"+key, body); r.status != 401 || r.code(t) != "bad_signature" {
		t.Fatalf("unsigned: %d %s", r.status, r.body)
	}
	signer, err := completion.NewSigner(secret)
	if err != nil {
		t.Fatal(err)
	}
	old := signer.Headers("msg_1", time.Now().Add(-10*time.Minute), []byte(body))
	if r := s.do("POST", "/v1/complete/"+key, body, "webhook-id", old["webhook-id"], "webhook-timestamp", old["webhook-timestamp"], "webhook-signature", old["webhook-signature"]); r.status != 401 {
		t.Fatalf("stale signature: %d %s", r.status, r.body)
	}
	h := signer.Headers("msg_2", time.Now(), []byte(body))
	if r := s.do("POST", "/v1/complete/"+key, `{"output":"tampered"}`, "webhook-id", h["webhook-id"], "webhook-timestamp", h["webhook-timestamp"], "webhook-signature", h["webhook-signature"]); r.status != 401 {
		t.Fatalf("signature of another body: %d", r.status)
	}
	if r := s.do("POST", "/v1/complete/"+key, body, "webhook-id", h["webhook-id"], "webhook-timestamp", h["webhook-timestamp"], "webhook-signature", h["webhook-signature"]); r.status != 200 {
		t.Fatalf("signed: %d %s", r.status, r.body)
	}
}
