package completion

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// now is a fixed, non-UTC, sub-microsecond parking time for the tests.
var now = time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.FixedZone("CET", 3600))

// nowUS is now as Resolve uses it: UTC, truncated to microseconds.
var nowUS = now.UTC().Truncate(time.Microsecond)

func TestResolve(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name               string
		defaults, override Options
		want               Resolved
		field              string // the rejected field; "" for success
	}{
		{
			name: "package defaults",
			want: Resolved{Deadline: nowUS.Add(DefaultDeadline), OnTimeout: OnTimeoutErrorAsResult, OnCancel: OnCancelExternalWork},
		},
		{
			name:     "tool defaults",
			defaults: Options{Deadline: "2h", HeartbeatTimeout: "5m", OnTimeout: OnTimeoutFailTurn, OnCancel: OnCancelIgnore},
			want: Resolved{Deadline: nowUS.Add(2 * time.Hour), HeartbeatTimeout: 5 * time.Minute,
				HeartbeatDeadline: nowUS.Add(5 * time.Minute), OnTimeout: OnTimeoutFailTurn, OnCancel: OnCancelIgnore},
		},
		{
			name:     "override wins field by field",
			defaults: Options{Deadline: "2h", HeartbeatTimeout: "5m", OnTimeout: OnTimeoutFailTurn, OnCancel: OnCancelIgnore},
			override: Options{Deadline: "90s", OnCancel: OnCancelExternalWork},
			field:    "heartbeat_timeout", // the default 5m no longer fits in 90s
		},
		{
			name:     "override of every field",
			defaults: Options{Deadline: "2h", HeartbeatTimeout: "5m", OnTimeout: OnTimeoutFailTurn, OnCancel: OnCancelIgnore},
			override: Options{Deadline: "90s", HeartbeatTimeout: "10s", OnTimeout: OnTimeoutErrorAsResult, OnCancel: OnCancelExternalWork},
			want: Resolved{Deadline: nowUS.Add(90 * time.Second), HeartbeatTimeout: 10 * time.Second,
				HeartbeatDeadline: nowUS.Add(10 * time.Second), OnTimeout: OnTimeoutErrorAsResult, OnCancel: OnCancelExternalWork},
		},
		{
			name:     "override keeps unset fields of the defaults",
			defaults: Options{Deadline: "2h", OnTimeout: OnTimeoutFailTurn},
			override: Options{HeartbeatTimeout: "1m"},
			want: Resolved{Deadline: nowUS.Add(2 * time.Hour), HeartbeatTimeout: time.Minute,
				HeartbeatDeadline: nowUS.Add(time.Minute), OnTimeout: OnTimeoutFailTurn, OnCancel: OnCancelExternalWork},
		},
		{
			name:     "an invalid default replaced by the override is not checked",
			defaults: Options{Deadline: "forever", OnTimeout: "explode"},
			override: Options{Deadline: "1h", OnTimeout: OnTimeoutFailTurn},
			want:     Resolved{Deadline: nowUS.Add(time.Hour), OnTimeout: OnTimeoutFailTurn, OnCancel: OnCancelExternalWork},
		},
		{
			name:     "compound duration",
			override: Options{Deadline: "1h30m15.5s"},
			want:     Resolved{Deadline: nowUS.Add(time.Hour + 30*time.Minute + 15500*time.Millisecond), OnTimeout: OnTimeoutErrorAsResult, OnCancel: OnCancelExternalWork},
		},
		{
			name:     "duration truncated to microseconds",
			override: Options{Deadline: "1500ns"},
			want:     Resolved{Deadline: nowUS.Add(time.Microsecond), OnTimeout: OnTimeoutErrorAsResult, OnCancel: OnCancelExternalWork},
		},
		{
			name:     "exactly the maximum",
			override: Options{Deadline: "720h"},
			want:     Resolved{Deadline: nowUS.Add(MaxDeadline), OnTimeout: OnTimeoutErrorAsResult, OnCancel: OnCancelExternalWork},
		},
		{
			name:     "RFC 3339 with offset, in UTC",
			override: Options{Deadline: "2026-03-02T09:00:00+02:00"},
			want:     Resolved{Deadline: time.Date(2026, 3, 2, 7, 0, 0, 0, time.UTC), OnTimeout: OnTimeoutErrorAsResult, OnCancel: OnCancelExternalWork},
		},
		{
			name:     "RFC 3339 with nanoseconds, truncated",
			override: Options{Deadline: "2026-03-01T12:00:00.987654321Z"},
			want:     Resolved{Deadline: time.Date(2026, 3, 1, 12, 0, 0, 987654000, time.UTC), OnTimeout: OnTimeoutErrorAsResult, OnCancel: OnCancelExternalWork},
		},
		{
			name:     "RFC 3339 at exactly the maximum",
			override: Options{Deadline: nowUS.Add(MaxDeadline).Format(time.RFC3339Nano)},
			want:     Resolved{Deadline: nowUS.Add(MaxDeadline), OnTimeout: OnTimeoutErrorAsResult, OnCancel: OnCancelExternalWork},
		},
		{
			name:     "RFC 3339 with a heartbeat up to the deadline",
			override: Options{Deadline: "2026-03-01T11:00:30.123456Z", HeartbeatTimeout: "30s"},
			want: Resolved{Deadline: nowUS.Add(30 * time.Second), HeartbeatTimeout: 30 * time.Second,
				HeartbeatDeadline: nowUS.Add(30 * time.Second), OnTimeout: OnTimeoutErrorAsResult, OnCancel: OnCancelExternalWork},
		},
		{
			name:     "RFC 3339 with a heartbeat past the deadline",
			override: Options{Deadline: "2026-03-01T11:00:30Z", HeartbeatTimeout: "30s"},
			field:    "heartbeat_timeout", // 11:00:00.123456Z + 30s is past 11:00:30Z
		},
		{
			name:     "heartbeat equal to the deadline",
			override: Options{Deadline: "30s", HeartbeatTimeout: "30s"},
			want: Resolved{Deadline: nowUS.Add(30 * time.Second), HeartbeatTimeout: 30 * time.Second,
				HeartbeatDeadline: nowUS.Add(30 * time.Second), OnTimeout: OnTimeoutErrorAsResult, OnCancel: OnCancelExternalWork},
		},
		{name: "RFC 3339 in the past", override: Options{Deadline: "2026-03-01T10:59:59Z"}, field: "deadline"},
		{name: "RFC 3339 equal to now", override: Options{Deadline: nowUS.Format(time.RFC3339Nano)}, field: "deadline"},
		{name: "RFC 3339 within the same microsecond", override: Options{Deadline: "2026-03-01T11:00:00.123456900Z"}, field: "deadline"},
		{name: "RFC 3339 beyond 30 days", override: Options{Deadline: nowUS.Add(MaxDeadline + time.Microsecond).Format(time.RFC3339Nano)}, field: "deadline"},
		{name: "RFC 3339 without zone", override: Options{Deadline: "2026-03-02T09:00:00"}, field: "deadline"},
		{name: "date only", override: Options{Deadline: "2026-03-02"}, field: "deadline"},
		{name: "duration beyond 30 days", override: Options{Deadline: "720h0m0.000001s"}, field: "deadline"},
		{name: "31 days", defaults: Options{Deadline: "744h"}, field: "deadline"},
		{name: "zero duration", override: Options{Deadline: "0s"}, field: "deadline"},
		{name: "bare zero", override: Options{Deadline: "0"}, field: "deadline"},
		{name: "negative duration", override: Options{Deadline: "-1h"}, field: "deadline"},
		{name: "under a microsecond", override: Options{Deadline: "999ns"}, field: "deadline"},
		{name: "number without unit", override: Options{Deadline: "90"}, field: "deadline"},
		{name: "days are not a Go unit", override: Options{Deadline: "2d"}, field: "deadline"},
		{name: "overflowing duration", override: Options{Deadline: "9999999999h"}, field: "deadline"},
		{name: "garbage deadline", override: Options{Deadline: "tomorrow"}, field: "deadline"},
		{name: "padded deadline", override: Options{Deadline: " 90s"}, field: "deadline"},
		{name: "heartbeat zero", override: Options{HeartbeatTimeout: "0s"}, field: "heartbeat_timeout"},
		{name: "heartbeat negative", override: Options{HeartbeatTimeout: "-5s"}, field: "heartbeat_timeout"},
		{name: "heartbeat over the default deadline", override: Options{HeartbeatTimeout: "25h"}, field: "heartbeat_timeout"},
		{name: "heartbeat over the deadline", override: Options{Deadline: "1m", HeartbeatTimeout: "61s"}, field: "heartbeat_timeout"},
		{name: "heartbeat as a time", override: Options{HeartbeatTimeout: "2026-03-01T12:00:00Z"}, field: "heartbeat_timeout"},
		{name: "heartbeat garbage", override: Options{HeartbeatTimeout: "often"}, field: "heartbeat_timeout"},
		{name: "unknown on_timeout", override: Options{OnTimeout: "retry"}, field: "on_timeout"},
		{name: "on_timeout is case-sensitive", override: Options{OnTimeout: "FAIL_TURN"}, field: "on_timeout"},
		{name: "unknown default on_timeout", defaults: Options{OnTimeout: "retry"}, field: "on_timeout"},
		{name: "unknown on_cancel", override: Options{OnCancel: "cancel"}, field: "on_cancel"},
		{name: "unknown default on_cancel", defaults: Options{OnCancel: " ignore"}, field: "on_cancel"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Resolve(now, tt.defaults, tt.override)
			if tt.field != "" {
				var oe *OptionsError
				if !errors.As(err, &oe) || !errors.Is(err, ErrInvalidOptions) || oe.Field != tt.field {
					t.Fatalf("Resolve = %+v, %v; want an *OptionsError on %s", got, err, tt.field)
				}
				if got != (Resolved{}) {
					t.Errorf("Resolve returned %+v along with an error", got)
				}
				if oe.Reason == "" || !strings.Contains(err.Error(), tt.field) {
					t.Errorf("unhelpful error %q", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			if got != tt.want {
				t.Fatalf("Resolve =\n %+v\nwant\n %+v", got, tt.want)
			}
			checkResolved(t, nowUS, got)
		})
	}
}

// checkResolved checks what holds for every successful Resolve.
func checkResolved(t *testing.T, now time.Time, r Resolved) {
	t.Helper()
	for _, tm := range []time.Time{r.Deadline, r.HeartbeatDeadline} {
		if tm.Location() != time.UTC || !tm.Equal(tm.Truncate(time.Microsecond)) {
			t.Fatalf("time %v is not UTC truncated to microseconds", tm)
		}
	}
	if !r.Deadline.After(now) || r.Deadline.After(now.Add(MaxDeadline)) {
		t.Fatalf("deadline %v is not in (now, now+%v]", r.Deadline, MaxDeadline)
	}
	if (r.HeartbeatTimeout == 0) != r.HeartbeatDeadline.IsZero() || r.HeartbeatTimeout < 0 {
		t.Fatalf("heartbeat timeout %v, deadline %v", r.HeartbeatTimeout, r.HeartbeatDeadline)
	}
	if r.HeartbeatTimeout > 0 && (r.HeartbeatDeadline.After(r.Deadline) || !r.HeartbeatDeadline.Equal(now.Add(r.HeartbeatTimeout))) {
		t.Fatalf("heartbeat deadline %v (timeout %v, deadline %v)", r.HeartbeatDeadline, r.HeartbeatTimeout, r.Deadline)
	}
	if !r.OnTimeout.Valid() || !r.OnCancel.Valid() {
		t.Fatalf("enums %q, %q", r.OnTimeout, r.OnCancel)
	}
}

func TestOptionsValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		o     Options
		field string // "" for valid
	}{
		{"empty", Options{}, ""},
		{"all set", Options{Deadline: "2h", HeartbeatTimeout: "2h", OnTimeout: OnTimeoutFailTurn, OnCancel: OnCancelIgnore}, ""},
		{"maximum", Options{Deadline: "720h"}, ""},
		{"heartbeat within the default deadline", Options{HeartbeatTimeout: "24h"}, ""},
		{"heartbeat over the default deadline", Options{HeartbeatTimeout: "24h1s"}, "heartbeat_timeout"},
		{"heartbeat over the deadline", Options{Deadline: "1m", HeartbeatTimeout: "2m"}, "heartbeat_timeout"},
		{"absolute time", Options{Deadline: "2030-01-01T00:00:00Z"}, "deadline"},
		{"beyond the maximum", Options{Deadline: "721h"}, "deadline"},
		{"zero", Options{Deadline: "0s"}, "deadline"},
		{"negative", Options{Deadline: "-1s"}, "deadline"},
		{"garbage", Options{Deadline: "soon"}, "deadline"},
		{"heartbeat zero", Options{HeartbeatTimeout: "0"}, "heartbeat_timeout"},
		{"heartbeat garbage", Options{HeartbeatTimeout: "x"}, "heartbeat_timeout"},
		{"on_timeout", Options{OnTimeout: "nope"}, "on_timeout"},
		{"on_cancel", Options{OnCancel: "nope"}, "on_cancel"},
		{"first bad field reported", Options{Deadline: "x", OnCancel: "nope"}, "deadline"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.o.Validate()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				// Valid defaults resolve.
				r, err := Resolve(now, tt.o, Options{})
				if err != nil {
					t.Fatalf("Resolve of valid defaults: %v", err)
				}
				checkResolved(t, nowUS, r)
				return
			}
			var oe *OptionsError
			if !errors.As(err, &oe) || !errors.Is(err, ErrInvalidOptions) || oe.Field != tt.field {
				t.Fatalf("Validate = %v; want an *OptionsError on %s", err, tt.field)
			}
		})
	}
}

