package budget

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Mode is the unit of the size cap.
type Mode string

const (
	// ModeBytes counts the size cap in bytes.
	ModeBytes Mode = "bytes"
	// ModeTokens counts the size cap in tokens, a token being approximated
	// as 4 bytes: a text of n bytes has ceil(n/4) tokens.
	ModeTokens Mode = "tokens"
)

// Window is the part of an oversized output the preview keeps.
type Window string

const (
	// WindowHead keeps the start; the marker comes last.
	WindowHead Window = "head"
	// WindowTail keeps the end; the marker comes first.
	WindowTail Window = "tail"
	// WindowHeadTail keeps both ends, split by Config.HeadShare, with the
	// marker between them.
	WindowHeadTail Window = "head_tail"
	// WindowErrors keeps both ends and, between them, the lines of the
	// dropped middle that look like errors (Config.Patterns), each gap
	// marked. Without such lines it projects exactly as WindowHeadTail.
	WindowErrors Window = "errors"
)

// DefaultPatterns are the error markers of WindowErrors when
// Config.Patterns is empty. Besides them a line is an error line when it
// holds a compiler-style "file.ext:line:col:" diagnostic.
var DefaultPatterns = []string{
	"error", "Error", "ERROR", "panic:", "Traceback", "FAIL", "fatal", "Fatal", "FATAL", "Exception",
}

// Limits on Config.Patterns.
const (
	MaxPatterns      = 64
	MaxPatternLength = 128
)

// Bound tells which cap made a projection drop content.
type Bound string

const (
	// BoundNone means nothing was dropped.
	BoundNone Bound = ""
	// BoundSize means the output exceeded the size cap.
	BoundSize Bound = "size"
	// BoundLines means the output exceeded the line cap only.
	BoundLines Bound = "lines"
)

// Defaults that [Config.WithDefaults] fills in.
const (
	DefaultLimit     = 16384
	DefaultMaxLines  = 400
	DefaultMode      = ModeBytes
	DefaultWindow    = WindowHeadTail
	DefaultHeadShare = 0.5
)

// Config is the budget of a projection.
//
// A zero numeric field means "use the default" to [Config.WithDefaults] and
// therefore to [New]. A literal zero cap (or a HeadShare of exactly 0) is set
// by passing [NoDefaults] to New.
type Config struct {
	// Limit is the size cap, in the unit of Mode.
	Limit int `json:"limit"`
	// MaxLines is the line cap.
	MaxLines int `json:"max_lines"`
	// Mode is the unit of Limit.
	Mode Mode `json:"mode"`
	// Window is the part of an oversized output that is kept.
	Window Window `json:"window"`
	// HeadShare is the share of the window kept from the head in
	// WindowHeadTail, within [0, 1]. Budget the head leaves unused (because
	// it stopped at a line boundary) goes to the tail.
	HeadShare float64 `json:"head_share"`
	// Patterns are the literal, case-sensitive substrings that make a line
	// an error line in WindowErrors; empty means DefaultPatterns.
	Patterns []string `json:"patterns,omitempty"`
	// TurnLimit caps, in the unit of Mode, what all outputs of one turn
	// keep together; 0 means no turn cap. The budget package only
	// validates it; see [Share] for the split.
	TurnLimit int `json:"turn_limit,omitempty"`
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	if c.Limit == 0 {
		c.Limit = DefaultLimit
	}
	if c.MaxLines == 0 {
		c.MaxLines = DefaultMaxLines
	}
	if c.HeadShare == 0 {
		c.HeadShare = DefaultHeadShare
	}
	return c.withNamedDefaults()
}

// withNamedDefaults fills only Mode and Window: their empty value names
// nothing else, so it means the default even when zeros are literal.
func (c Config) withNamedDefaults() Config {
	if c.Mode == "" {
		c.Mode = DefaultMode
	}
	if c.Window == "" {
		c.Window = DefaultWindow
	}
	return c
}

// ErrInvalidConfig is what every [ConfigError] unwraps to.
var ErrInvalidConfig = errors.New("budget: invalid config")

// ConfigError reports the first invalid field of a [Config].
type ConfigError struct {
	Field  string // the field's JSON name, e.g. "head_share"
	Value  string // the rejected value, formatted
	Reason string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("budget: invalid config: %s %s: %s", e.Field, e.Value, e.Reason)
}

// Unwrap makes errors.Is(err, ErrInvalidConfig) hold.
func (e *ConfigError) Unwrap() error { return ErrInvalidConfig }

// Validate rejects negative caps, unknown modes and windows, and a HeadShare
// outside [0, 1]. Empty Mode and Window are valid: they mean the defaults.
func (c Config) Validate() error {
	switch {
	case c.Limit < 0:
		return &ConfigError{Field: "limit", Value: strconv.Itoa(c.Limit), Reason: "must not be negative"}
	case c.MaxLines < 0:
		return &ConfigError{Field: "max_lines", Value: strconv.Itoa(c.MaxLines), Reason: "must not be negative"}
	case c.TurnLimit < 0:
		return &ConfigError{Field: "turn_limit", Value: strconv.Itoa(c.TurnLimit), Reason: "must not be negative"}
	}
	if err := validatePatterns(c.Patterns); err != nil {
		return err
	}
	switch c.Mode {
	case "", ModeBytes, ModeTokens:
	default:
		return &ConfigError{Field: "mode", Value: strconv.Quote(string(c.Mode)), Reason: `want "bytes" or "tokens"`}
	}
	switch c.Window {
	case "", WindowHead, WindowTail, WindowHeadTail, WindowErrors:
	default:
		return &ConfigError{Field: "window", Value: strconv.Quote(string(c.Window)), Reason: `want "head", "tail", "head_tail" or "errors"`}
	}
	// Written so that NaN fails too.
	if !(c.HeadShare >= 0 && c.HeadShare <= 1) {
		return &ConfigError{Field: "head_share", Value: strconv.FormatFloat(c.HeadShare, 'g', -1, 64), Reason: "must be within [0, 1]"}
	}
	return nil
}

// validatePatterns rejects too many patterns and empty, overlong or
// multi-line ones.
func validatePatterns(ps []string) error {
	if len(ps) > MaxPatterns {
		return &ConfigError{Field: "patterns", Value: strconv.Itoa(len(ps)) + " patterns", Reason: "at most " + strconv.Itoa(MaxPatterns)}
	}
	for _, s := range ps {
		switch {
		case s == "":
			return &ConfigError{Field: "patterns", Value: `""`, Reason: "a pattern must not be empty"}
		case len(s) > MaxPatternLength:
			return &ConfigError{Field: "patterns", Value: strconv.Quote(s[:16] + "…"), Reason: "longer than " + strconv.Itoa(MaxPatternLength) + " bytes"}
		case strings.ContainsAny(s, "\n\r"):
			return &ConfigError{Field: "patterns", Value: strconv.Quote(s), Reason: "a pattern must not span lines"}
		}
	}
	return nil
}

// Option adjusts how [New] reads a Config.
type Option func(*options)

type options struct {
	noDefaults bool
}

// NoDefaults makes [New] take Limit, MaxLines and HeadShare literally, so
// that zero means a zero cap (or, for HeadShare, everything from the tail).
// Empty Mode and Window still mean bytes and head_tail.
func NoDefaults() Option {
	return func(o *options) { o.noDefaults = true }
}
