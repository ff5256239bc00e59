package completion_test

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/turnd/turnd/completion"
)

func ExampleKeyring_Key() {
	// In production the secret comes from NewSecret (kept in the database)
	// or from TURND_COMPLETION_KEY_SECRET.
	secret, err := completion.ParseSecret("an example secret of at least 32 bytes")
	if err != nil {
		panic(err)
	}
	keys, err := completion.NewKeyring(secret)
	if err != nil {
		panic(err)
	}
	key := keys.Key("ses_1", "turn_1", "call_1")
	again := keys.Key("ses_1", "turn_1", "call_1") // a retry, or after a restart

	fmt.Println(len(key), key == again) // ck_, the MAC, "." and the session id
	fmt.Println(key)                    // fmt never prints the key itself
	fmt.Println(keys.Verify(key, "ses_1", "turn_1", "call_1"), keys.Verify(key, "ses_1", "turn_1", "call_2"))
	// Output:
	// 52 true
	// ck_[redacted:3f669928]
	// true false
}

// pendingCall is what a store would keep for a parked call.
type pendingCall struct {
	KeyHash completion.Hash
	CallID  string
}

// lookup is the handler side of POST /v1/complete/{key}: the same work and
// the same answer for malformed, unknown and tampered keys.
func lookup(byHash map[completion.Hash]pendingCall, raw string) (pendingCall, bool) {
	h := completion.HashOf(raw)        // hash whatever came in
	rec, found := byHash[h]            // always look up
	_, err := completion.ParseKey(raw) // only now use the syntax check
	if err != nil || !found || !rec.KeyHash.Equal(h) {
		return pendingCall{}, false // one 404 for all three
	}
	return rec, true
}

func ExampleHashOf() {
	secret, err := completion.ParseSecret("an example secret of at least 32 bytes")
	if err != nil {
		panic(err)
	}
	keys, err := completion.NewKeyring(secret)
	if err != nil {
		panic(err)
	}
	key := keys.Key("ses_1", "turn_1", "call_1")

	// Only the hash is stored; the key goes to the tool and is forgotten.
	store := map[completion.Hash]pendingCall{key.Hash(): {KeyHash: key.Hash(), CallID: "call_1"}}

	tampered := string(key[:len(key)-1]) + "A"
	for _, raw := range []string{string(key), "not-a-key", tampered} {
		rec, ok := lookup(store, raw)
		fmt.Printf("%v %q\n", ok, rec.CallID)
	}
	fmt.Println("log as", key.Fingerprint())
	// Output:
	// true "call_1"
	// false ""
	// false ""
	// log as 3f669928
}

func ExampleResolve() {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	defaults := completion.Options{Deadline: "2h", HeartbeatTimeout: "5m"} // from the tool's config
	if err := defaults.Validate(); err != nil {
		panic(err)
	}
	answer := completion.Options{Deadline: "90m", OnTimeout: completion.OnTimeoutFailTurn} // from the pending answer

	r, err := completion.Resolve(now, defaults, answer)
	if err != nil {
		panic(err)
	}
	fmt.Println(r.Deadline, r.HeartbeatDeadline, r.OnTimeout, r.OnCancel)

	r = r.Heartbeat(now.Add(3 * time.Minute)) // the call now times out at 12:08 unless another comes
	fmt.Println(r.HeartbeatDeadline)

	_, err = completion.Resolve(now, defaults, completion.Options{Deadline: "2026-02-28T00:00:00Z"})
	fmt.Println(errors.Is(err, completion.ErrInvalidOptions))
	fmt.Println(err)
	// Output:
	// 2026-03-01 13:30:00 +0000 UTC 2026-03-01 12:05:00 +0000 UTC fail_turn cancel_external_work
	// 2026-03-01 12:08:00 +0000 UTC
	// true
	// completion: invalid pending options: deadline "2026-02-28T00:00:00Z": not in the future
}

func ExampleSigner_Verify() {
	// The test vector of the Standard Webhooks specification.
	s, err := completion.NewSigner("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		panic(err)
	}
	body := []byte(`{"test": 2432232314}`)
	h := http.Header{}
	h.Set("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek")
	h.Set("webhook-timestamp", "1614265330")
	h.Set("webhook-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")

	sent := time.Unix(1614265330, 0)
	fmt.Println(s.Verify(h, body, sent.Add(time.Minute), completion.DefaultTolerance))
	fmt.Println(s.Verify(h, body, sent.Add(time.Hour), completion.DefaultTolerance))
	fmt.Println(s.Verify(h, []byte(`{"test": 1}`), sent, completion.DefaultTolerance))
	// Output:
	// <nil>
	// completion: webhook timestamp outside the tolerance: timestamp 1h0m0s old, tolerance 5m0s
	// completion: bad webhook signature: no v1 signature matches
}

func ExampleSigner_Headers() {
	s, err := completion.NewSigner("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		panic(err)
	}
	body := []byte(`{"event":"turn.settled"}`)
	req, err := http.NewRequest(http.MethodPost, "https://example.com/hook", bytes.NewReader(body))
	if err != nil {
		panic(err)
	}
	now := time.Unix(1772366400, 0)
	for k, v := range s.Headers(completion.NewMessageID(), now, body) {
		req.Header.Set(k, v)
	}
	fmt.Println(req.Header.Get("Webhook-Timestamp"))
	fmt.Println(s.Verify(req.Header, body, now, 0))
	// Output:
	// 1772366400
	// <nil>
}