func TestOptionsErrorMessage(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 10_000)
	_, err := Resolve(now, Options{}, Options{Deadline: long})
	if err == nil {
		t.Fatal("no error")
	}
	if len(err.Error()) > 400 {
		t.Errorf("error of %d bytes repeats the whole value", len(err.Error()))
	}
	want := `completion: invalid pending options: on_cancel "later": not "cancel_external_work" or "ignore"`
	if got := (&OptionsError{"on_cancel", "later", `not "cancel_external_work" or "ignore"`}).Error(); got != want {
		t.Errorf("Error() = %s\nwant %s", got, want)
	}
}

func TestOptionsJSON(t *testing.T) {
	t.Parallel()
	in := `{"deadline":"90s","heartbeat_timeout":"10s","on_timeout":"fail_turn","on_cancel":"ignore"}`
	var o Options
	if err := json.Unmarshal([]byte(in), &o); err != nil {
		t.Fatal(err)
	}
	want := Options{Deadline: "90s", HeartbeatTimeout: "10s", OnTimeout: OnTimeoutFailTurn, OnCancel: OnCancelIgnore}
	if o != want {
		t.Fatalf("decoded %+v, want %+v", o, want)
	}
	out, err := json.Marshal(o)
	if err != nil || string(out) != in {
		t.Fatalf("encoded %s, %v; want %s", out, err, in)
	}
	if out, _ := json.Marshal(Options{}); string(out) != "{}" {
		t.Errorf("empty options encode as %s", out)
	}
}

