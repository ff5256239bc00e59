package completion

import (
	"errors"
	"fmt"
	"time"
)

const (
	// DefaultDeadline is the deadline of a pending call that sets none.
	DefaultDeadline = 24 * time.Hour
	// MaxDeadline bounds every deadline: a pending call never waits forever.
	MaxDeadline = 30 * 24 * time.Hour
)

// OnTimeout says what a pending call that reaches a deadline becomes.
type OnTimeout string

const (
	// OnTimeoutErrorAsResult answers the call with a timeout error result
	// and lets the turn go on. The default.
	OnTimeoutErrorAsResult OnTimeout = "error_as_result"
	// OnTimeoutFailTurn fails the whole turn.
	OnTimeoutFailTurn OnTimeout = "fail_turn"
)

// Valid reports whether o is one of the named values ("" is not).
func (o OnTimeout) Valid() bool { return o == OnTimeoutErrorAsResult || o == OnTimeoutFailTurn }

// OnCancel says what turnd does about the external work of a pending call
// whose turn is cancelled.
type OnCancel string

const (
	// OnCancelExternalWork POSTs the key, signed, to the tool's cancel_url.
	// The default.
	OnCancelExternalWork OnCancel = "cancel_external_work"
	// OnCancelIgnore leaves the external work alone; a late completion gets
	// the answer for a settled call.
	OnCancelIgnore OnCancel = "ignore"
)

// Valid reports whether o is one of the named values ("" is not).
func (o OnCancel) Valid() bool { return o == OnCancelExternalWork || o == OnCancelIgnore }

// ErrInvalidOptions: pending options that cannot be used. The errors are
// *OptionsError.
var ErrInvalidOptions = errors.New("completion: invalid pending options")

// OptionsError names the pending option that was rejected and why.
type OptionsError struct {
	Field  string // the option's snake_case name, e.g. "heartbeat_timeout"
	Value  string // the rejected value, as given
	Reason string
}

// maxErrorValue bounds how much of a rejected value an error repeats.
const maxErrorValue = 64

func (e *OptionsError) Error() string {
	v := e.Value
	if len(v) > maxErrorValue {
		v = v[:maxErrorValue] + "..."
	}
	return fmt.Sprintf("%s: %s %q: %s", ErrInvalidOptions, e.Field, v, e.Reason)
}

// Unwrap makes errors.Is(err, ErrInvalidOptions) hold.
func (e *OptionsError) Unwrap() error { return ErrInvalidOptions }

// Options are the pending options of a tool: set under pending: in its
// config (the defaults) and overridable per call by its pending answer. An
// empty field means "not set": the override falls back to the default, the
// default to the package default.
type Options struct {
	// Deadline is when the call times out: a Go duration from the time the
	// call parks ("90s", "2h") or, in a pending answer, an RFC 3339 time.
	// Default DefaultDeadline; never beyond MaxDeadline from now.
	Deadline string `json:"deadline,omitempty" yaml:"deadline,omitempty"`
	// HeartbeatTimeout, a Go duration, makes the call time out when no
	// heartbeat arrives for that long. A heartbeat resets only this clock,
	// never the deadline, so it may not exceed the deadline. Default: none.
	HeartbeatTimeout string `json:"heartbeat_timeout,omitempty" yaml:"heartbeat_timeout,omitempty"`
	// OnTimeout: default OnTimeoutErrorAsResult.
	OnTimeout OnTimeout `json:"on_timeout,omitempty" yaml:"on_timeout,omitempty"`
	// OnCancel: default OnCancelExternalWork.
	OnCancel OnCancel `json:"on_cancel,omitempty" yaml:"on_cancel,omitempty"`
}

// Resolved are pending options made absolute at the time a call parks.
// Times are UTC, truncated to microseconds (what Postgres keeps).
type Resolved struct {
	Deadline time.Time
	// HeartbeatTimeout is zero when the call has no heartbeat clock.
	HeartbeatTimeout time.Duration
	// HeartbeatDeadline is when the call times out unless a heartbeat comes
	// first; [Resolved.Heartbeat] moves it. Zero when HeartbeatTimeout is.
	HeartbeatDeadline time.Time
	OnTimeout         OnTimeout
	OnCancel          OnCancel
}

// Heartbeat returns r after a heartbeat at time at: the heartbeat deadline
// moves to at+HeartbeatTimeout, capped at Deadline, and never backwards (a
// late-arriving earlier heartbeat changes nothing). The deadline itself
// never moves. Without a heartbeat clock r is returned as it is.
func (r Resolved) Heartbeat(at time.Time) Resolved {
	if r.HeartbeatTimeout <= 0 {
		return r
	}
	next := at.UTC().Truncate(time.Microsecond).Add(r.HeartbeatTimeout)
	if next.After(r.Deadline) {
		next = r.Deadline
	}
	if next.After(r.HeartbeatDeadline) {
		r.HeartbeatDeadline = next
	}
	return r
}

