package sqlstore_test

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/turnd/turnd/store/internal/sqlstore"
	"github.com/turnd/turnd/turn"
)

// A completion row decodes to its completion: hashes, status, heartbeat
// timeout; NULL hashes and payloads stay zero and nil, corrupt hashes fail.
func TestCompletionRow(t *testing.T) {
	t.Parallel()
	key, ph := [32]byte{1, 2, 3, 4}, [32]byte{9}
	payload := []byte(` {"ok": true} `)
	r := sqlstore.CompletionRow{Key: key[:], Payload: payload, PayloadHash: ph[:], SessionID: "s", TurnID: "t",
		CallID: "c", CallName: "wait", Status: "early", OnTimeout: "fail", OnCancel: "ignore", CancelURL: "http://x",
		CallIndex: 3, HeartbeatTimeout: 1500}
	c, err := r.Completion()
	if err != nil {
		t.Fatal(err)
	}
	want := turn.Completion{KeyHash: key, SessionID: "s", TurnID: "t", CallIndex: 3, CallID: "c", CallName: "wait",
		Status: turn.CompletionEarly, HeartbeatTimeout: 1500 * time.Microsecond, OnTimeout: "fail", OnCancel: "ignore",
		CancelURL: "http://x", PayloadHash: ph}
	if string(c.Payload) != string(payload) {
		t.Errorf("payload = %q", c.Payload)
	}
	payload[1] = 'X' // the driver reuses its buffer
	if string(c.Payload) == string(payload) {
		t.Error("the payload shares the row's buffer")
	}
	c.Payload = nil
	if !reflect.DeepEqual(c, want) {
		t.Errorf("Completion() =\n %+v\nwant %+v", c, want)
	}

	r = sqlstore.CompletionRow{Key: key[:], Status: "issued"}
	if c, err := r.Completion(); err != nil || c.Payload != nil || c.PayloadHash != ([32]byte{}) {
		t.Errorf("NULL payload: %+v, %v", c, err)
	}
	for _, bad := range []sqlstore.CompletionRow{{Key: key[:5]}, {Key: key[:], PayloadHash: []byte{1}}} {
		if _, err := bad.Completion(); err == nil {
			t.Errorf("a corrupt hash decoded: %+v", bad)
		}
	}
	if got := len(r.Dest(nil, nil, nil, nil)); got != 18 {
		t.Errorf("Dest has %d destinations, want one per column (18)", got)
	}
}

func TestCheckExpected(t *testing.T) {
	t.Parallel()
	a, b := [32]byte{1}, [32]byte{2}
	items := []turn.Resolution{{KeyHash: a, Expect: turn.CompletionPending}, {KeyHash: b, Expect: turn.CompletionEarly}}
	tests := []struct {
		name     string
		statuses map[[32]byte]turn.CompletionStatus
		want     error
	}{
		{"as expected", map[[32]byte]turn.CompletionStatus{a: turn.CompletionPending, b: turn.CompletionEarly}, nil},
		{"missing", map[[32]byte]turn.CompletionStatus{a: turn.CompletionPending}, turn.ErrNotFound},
		{"moved on", map[[32]byte]turn.CompletionStatus{a: turn.CompletionPending, b: turn.CompletionCompleted}, turn.ErrCompletionState},
		{"first item first", map[[32]byte]turn.CompletionStatus{a: turn.CompletionEarly}, turn.ErrCompletionState},
	}
	for _, tt := range tests {
		err := sqlstore.CheckExpected(items, tt.statuses)
		if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
			t.Errorf("%s: CheckExpected = %v, want %v", tt.name, err, tt.want)
		}
	}
}

// Secret returns the stored secret; on an empty store it inserts the one
// generated and returns what the store kept (another caller's, when that
// one's insert came first).
func TestSecret(t *testing.T) {
	t.Parallel()
	notFound := fmt.Errorf("reading: %w", turn.ErrNotFound)
	tests := []struct {
		name      string
		stored    string // "" none
		racer     string // stored by another caller between the read and the insert
		generated string
		want      string
		wantErr   bool
	}{
		{name: "stored", stored: "old", generated: "new", want: "old"},
		{name: "empty store", generated: "new", want: "new"},
		{name: "lost race", racer: "first", generated: "new", want: "first"},
		{name: "empty secret generated", wantErr: true},
	}
	for _, tt := range tests {
		stored, generates := tt.stored, 0
		get := func() (string, error) {
			if stored == "" {
				return "", notFound
			}
			return stored, nil
		}
		insert := func(v string) error {
			if tt.racer != "" {
				stored = tt.racer
			}
			if stored == "" {
				stored = v
			}
			return nil
		}
		generate := func() (string, error) { generates++; return tt.generated, nil }
		got, err := sqlstore.Secret(get, insert, generate)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("%s: Secret = %q, %v; want %q", tt.name, got, err, tt.want)
		}
		if tt.stored != "" && generates > 0 {
			t.Errorf("%s: generated a secret although one was stored", tt.name)
		}
	}
	broken := errors.New("connection lost")
	if _, err := sqlstore.Secret(func() (string, error) { return "", broken }, nil, nil); !errors.Is(err, broken) {
		t.Errorf("a failed read: %v", err)
	}
	gone := func() (string, error) { return "", notFound }
	if _, err := sqlstore.Secret(gone, func(string) error { return nil }, func() (string, error) { return "x", nil }); err == nil || errors.Is(err, turn.ErrNotFound) {
		t.Errorf("a secret gone after its insert: %v", err)
	}
}