func TestResolvedHeartbeat(t *testing.T) {
	t.Parallel()
	r, err := Resolve(now, Options{Deadline: "10m", HeartbeatTimeout: "4m"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	at := func(d time.Duration) time.Time { return nowUS.Add(d) }
	steps := []struct {
		name        string
		beat        time.Duration // heartbeat at now+beat
		wantBeat    time.Duration // heartbeat deadline at now+wantBeat
		wantTimeout time.Duration
	}{
		{"first heartbeat", time.Minute, 5 * time.Minute, 5 * time.Minute},
		{"an earlier heartbeat arriving late changes nothing", 30 * time.Second, 5 * time.Minute, 5 * time.Minute},
		{"next heartbeat", 4 * time.Minute, 8 * time.Minute, 8 * time.Minute},
		{"capped at the deadline", 8 * time.Minute, 10 * time.Minute, 10 * time.Minute},
		{"past the deadline", 11 * time.Minute, 10 * time.Minute, 10 * time.Minute},
	}
	if got := r.TimeoutAt(); !got.Equal(at(4 * time.Minute)) {
		t.Fatalf("TimeoutAt = %v before any heartbeat", got)
	}
	for _, s := range steps {
		r = r.Heartbeat(at(s.beat).In(time.Local))
		if !r.HeartbeatDeadline.Equal(at(s.wantBeat)) || r.HeartbeatDeadline.Location() != time.UTC {
			t.Fatalf("%s: heartbeat deadline %v, want %v", s.name, r.HeartbeatDeadline, at(s.wantBeat))
		}
		if !r.Deadline.Equal(at(10 * time.Minute)) {
			t.Fatalf("%s: a heartbeat moved the deadline to %v", s.name, r.Deadline)
		}
		if got := r.TimeoutAt(); !got.Equal(at(s.wantTimeout)) {
			t.Fatalf("%s: TimeoutAt = %v, want %v", s.name, got, at(s.wantTimeout))
		}
	}

	none, err := Resolve(now, Options{Deadline: "10m"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := none.Heartbeat(at(time.Minute)); got != none {
		t.Errorf("Heartbeat without a heartbeat clock changed %+v to %+v", none, got)
	}
	if got := none.TimeoutAt(); !got.Equal(none.Deadline) {
		t.Errorf("TimeoutAt = %v, want the deadline %v", got, none.Deadline)
	}
}

func TestEnumsValid(t *testing.T) {
	t.Parallel()
	for _, o := range []OnTimeout{OnTimeoutErrorAsResult, OnTimeoutFailTurn} {
		if !o.Valid() {
			t.Errorf("%q not valid", o)
		}
	}
	for _, o := range []OnCancel{OnCancelExternalWork, OnCancelIgnore} {
		if !o.Valid() {
			t.Errorf("%q not valid", o)
		}
	}
	if OnTimeout("").Valid() || OnCancel("").Valid() || OnTimeout("ignore").Valid() || OnCancel("fail_turn").Valid() {
		t.Error("an unnamed value is valid")
	}
}