// Resolve merges override onto defaults field by field (a set override
// field wins) and makes the result absolute relative to now. It fails with
// an *OptionsError (errors.Is ErrInvalidOptions) when the deadline is not a
// Go duration or RFC 3339 time, is not after now or is beyond
// now+MaxDeadline; when the heartbeat timeout is not a Go duration, is not
// positive or is longer than the time to the deadline; or when on_timeout or
// on_cancel is not a named value.
//
// now is truncated to microseconds first, so a duration under 1µs counts as
// zero. Resolve does not check the default fields an override replaces.
func Resolve(now time.Time, defaults, override Options) (Resolved, error) {
	o := defaults.Merge(override)
	now = now.UTC().Truncate(time.Microsecond)

	deadline, err := parseDeadline(now, o.Deadline)
	if err != nil {
		return Resolved{}, err
	}
	r := Resolved{Deadline: deadline}
	if o.HeartbeatTimeout != "" {
		hb, err := parseHeartbeat(o.HeartbeatTimeout, deadline.Sub(now))
		if err != nil {
			return Resolved{}, err
		}
		r.HeartbeatTimeout, r.HeartbeatDeadline = hb, now.Add(hb)
	}
	if r.OnTimeout, err = o.onTimeout(); err != nil {
		return Resolved{}, err
	}
	if r.OnCancel, err = o.onCancel(); err != nil {
		return Resolved{}, err
	}
	return r, nil
}

// Validate checks options given as config defaults, where there is no "now":
// the deadline must be a Go duration (an absolute time in a config file would
// expire) within (0, MaxDeadline], the heartbeat timeout a positive Go
// duration no longer than the deadline, and the enums named values or empty.
// Options that pass Validate also pass Resolve as defaults without an
// override.
func (o Options) Validate() error {
	deadline := DefaultDeadline
	if o.Deadline != "" {
		d, err := time.ParseDuration(o.Deadline)
		if err != nil {
			return &OptionsError{"deadline", o.Deadline, "not a Go duration such as \"24h\" (an absolute time belongs in a pending answer, not in config)"}
		}
		if deadline, err = checkDuration("deadline", o.Deadline, d, MaxDeadline); err != nil {
			return err
		}
	}
	if o.HeartbeatTimeout != "" {
		if _, err := parseHeartbeat(o.HeartbeatTimeout, deadline); err != nil {
			return err
		}
	}
	if _, err := o.onTimeout(); err != nil {
		return err
	}
	_, err := o.onCancel()
	return err
}

// Merge returns o with the fields override sets replaced: a tool's
// configured options over a builtin's, a call's over the tool's.
func (o Options) Merge(override Options) Options {
	if override.Deadline != "" {
		o.Deadline = override.Deadline
	}
	if override.HeartbeatTimeout != "" {
		o.HeartbeatTimeout = override.HeartbeatTimeout
	}
	if override.OnTimeout != "" {
		o.OnTimeout = override.OnTimeout
	}
	if override.OnCancel != "" {
		o.OnCancel = override.OnCancel
	}
	return o
}

// parseDeadline reads a deadline relative to now, which is truncated.
func parseDeadline(now time.Time, s string) (time.Time, error) {
	if s == "" {
		return now.Add(DefaultDeadline), nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		d, err := checkDuration("deadline", s, d, MaxDeadline)
		if err != nil {
			return time.Time{}, err
		}
		return now.Add(d), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, &OptionsError{"deadline", s, "neither a Go duration such as \"90s\" nor an RFC 3339 time"}
	}
	t = t.UTC().Truncate(time.Microsecond)
	switch {
	case !t.After(now):
		return time.Time{}, &OptionsError{"deadline", s, "not in the future"}
	case t.After(now.Add(MaxDeadline)):
		return time.Time{}, &OptionsError{"deadline", s, fmt.Sprintf("more than %v (%d days) from now", MaxDeadline, MaxDeadline/(24*time.Hour))}
	}
	return t, nil
}

// parseHeartbeat reads a heartbeat timeout that may not exceed limit, the
// time to the deadline.
func parseHeartbeat(s string, limit time.Duration) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, &OptionsError{"heartbeat_timeout", s, "not a Go duration such as \"5m\""}
	}
	return checkDuration("heartbeat_timeout", s, d, limit)
}

// checkDuration truncates d to microseconds and checks it is in (0, limit].
func checkDuration(field, s string, d, limit time.Duration) (time.Duration, error) {
	d = d.Truncate(time.Microsecond)
	switch {
	case d <= 0:
		return 0, &OptionsError{field, s, "not positive (the least is 1µs)"}
	case d > limit && field == "deadline":
		return 0, &OptionsError{field, s, fmt.Sprintf("longer than the maximum %v (%d days)", limit, limit/(24*time.Hour))}
	case d > limit:
		return 0, &OptionsError{field, s, "longer than the time to the deadline (" + limit.String() + ")"}
	}
	return d, nil
}

func (o Options) onTimeout() (OnTimeout, error) {
	switch {
	case o.OnTimeout == "":
		return OnTimeoutErrorAsResult, nil
	case o.OnTimeout.Valid():
		return o.OnTimeout, nil
	}
	return "", &OptionsError{"on_timeout", string(o.OnTimeout),
		fmt.Sprintf("not %q or %q", OnTimeoutErrorAsResult, OnTimeoutFailTurn)}
}

func (o Options) onCancel() (OnCancel, error) {
	switch {
	case o.OnCancel == "":
		return OnCancelExternalWork, nil
	case o.OnCancel.Valid():
		return o.OnCancel, nil
	}
	return "", &OptionsError{"on_cancel", string(o.OnCancel),
		fmt.Sprintf("not %q or %q", OnCancelExternalWork, OnCancelIgnore)}
}
